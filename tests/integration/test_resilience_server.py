"""Stops through a real `langgraph dev`: Postgres going down and coming back under the server,
the server process killed under scripts/serve, and runs stopped in the middle (cancelled during a slow tool, or by the recursion limit) that
must leave the thread valid: no tool call without its result, and the next run works."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from scripts.free_port import free_port
from server.api_checks import MIN_RECURSION_LIMIT
from store.postgres import stop_embedded_postgres
from tests.integration.conftest import ROOT, DevServer, absolute_config, key, server_env, user
from tests.web_servers import LoopbackServer, Reply

pytestmark = pytest.mark.integration


def start_postgres(env: dict[str, str]) -> None:
    """Start the test's embedded Postgres again (a process of its own, as an operator would)."""
    started = subprocess.run(
        [sys.executable, "-m", "store.postgres", "start"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr


def assert_unavailable(reply: httpx.Response) -> None:
    """A 503 in the routes' error shape, naming the database."""
    assert reply.status_code == 503, (reply.status_code, reply.text)
    body = reply.json()
    assert body["error"] == "DATABASE_UNAVAILABLE" and "database" in body["message"].lower()
    assert isinstance(body["details"], dict)


async def test_postgres_down_answers_503_keeps_the_connection_and_recovers(restartable, openai_server):
    client = restartable.client(None)
    k = key()
    openai_server.script(k, ["before", "after"])
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "react", input=user(f"{k} one"))

    stop_embedded_postgres()
    async with httpx.AsyncClient(base_url=restartable.url, timeout=60) as http:
        # One client, one kept-alive connection: every answer arrives on it, none is dropped.
        for method, path in [
            ("GET", "/api/v1/kb"),
            ("GET", f"/threads/{tid}/state"),
            ("POST", "/store/items/search"),
            ("GET", "/api/v1/kb"),
        ]:
            body = {"namespace_prefix": ["memories"]} if method == "POST" else None
            started = time.monotonic()
            reply = await http.request(method, path, json=body)
            print(f"{method} {path}: {reply.status_code} in {time.monotonic() - started:.2f} s")
            assert_unavailable(reply)
        tools = await http.get("/api/v1/tools")
        print(f"GET /api/v1/tools: {tools.status_code}")
        assert tools.status_code in (200, 503), tools.text
        if tools.status_code == 503:
            assert_unavailable(tools)

        await asyncio.to_thread(start_postgres, restartable.env)
        back = time.monotonic()
        # The server reconnects by itself: each route (checkpoints, store, knowledge bases) serves again.
        for path in (f"/threads/{tid}/state", "/api/v1/kb"):
            deadline = back + 60
            while True:
                reply = await http.get(path)
                if reply.status_code != 503 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            print(f"{path} served {time.monotonic() - back:.2f} s after Postgres was back")
            assert reply.status_code == 200, reply.text
        state = (await http.get(f"/threads/{tid}/state")).json()
        assert [m["content"] for m in state["values"]["messages"]][-1] == "before"
    final = await client.runs.wait(tid, "react", input=user("two"))
    assert final["messages"][-1]["content"] == "after"


async def stream_while_postgres_stops(client, thread_id: str, text_in: str, restart_after: float | None, env) -> tuple:
    """Stream a run of `text_in`, stop Postgres once 40 characters have streamed (and start it
    again `restart_after` s later): the streamed text, the stream's events, when Postgres stopped."""
    text = ""
    events: list = []
    stopped_at: list[float] = []
    restart: list[asyncio.Task] = []

    async def restart_later() -> None:
        await asyncio.sleep(restart_after or 0)
        await asyncio.to_thread(start_postgres, env)

    async for part in client.runs.stream(thread_id, "react", input=user(text_in), stream_mode=["messages-tuple"]):
        events.append(part)
        if part.event == "messages":
            chunk = part.data[0]
            if chunk.get("type") == "AIMessageChunk" and isinstance(chunk.get("content"), str):
                text += chunk["content"]
        if len(text) > 40 and not stopped_at:
            await asyncio.to_thread(stop_embedded_postgres)
            stopped_at.append(time.monotonic())
            if restart_after is not None:
                restart.append(asyncio.create_task(restart_later()))
    if restart:
        await restart[0]
    return text, events, stopped_at[0]


async def test_a_run_waits_for_postgres_to_come_back_and_fails_clearly_when_it_does_not(restartable, openai_server):
    client = restartable.client(None)
    k = key()
    words = "the streamed answer keeps coming " * 12
    openai_server.script(k, [{"content": words, "delay_per_token": 0.1}] * 2)
    # Postgres stopped mid-run and started again 1 s later: the run waits for it and ends
    # normally; the thread has the question and the answer once, the client got each token once.
    thread = await client.threads.create()
    text, events, stopped = await asyncio.wait_for(
        stream_while_postgres_stops(client, thread["thread_id"], f"{k} talk", 1.0, restartable.env), 120
    )
    print(f"the run ended {time.monotonic() - stopped:.2f} s after Postgres stopped (started again after 1 s)")
    assert [p.event for p in events if p.event == "error"] == [], [p.data for p in events if p.event == "error"]
    assert text == words
    messages = (await client.threads.get_state(thread["thread_id"]))["values"]["messages"]
    assert [(m["type"], m["content"]) for m in messages] == [("human", f"{k} talk"), ("ai", words)]
    runs = await client.runs.list(thread["thread_id"])
    assert [r["status"] for r in runs] == ["success"]

    # Postgres stopped and kept down: the run waits DATABASE_RECOVERY_WAIT (4 s), then ends with a
    # clear error after what it streamed.
    thread = await client.threads.create()
    text, events, stopped = await asyncio.wait_for(
        stream_while_postgres_stops(client, thread["thread_id"], f"{k} talk again", None, restartable.env), 120
    )
    ended = time.monotonic() - stopped
    print(f"the run ended {ended:.2f} s after Postgres stopped")
    assert text.startswith("the streamed answer") and len(text) > 40
    errors = [p.data for p in events if p.event == "error"]
    assert errors, [p.event for p in events][-5:]
    assert errors[-1]["error"] == "DatabaseUnavailable", errors[-1]
    assert "database" in errors[-1]["message"].lower()
    assert ended >= 4, ended  # it waited


@pytest.fixture(scope="module")
def slow_pages():
    """A loopback web server whose page takes long to answer."""
    page = "<html><body><h1>Slow</h1><p>A page that takes its time.</p></body></html>"
    with LoopbackServer({"/slow": Reply(body=page, delay=15)}) as server:
        yield server


@pytest.fixture(scope="module")
def web_server(pg_uri, openai_server, slow_pages, tmp_path_factory):
    """A dev server whose web tools may fetch loopback pages."""
    env = server_env(openai_server, POSTGRES_URI=pg_uri, POSTGRES_SCHEMA="it_stops", WEB_ALLOW_LOOPBACK="1")
    server = DevServer(tmp_path_factory.mktemp("stops-dev"), env)
    server.start()
    yield server
    server.stop()


def unanswered_calls(state: dict) -> set[str]:
    """Ids of tool calls in the thread's messages that have no tool message with their result."""
    messages = state["values"]["messages"]
    called = {call["id"] for m in messages if m["type"] == "ai" for call in m.get("tool_calls") or []}
    return called - {m["tool_call_id"] for m in messages if m["type"] == "tool"}


def read_slow_page(slow_pages: LoopbackServer, call_id: str) -> dict:
    """A scripted model answer asking web_read for the slow page."""
    return {
        "content": "",
        "tool_calls": [{"name": "web_read", "args": {"urls": [slow_pages.url("/slow")]}, "id": call_id}],
    }


async def test_runs_cancelled_during_a_slow_tool_leave_no_unanswered_tool_call(web_server, openai_server, slow_pages):
    client = web_server.client(None)
    k = key()
    after_stops = [0.0, 0.3, 1.0]  # seconds after the tool started fetching
    openai_server.script(k, [*(read_slow_page(slow_pages, f"c{i}") for i in range(len(after_stops))), "recovered fine"])
    thread = await client.threads.create()
    tid = thread["thread_id"]
    for i, wait in enumerate(after_stops):
        fetched = len(slow_pages.requests_to("/slow"))
        run = await client.runs.create(tid, "react", input=user(f"{k} read the slow page ({i})"))
        deadline = time.monotonic() + 60
        while len(slow_pages.requests_to("/slow")) == fetched and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert len(slow_pages.requests_to("/slow")) > fetched  # the tool is running
        await asyncio.sleep(wait)
        await client.runs.cancel(tid, run["run_id"], wait=True, action="interrupt")
        assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"
        state = await client.threads.get_state(tid)
        assert unanswered_calls(state) == set(), state["values"]["messages"]

    final = await client.runs.wait(tid, "react", input=user("are you still there?"))
    assert final["messages"][-1]["content"] == "recovered fine"
    state = await client.threads.get_state(tid)
    assert unanswered_calls(state) == set() and state["next"] == []
    # the model was sent a valid history: no call of the stopped runs, nothing to repair
    sent = [r for r in openai_server.requests() if k in str(r.get("messages"))][-1]["messages"]
    assert not any(m.get("tool_calls") for m in sent) and not any(m["role"] == "tool" for m in sent)


async def test_a_run_stopped_by_the_recursion_limit_leaves_no_unanswered_tool_call(web_server, openai_server):
    client = web_server.client(None)
    k = key()

    def calculate(call_id: str) -> dict:
        return {"content": "", "tool_calls": [{"name": "calculator", "args": {"expression": "6*7"}, "id": call_id}]}

    # The smallest limit accepted (server/api_checks.py) runs out on the third tool call.
    openai_server.script(k, [calculate("r0"), calculate("q1"), calculate("r1"), "It is 42, after all"])
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(
        tid, "react", input=user(f"{k} what is 6*7?"), config={"recursion_limit": MIN_RECURSION_LIMIT}
    )
    await client.runs.join(tid, run["run_id"])
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "error"
    state = await client.threads.get_state(tid)
    assert unanswered_calls(state) == set(), state["values"]["messages"]
    # What the stopped run wanted is kept aside, and a run with no input carries it out.
    assert state["next"] == ["tools"]
    assert [c["id"] for c in state["values"]["pending_tool_calls"]["tool_calls"]] == ["r1"]
    final = await client.runs.wait(tid, "react", input=None)
    assert final["messages"][-1]["content"] == "It is 42, after all"
    state = await client.threads.get_state(tid)
    assert unanswered_calls(state) == set() and state["next"] == []
    assert "42" in [m for m in state["values"]["messages"] if m["type"] == "tool"][0]["content"]


def listening_pids(port: int) -> set[int]:
    """Pids of the processes holding a listening IPv4 socket on `port` (from /proc)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: LISTEN
            inodes.add(f"socket:[{fields[9]}]")
    pids = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            fds = list(fd_dir.iterdir())
        except OSError:  # a process that ended, or not ours to read
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in inodes:
                    pids.add(int(fd_dir.parent.name))
                    break
            except OSError:  # a file closed since the listing (a server starting up opens and closes many)
                continue
    return pids


def test_a_killed_server_process_ends_scripts_serve_and_frees_the_port(tmp_path, openai_server, pg_uri):
    """`kill -9` of the process serving scripts/serve's port: the script ends (with the
    server's status) instead of keeping the port open for requests that would hang, so a
    supervisor sees the failure and can start it again."""
    port = free_port()
    env = server_env(openai_server, POSTGRES_URI=pg_uri, POSTGRES_SCHEMA="it_serve", PORT=str(port))
    log_path = tmp_path / "serve.log"
    config = absolute_config(tmp_path)  # without the UI bundle, which needs npx (as DevServer)
    with open(log_path, "wb") as log:
        serve = subprocess.Popen(
            [str(ROOT / "scripts" / "serve"), "--config", str(config)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while "LangGraph server ready" not in log_path.read_text(errors="replace"):
            assert serve.poll() is None and time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.5)
        # the port it serves on: the one asked for, or the next free one when another process
        # took it since free_port() (scripts/serve says so)
        port = int(re.search(r"LangGraph server ready: http://127\.0\.0\.1:(\d+)", log_path.read_text())[1])
        serving = listening_pids(port)
        assert serving, f"nothing listens on {port}: {log_path.read_text(errors='replace')}"
        for pid in serving:
            os.kill(pid, signal.SIGKILL)
        assert serve.wait(timeout=60) != 0  # ended, not waiting on a dead server
        with pytest.raises(httpx.ConnectError):  # nothing holds the port: refused at once, no hang
            httpx.get(f"http://127.0.0.1:{port}/ok", timeout=10)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
