"""`langgraph dev` killed with SIGKILL (server/dev_persistence.py): what was written just before
is still there at the next start, and a run in flight is retried once, then ends with an error
instead of starting again at every restart."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.conftest import DevServer, key, server_env, user

pytestmark = pytest.mark.integration


@pytest.fixture
def killable(tmp_path, pg_uri, openai_server):
    """A dev server in a working folder of its own (its `.langgraph_api/`), which the test kills."""
    env = server_env(openai_server, POSTGRES_URI=pg_uri, POSTGRES_SCHEMA="it_killed")
    server = DevServer(tmp_path, env)
    server.start()
    yield server
    server.stop()


def kill(server: DevServer) -> None:
    assert server.process is not None
    server.process.kill()  # SIGKILL: no shutdown, no final write
    server.process.wait()


async def test_a_thread_patched_just_before_a_kill_keeps_its_metadata(killable):
    client = killable.client()
    thread = await client.threads.create(metadata={"topic": "first"})
    await client.threads.update(thread["thread_id"], metadata={"topic": "patched", "pinned": True})
    kill(killable)  # well within the runtime's 10-second flush interval
    killable.start()
    again = await killable.client().threads.get(thread["thread_id"])
    assert again["metadata"]["topic"] == "patched" and again["metadata"]["pinned"] is True


async def wait_for_model_call(openai_server, k: str, count: int, timeout: float = 60) -> None:
    """Until the scripted model has been asked `count` times in the conversation keyed `k`."""
    deadline = time.monotonic() + timeout
    while sum(k in str(r.get("messages")) for r in openai_server.requests()) < count:
        assert time.monotonic() < deadline, f"the model was not called {count} times"
        await asyncio.sleep(0.2)


async def test_a_run_that_keeps_killing_the_server_is_retried_once_then_fails(killable, openai_server):
    k = key()
    slow = {"content": "word " * 400, "delay_per_token": 0.5}  # minutes: the run is cut off mid-answer
    openai_server.script(k, [slow, slow, slow])
    client = killable.client()
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "react", input=user(f"{k} tell me a long story"))
    await wait_for_model_call(openai_server, k, 1)
    kill(killable)

    killable.start()  # the run is retried: its second attempt calls the model again
    await wait_for_model_call(openai_server, k, 2)
    kill(killable)

    started = time.monotonic()
    killable.start()
    client = killable.client()
    deadline = time.monotonic() + 30
    while (status := (await client.runs.get(tid, run["run_id"]))["status"]) in ("pending", "running"):
        assert time.monotonic() < deadline, status
        await asyncio.sleep(0.2)
    assert status == "error"
    assert "exceeded max attempts" in killable.log_text()
    # No third attempt reached the model, and the server serves other runs at once.
    assert sum(k in str(r.get("messages")) for r in openai_server.requests()) == 2
    other = key()
    openai_server.script(other, ["Still here."])
    fresh = (await client.threads.create())["thread_id"]
    answer = await client.runs.wait(fresh, "react", input=user(f"{other} hello"))
    assert answer["messages"][-1]["content"] == "Still here."
    assert time.monotonic() - started < 120  # generous: a crash loop would never get here
