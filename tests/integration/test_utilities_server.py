"""Seed 000's model utilities as HTTP routes through a real `langgraph dev`: title, related
questions, daily tip; the scripted OpenAI-compatible server answers with real tool calls."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.integration.conftest import API_KEYS, key, user

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


SPACES = [
    {"label": "Work", "description": "projects and colleagues", "emoji": "W"},
    {"label": "Pets", "description": "animals at home"},
]


def test_title_and_space_picks_one_of_the_spaces_sent(dev_server, openai_server):
    k = key()
    openai_server.script(
        k,
        [
            {
                "content": "",
                "tool_calls": [{"name": "TitleAndSpace", "args": {"title": "Otter diet", "space": "Pets"}}],
            },
        ],
    )
    reply = post(dev_server, "/api/v1/title-and-space", {"message": f"{k} what do otters eat?", "spaces": SPACES})
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"title": "Otter diet", "space": SPACES[1]}
    sent = [r for r in openai_server.requests() if k in str(r.get("messages"))][-1]
    schema = sent["response_format"]["json_schema"]["schema"]
    assert "Work" in json.dumps(schema["properties"]["space"]) and "Pets" in json.dumps(schema)
    assert "animals at home" in sent["messages"][-1]["content"]
    missing = post(dev_server, "/api/v1/title-and-space", {"spaces": SPACES})
    assert missing.status_code == 422 and missing.json()["details"]["errors"][0]["field"] == "message"


def test_title_space_agent_and_agent_for_auto(dev_server, openai_server):
    k, k_auto, k_none = key(), key(), key()
    spaces = [
        {"label": "Work", "agents": [{"name": "Planner", "description": "plans projects"}, "Writer"]},
        {"label": "Pets", "agents": ["Vet"]},
    ]
    choice = {"title": "Quarterly plan", "space": "Work", "agent": "Planner"}
    openai_server.script(k, [{"content": "", "tool_calls": [{"name": "TitleSpaceAgent", "args": choice}]}])
    reply = post(dev_server, "/api/v1/title-space-agent", {"message": f"{k} plan Q3", "spacesWithAgents": spaces})
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"title": "Quarterly plan", "spaceLabel": "Work", "agentName": "Planner"}

    openai_server.script(
        k_auto, [{"content": "", "tool_calls": [{"name": "AgentForAuto", "args": {"agent": "Writer"}}]}]
    )
    auto = post(dev_server, "/api/v1/agent-for-auto", {"message": f"{k_auto} draft a memo", "currentSpace": spaces[0]})
    assert auto.status_code == 200 and auto.json() == {"agentName": "Writer"}
    sent = [r for r in openai_server.requests() if k_auto in str(r.get("messages"))][-1]
    assert "Vet" not in json.dumps(sent["response_format"]) and "Planner" in json.dumps(sent["response_format"])

    # a space without agents: nothing to pick, the model is not asked
    before = len(openai_server.requests())
    empty = post(dev_server, "/api/v1/agent-for-auto", {"message": f"{k_none} hi", "currentSpace": {"label": "Empty"}})
    assert empty.status_code == 200 and empty.json() == {"agentName": None}
    assert not [r for r in openai_server.requests()[before:] if k_none in str(r.get("messages"))]


async def test_clear_empties_the_callers_router_conversation_only(dev_server, openai_server):
    k = key()
    openai_server.script(k, ["Otters hold hands.", "Done."])
    alice = dev_server.client("alice")
    thread = await alice.threads.create()
    tid = thread["thread_id"]
    await alice.runs.wait(tid, "router", input=user(f"{k} why do otters hold hands?"), context={"route": "general"})
    assert len((await alice.threads.get_state(tid))["values"]["messages"]) == 2

    theirs = httpx.post(
        f"{dev_server.url}/api/v1/clear", json={"thread_id": tid}, headers={"x-api-key": API_KEYS["bob"]}, timeout=60
    )
    assert theirs.status_code == 404 and theirs.json()["error"] == "CHAT_NOT_FOUND"
    assert len((await alice.threads.get_state(tid))["values"]["messages"]) == 2

    cleared = post(dev_server, "/api/v1/clear", {"session_id": tid})
    assert cleared.status_code == 200, cleared.text
    assert cleared.json() == {"status": "ok", "thread_id": tid, "removed_messages": 2, "remaining_messages": 0}
    assert (await alice.threads.get_state(tid))["values"]["messages"] == []

    assert post(dev_server, "/api/v1/clear", {"thread_id": str(uuid.uuid4())}).status_code == 404
    assert post(dev_server, "/api/v1/clear", {}).status_code == 422
    react_thread = await alice.threads.create()
    await alice.runs.wait(react_thread["thread_id"], "react", input=user(f"{k} and now?"))
    other_graph = post(dev_server, "/api/v1/clear", {"thread_id": react_thread["thread_id"]})
    assert other_graph.status_code == 400 and other_graph.json()["details"]["graph"] == "react"
