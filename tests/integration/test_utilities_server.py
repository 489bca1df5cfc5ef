"""Seed 000's model utilities as HTTP routes through a real `langgraph dev`: title, related
questions, daily tip; the scripted OpenAI-compatible server answers with real tool calls."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.conftest import API_KEYS, key

pytestmark = pytest.mark.integration


def post(dev_server, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{dev_server.url}{path}", json=body, headers={"x-api-key": API_KEYS["alice"]}, timeout=60)


def test_title_of_a_conversation(dev_server, openai_server):
    k = key()
    openai_server.script(
        k, [{"content": "", "tool_calls": [{"name": "Title", "args": {"title": "Otter sleeping habits."}}]}]
    )
    reply = post(
        dev_server,
        "/api/v1/title",
        {
            "messages": [
                {"role": "user", "content": f"{k} why do otters hold hands?"},
                {"role": "assistant", "content": "So they do not drift apart while sleeping."},
            ]
        },
    )
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"title": "Otter sleeping habits"}
    sent = [r for r in openai_server.requests() if k in str(r.get("messages"))][-1]
    assert sent["response_format"]["json_schema"]["name"] == "Title" and sent["tools"] == []
    assert "hold hands" in sent["messages"][-1]["content"]


def test_related_questions_are_deduplicated_and_counted(dev_server, openai_server):
    k = key()
    questions = ["Do otters use tools?", "Do otters use tools?", "Where do sea otters live?", "What do otters eat?"]
    openai_server.script(
        k, [{"content": "", "tool_calls": [{"name": "RelatedQuestions", "args": {"questions": questions}}]}]
    )
    reply = post(
        dev_server,
        "/api/v1/related-questions",
        {"question": f"{k} why do otters hold hands?", "answer": "To stay together.", "count": 2},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"questions": ["Do otters use tools?", "Where do sea otters live?"]}


def test_daily_tip_and_the_errors(dev_server, openai_server):
    k = key()
    openai_server.script(
        k, [{"content": "", "tool_calls": [{"name": "DailyTip", "args": {"tip": "Pin a knowledge base."}}]}]
    )
    reply = httpx.get(
        f"{dev_server.url}/api/v1/daily-tip", params={"topic": k}, headers={"x-api-key": API_KEYS["alice"]}, timeout=60
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["tip"] == "Pin a knowledge base." and len(reply.json()["date"]) == 10

    missing_key = post(
        dev_server,
        "/api/v1/title",
        {"messages": [{"role": "user", "content": "hi"}], "model": "anthropic:claude-sonnet-4"},
    )
    assert missing_key.status_code == 400 and missing_key.json()["error"] == "MODEL_NOT_AVAILABLE"
    assert "ANTHROPIC_API_KEY" in missing_key.json()["message"]
    bad_model = post(
        dev_server, "/api/v1/title", {"messages": [{"role": "user", "content": "hi"}], "model": "nosuch:x"}
    )
    assert bad_model.status_code == 422 and "model" in bad_model.json()["message"]
    bad_body = post(dev_server, "/api/v1/related-questions", {"question": "q", "answer": "a", "count": 99})
    assert bad_body.status_code == 422 and bad_body.json()["details"]["errors"][0]["field"] == "count"
    no_key = httpx.post(f"{dev_server.url}/api/v1/title", json={"messages": [{"role": "user", "content": "hi"}]})
    assert no_key.status_code == 401
