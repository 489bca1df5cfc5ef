"""Models that do not follow the API to the letter, through a real `langgraph dev`: tool calls
written as text, token usage, and the run deadline."""

from __future__ import annotations

import pytest

from tests.integration.conftest import key, user

pytestmark = pytest.mark.integration


async def stream(client, thread_id: str, message: dict, context: dict | None = None) -> dict[str, list]:
    events: dict[str, list] = {}
    async for part in client.runs.stream(
        thread_id, "react", input=message, context=context or {}, stream_mode=["custom", "values"]
    ):
        events.setdefault(part.event, []).append(part.data)
    return events


def custom(events: dict[str, list], kind: str) -> list[dict]:
    return [e for e in events.get("custom", []) if e["event"] == kind]


async def test_a_tool_call_written_as_text_runs_and_usage_is_reported(dev_server, openai_server):
    client = dev_server.client()
    k = key()
    written = '```json\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n```'
    openai_server.script(k, [written, "It is 42."])
    thread = await client.threads.create()
    events = await stream(client, thread["thread_id"], user(f"{k} what is 6*7?"))

    assert "error" not in events, events.get("error")
    (recovered,) = custom(events, "tool_calls_recovered")
    assert recovered["recovered"] == 1 and recovered["names"] == ["calculator"]
    (finished,) = custom(events, "tool_call_finished")
    assert finished["name"] == "calculator" and "42" in finished["result_preview"]
    messages = events["values"][-1]["messages"]
    assert messages[1]["tool_calls"][0]["args"] == {"expression": "6*7"} and "```" not in messages[1]["content"]
    assert messages[-1]["content"] == "It is 42."
    usage = custom(events, "model_usage")
    assert len(usage) == 2 and all(u["input_tokens"] > 0 for u in usage)


async def test_a_run_past_its_deadline_ends_with_a_streamed_message(dev_server, openai_server):
    client = dev_server.client()
    k = key()
    openai_server.script(k, [{"content": "too late", "delay": 5}, {"content": "too late", "delay": 5}])
    thread = await client.threads.create()
    events = await stream(client, thread["thread_id"], user(f"{k} hello"), {"run_timeout": 1, "model_retries": 2})

    assert "error" not in events, events.get("error")
    (exceeded,) = custom(events, "run_deadline_exceeded")
    assert exceeded["deadline_s"] == 1 and exceeded["stage"] == "model"
    answer = events["values"][-1]["messages"][-1]
    assert answer["type"] == "ai" and "ran out of time" in answer["content"]
    assert custom(events, "model_error") == []


async def test_the_deadline_holds_inside_a_sub_agent(dev_server, openai_server):
    """The router hands the message to react (a subgraph): the run's clock is the same there."""
    client = dev_server.client()
    k = key()
    openai_server.script(k, [{"content": "too late", "delay": 5}, {"content": "too late", "delay": 5}])
    thread = await client.threads.create()
    custom_events, errors = [], []
    async for part in client.runs.stream(
        thread["thread_id"],
        "router",
        input=user(f"{k} hello"),
        context={"route": "react", "run_timeout": 1, "model_retries": 2},
        stream_mode=["custom"],
        stream_subgraphs=True,
    ):
        if part.event.startswith("custom"):
            custom_events.append(part.data)
        elif part.event == "error":
            errors.append(part.data)
    assert errors == []
    assert [e["stage"] for e in custom_events if e["event"] == "run_deadline_exceeded"] == ["model"]
    state = await client.threads.get_state(thread["thread_id"])
    assert "ran out of time" in state["values"]["messages"][-1]["content"]
