"""A failed run through a real `langgraph dev`: SDK clients get the run's `error` event and
status, and the thread keeps a readable explanation (state and history, so a chat client shows
it after a reload) after which the next message runs and answers."""

from __future__ import annotations

import pytest

from tests.integration.conftest import key, user

pytestmark = pytest.mark.integration

# The graph, the context that makes its first model call the one that fails.
GRAPHS = {
    "react": {},
    "router": {"route": "general"},
    "plan_execute": {},
    "deep_research": {"plan_only": True},
}


async def fail_once(dev_server, openai_server, graph: str, context: dict):
    """A run of `graph` whose model call fails (HTTP 400): (client, thread id, key, stream parts)."""
    client = dev_server.client("alice")
    k = key()
    # Structured calls (plans) try another output method after an error: every attempt fails.
    attempts = 1 if graph == "react" else 4
    refused = {"error": {"status": 400, "message": f"model refused {k}"}}
    openai_server.script(k, [*[refused] * attempts, f"Hello again {k}."])
    thread = (await client.threads.create())["thread_id"]
    parts = [
        part
        async for part in client.runs.stream(
            thread, graph, input=user(f"{k} hi"), context=context, stream_mode=["values", "messages-tuple"]
        )
    ]
    return client, thread, k, parts


@pytest.mark.parametrize("graph", list(GRAPHS))
async def test_a_failed_model_call_leaves_its_explanation_in_the_thread(dev_server, openai_server, graph):
    client, thread, k, parts = await fail_once(dev_server, openai_server, graph, GRAPHS[graph])
    [error] = [part.data for part in parts if part.event == "error"]
    assert error["error"] == "ModelCallError" and f"model refused {k}" in error["message"]
    run_id = next(part.data["run_id"] for part in parts if part.event == "metadata")
    assert (await client.runs.get(thread, run_id))["status"] == "error"

    messages = (await client.threads.get_state(thread))["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai"]
    explanation = messages[-1]["content"]
    assert f"model refused {k}" in explanation and "again" in explanation
    # streamed to the client before the error (its `values`), and in the thread's history
    streamed = [part.data for part in parts if part.event == "values"][-1]["messages"]
    assert streamed[-1]["content"] == explanation
    history = await client.threads.get_history(thread, limit=5)
    assert any(h["values"]["messages"][-1]["content"] == explanation for h in history)


async def test_the_next_message_after_a_failed_run_answers_at_once(dev_server, openai_server):
    client, thread, k, _ = await fail_once(dev_server, openai_server, "react", {})
    state = await client.runs.wait(thread, "react", input=user("Are you there?"))
    assert [m["type"] for m in state["messages"]] == ["human", "ai", "human", "ai"]
    assert state["messages"][-1]["content"] == f"Hello again {k}."
    sent = [r for r in openai_server.requests() if k in str(r.get("messages"))][-1]["messages"]
    assert [m["role"] for m in sent][-3:] == ["user", "assistant", "user"]
