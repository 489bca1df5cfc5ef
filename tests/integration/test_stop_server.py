"""A chat client's Stop through a real `langgraph dev`: the client closes the stream of its run
(agent-chat-ui streams resumable runs asking `on_disconnect="continue"`), and the server cancels
the run (HTTP_STREAM_ON_DISCONNECT=cancel, the default; server/disconnect.py): the model call
stops, the thread keeps no half answer and the next message answers at once. With `client`, the
request's own `on_disconnect` decides, and the run goes on."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.conftest import DevServer, key, server_env, user, wait_status

pytestmark = pytest.mark.integration

ANSWER = "The tank float switch is stuck: lift the float and check its cable before restarting. " * 3


async def stream_then_leave(client, thread_id: str, k: str) -> str:
    """Stream a react run as agent-chat-ui does, leave after its first tokens; the run id."""
    run_id, seen = None, ""
    async for part in client.runs.stream(
        thread_id,
        "react",
        input=user(f"{k} What does fault code ZX-4480 mean?"),
        stream_mode=["messages-tuple", "values"],
        stream_resumable=True,
        on_disconnect="continue",
    ):
        if part.event == "metadata":
            run_id = part.data["run_id"]
        elif part.event == "messages":
            seen += part.data[0].get("content") or ""
            if len(seen) > 10:
                break  # Stop: the client closes the stream
    assert run_id and 10 < len(seen) < len(ANSWER)
    return run_id


def model_call(openai_server, k: str) -> dict:
    return [r for r in openai_server.requests() if k in str(r.get("messages"))][0]


async def model_call_ended(openai_server, k: str, timeout: float = 15) -> str:
    """The scripted model's record of the run's call once it stopped streaming: the model server
    sees a dropped connection when it writes its next token, a moment after the run ended."""
    deadline = asyncio.get_running_loop().time() + timeout
    while (status := model_call(openai_server, k)["status"]) == "streaming":
        if asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.1)
    return status


async def test_stop_cancels_the_run_and_the_next_message_answers_at_once(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    openai_server.script(k, [{"content": ANSWER, "delay_per_token": 0.05}, "Here I am."])
    thread = (await client.threads.create())["thread_id"]
    run_id = await stream_then_leave(client, thread, k)

    assert await wait_status(client, thread, run_id, {"interrupted", "success", "error"}) == "interrupted"
    assert await model_call_ended(openai_server, k) == "disconnected"  # the model call was stopped too
    messages = (await client.threads.get_state(thread))["values"]["messages"]
    assert [m["type"] for m in messages] == ["human"]  # no half answer, no failure explanation

    state = await client.runs.wait(thread, "react", input=user("Are you there?"))
    assert [m["type"] for m in state["messages"]] == ["human", "human", "ai"]
    assert state["messages"][-1]["content"] == "Here I am."


@pytest.fixture(scope="module")
def continuing_server(pg_uri, openai_server, tmp_path_factory):
    """A dev server leaving a run to its request's `on_disconnect` (HTTP_STREAM_ON_DISCONNECT=client)."""
    env = server_env(openai_server, POSTGRES_URI=pg_uri, POSTGRES_SCHEMA="it_stop", HTTP_STREAM_ON_DISCONNECT="client")
    server = DevServer(tmp_path_factory.mktemp("stop-client"), env)
    server.start()
    yield server
    server.stop()


async def test_with_client_the_requests_on_disconnect_keeps_the_run_going(continuing_server, openai_server):
    client = continuing_server.client(None)
    k = key()
    openai_server.script(k, [{"content": ANSWER, "delay_per_token": 0.02}])
    thread = (await client.threads.create())["thread_id"]
    run_id = await stream_then_leave(client, thread, k)
    await client.runs.join(thread, run_id)
    assert (await client.runs.get(thread, run_id))["status"] == "success"
    messages = (await client.threads.get_state(thread))["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai"] and messages[-1]["content"] == ANSWER
