"""Hostile and broken input through a real `langgraph dev` (issue: hardening).

Ownership that cannot be handed over by its owner, queued runs that do not outlive a change of
hands, Studio's header not trusted by default, bad contexts and bad input messages refused with
the thread unchanged, NUL characters, a broken tool-call history repaired before the model sees
it, model errors whose message reaches the client, and a Postgres restart under a running server.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import httpx
import pytest
from langgraph_sdk.errors import APIStatusError, PermissionDeniedError

from store.postgres import stop_embedded_postgres
from tests.integration.conftest import AEGRA_NO_MULTITASK, AEGRA_PER_USER, ROOT, key, user

pytestmark = pytest.mark.integration


async def run_error(client, thread_id, run_id, timeout: float = 60) -> dict:
    """Wait until the run ends; return it (with its status)."""
    deadline = time.monotonic() + timeout
    while True:
        run = await client.runs.get(thread_id, run_id)
        if run["status"] in ("success", "error", "interrupted", "timeout") or time.monotonic() > deadline:
            return run
        await asyncio.sleep(0.1)


async def test_a_user_cannot_relabel_a_thread_as_someone_elses(dev_server, openai_server):
    bob, alice = dev_server.client("bob"), dev_server.client("alice")
    k = key()
    thread = await bob.threads.create(metadata={"topic": k})
    with pytest.raises(PermissionDeniedError):
        await bob.threads.update(thread["thread_id"], metadata={"owner": "alice", "note": "phish"})
    assert (await bob.threads.get(thread["thread_id"]))["metadata"]["owner"] == "bob"
    assert await alice.threads.search(metadata={"topic": k}) == []
    # ordinary metadata changes still work
    await bob.threads.update(thread["thread_id"], metadata={"note": "mine"})
    assert (await bob.threads.get(thread["thread_id"]))["metadata"]["note"] == "mine"


@pytest.mark.not_on_aegra(f"{AEGRA_PER_USER} threads (no hand-over); {AEGRA_NO_MULTITASK}")
async def test_a_run_queued_before_a_hand_over_does_not_run_for_its_old_owner(dev_server, openai_server):
    bob, admin = dev_server.client("bob"), dev_server.client()
    k = key()
    openai_server.script(k, ["bob's answer", "never served"])
    thread = await bob.threads.create()
    tid = thread["thread_id"]
    await bob.runs.wait(tid, "react", input=user(f"{k} hello"))
    queued = await bob.runs.create(
        tid, "react", command={"goto": "call_model"}, after_seconds=3, multitask_strategy="enqueue"
    )
    queued_too = await bob.runs.create(
        tid, "react", input=user("summarize this thread"), after_seconds=3, multitask_strategy="enqueue"
    )
    await admin.threads.update(tid, metadata={"owner": "alice"})  # an administrator hands it over
    for run in (queued, queued_too):
        ended = await run_error(admin, tid, run["run_id"])
        assert ended["status"] == "interrupted", ended  # cancelled with the hand-over
    served = [r for r in openai_server.requests() if k in str(r.get("messages"))]
    assert len(served) == 1  # only bob's first turn reached the model
    state = await admin.threads.get_state(tid)
    assert "summarize this thread" not in str(state["values"]["messages"])


async def test_studio_header_is_not_an_administrator_when_keys_are_configured(dev_server):
    studio = {"x-auth-scheme": "langsmith"}
    for path, body in (("/threads/search", {}), ("/store/items/search", {"namespace_prefix": ["memories"]})):
        reply = httpx.post(f"{dev_server.url}{path}", json=body, headers=studio)
        assert reply.status_code == 401, (path, reply.text)


@pytest.mark.parametrize(
    "context, field_name",
    [
        ({"model_retries": 1e9}, "model_retries"),
        ({"tool_timeout": -1}, "tool_timeout"),
        ({"max_steps": "abc"}, "max_steps"),
        ({"user_id": 123}, "user_id"),
        ({"remember": "maybe"}, "remember"),
        ({"model": "nosuch:model"}, "model"),
        ({"tools": ["rm_rf"]}, "tools"),
    ],
)
async def test_a_bad_context_is_refused_with_the_field_named_before_anything_is_written(
    dev_server, context, field_name
):
    client = dev_server.client("alice")
    thread = await client.threads.create()
    with pytest.raises(APIStatusError) as refused:
        async for _ in client.runs.stream(thread["thread_id"], "react", input=user("hi"), context=context):
            pass
    response = refused.value.response
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "VALIDATION_ERROR" and body["details"] == {"field": f"context.{field_name}"}
    assert f"Invalid context field `{field_name}`" in body["message"]
    state = await client.threads.get_state(thread["thread_id"])
    assert not (state["values"] or {}).get("messages") and state["next"] == []
    assert await client.runs.list(thread["thread_id"]) == []  # no run was created


@pytest.mark.parametrize(
    "messages, says",
    [
        ([{"role": "hacker", "content": "hi"}], "hacker"),
        (
            [{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "calculator", "args": {}}]}],
            "no tool message",
        ),
        ([{"role": "tool", "content": "42", "tool_call_id": "zz"}], "tool message for call 'zz'"),
    ],
)
async def test_bad_input_messages_are_refused_and_nothing_is_stored(dev_server, openai_server, messages, says):
    client = dev_server.client("alice")
    k = key()
    openai_server.script(k, ["first answer", "after the bad input"])
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "react", input=user(f"{k} hi"))
    with pytest.raises(APIStatusError) as refused:
        await client.runs.create(tid, "react", input={"messages": messages})
    assert refused.value.response.status_code == 422 and says in refused.value.response.text
    state = await client.threads.get_state(tid)  # readable, as before
    assert [m["content"] for m in state["values"]["messages"]] == [f"{k} hi", "first answer"]
    final = await client.runs.wait(tid, "react", input=user("and now?"))
    assert final["messages"][-1]["content"] == "after the bad input"


async def test_text_with_nul_characters_is_answered_and_recorded(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    openai_server.script(k, ["an answer with a \u0000 inside"])
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "react", input=user(f"{k} nul \u0000 here"))
    ended = await run_error(client, thread["thread_id"], run["run_id"])
    assert ended["status"] == "success", ended
    # this thread's turn only: alice's chat history grows over the session, and a top 20 by
    # similarity alone could leave the answer out (seen once in a full run)
    found = await client.store.search_items(
        ["memories", "alice", "chat"], query=f"{k} nul here", filter={"thread_id": thread["thread_id"]}, limit=20
    )
    texts = [item["value"]["text"] for item in found["items"]]
    assert f"{k} nul  here" in texts and "an answer with a  inside" in texts


async def test_a_broken_tool_call_history_is_repaired_before_the_next_model_call(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    openai_server.script(k, ["fine again"])
    thread = await client.threads.create(graph_id="react")
    tid = thread["thread_id"]
    # What an interrupt during a tool call (or a recursion limit) leaves behind.
    await client.threads.update_state(
        tid,
        {
            "messages": [
                {"role": "user", "content": f"{k} add", "id": "h1"},
                {
                    "role": "assistant",
                    "content": "",
                    "id": "a1",
                    "tool_calls": [{"id": "c1", "name": "calculator", "args": {"expression": "1+1"}}],
                },
            ]
        },
        as_node="call_model",
    )
    final = await client.runs.wait(tid, "react", input=user("still there?"))
    assert final["messages"][-1]["content"] == "fine again"
    sent = [r for r in openai_server.requests() if k in str(r.get("messages"))][-1]["messages"]
    position = next(i for i, m in enumerate(sent) if m.get("tool_calls"))
    assert sent[position + 1]["role"] == "tool" and sent[position + 1]["tool_call_id"] == "c1"
    assert "cancelled" in str(sent[position + 1]["content"])


async def test_a_model_error_reaches_the_client_with_its_message(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    openai_server.script(k, [{"error": {"status": 400, "message": f"model refused {k}"}}])
    thread = await client.threads.create()
    parts = [p async for p in client.runs.stream(thread["thread_id"], "react", input=user(f"{k} hi"))]
    errors = [p.data for p in parts if p.event == "error"]
    assert errors and errors[0]["error"] == "ModelCallError"
    assert f"model refused {k}" in await dev_server.failure_message(client, thread["thread_id"], parts)


async def test_postgres_restart_gives_quick_errors_then_serves_at_once(restartable, openai_server):
    client = restartable.client(None)
    k = key()
    openai_server.script(k, ["before", "while down", {"content": "after", "delay": 0}])
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "react", input=user(f"{k} one"))

    stop_embedded_postgres()
    started = time.monotonic()
    with pytest.raises(Exception):
        await asyncio.wait_for(client.threads.get_state(tid), 30)
    assert time.monotonic() - started < 20
    started = time.monotonic()
    reply = httpx.post(f"{restartable.url}/store/items/search", json={"namespace_prefix": ["memories"]}, timeout=30)
    assert reply.status_code >= 500 and time.monotonic() - started < 20  # an answer, not a dropped connection

    start = subprocess.run(
        [sys.executable, "-m", "store.postgres", "start"],
        cwd=ROOT,
        env=restartable.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert start.returncode == 0, start.stderr
    state = await client.threads.get_state(tid)  # the very first request after the restart works
    assert [m["content"] for m in state["values"]["messages"]][-1] == "before"
