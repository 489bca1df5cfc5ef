"""`scripts/serve` on a machine without Node.js: it starts, serves every graph to langgraph-sdk,
and says in one line that the chat-client cards are off until Node.js is installed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scripts.dev_config import NO_NODE_NOTE, NODE_TOOLS
from scripts.free_port import free_port
from tests.integration.conftest import API_KEYS, ROOT, key, server_env, user

pytestmark = pytest.mark.integration

NODE_COMMANDS = {*NODE_TOOLS, "npm", "corepack"}
START_TIMEOUT_S = 180


def path_without_node(bin_dir: Path) -> str:
    """A PATH of one folder linking every command of this PATH but Node.js's."""
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            target = bin_dir / entry.name
            if entry.name in NODE_COMMANDS or target.exists() or target.is_symlink():
                continue
            if os.access(entry.path, os.X_OK) and not entry.is_dir():
                target.symlink_to(entry.path)
    return str(bin_dir)


def project_copy(folder: Path) -> Path:
    """The project's files linked into `folder`, without its server records and databases, so
    that `scripts/serve` keeps its `.langgraph_api` there."""
    folder.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in {".langgraph_api", ".data", ".git", ".pytest_cache"}:
            (folder / entry.name).symlink_to(entry)
    return folder


def start_serve(project: Path, env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """`scripts/serve` of `project` (run from the folder of `log_path`) in a session of its own,
    its output written to `log_path`."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            ["bash", str(project / "scripts" / "serve")],
            cwd=log_path.parent,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_served(serve: subprocess.Popen, log_path: Path, also: Callable[[], bool] = lambda: True) -> str:
    """Wait until `serve` said it is ready and `also()` holds (failing if it ends or takes more
    than START_TIMEOUT_S); its output so far."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while "LangGraph server ready: " not in log_path.read_text(errors="replace") or not also():
        assert serve.poll() is None, log_path.read_text(errors="replace")[-6000:]
        assert time.monotonic() < deadline, log_path.read_text(errors="replace")[-6000:]
        time.sleep(0.5)
    return log_path.read_text(errors="replace")


@pytest.fixture
def served_without_node(tmp_path, pg_uri, openai_server):
    """`scripts/serve` of a linked copy of the project, on a PATH without Node.js: (its URL, its
    output until it was ready); stopped afterwards."""
    project = project_copy(tmp_path / "project")
    bin_dir = path_without_node(tmp_path / "bin")
    assert not [tool for tool in NODE_COMMANDS if shutil.which(tool, path=bin_dir)]
    env = server_env(
        openai_server,
        PATH=bin_dir,
        PYTHON=sys.executable,
        POSTGRES_URI=pg_uri,
        POSTGRES_SCHEMA="it_no_node",
        PORT=str(free_port()),
        N_JOBS_PER_WORKER="4",
        AGENT_API_KEYS=f"alice={API_KEYS['alice']}",
    )
    log_path = tmp_path / "serve.log"
    serve = start_serve(project, env, log_path)
    try:
        output = wait_served(serve, log_path)
        yield output.split("LangGraph server ready: ", 1)[1].split()[0], output
        assert serve.poll() is None, log_path.read_text(errors="replace")[-6000:]
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGTERM)
            try:
                serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(serve.pid, signal.SIGKILL)
                serve.wait()


async def test_serve_without_node_serves_every_graph_and_says_the_cards_are_off(served_without_node, openai_server):
    from langgraph_sdk import get_client

    url, output = served_without_node
    assert output.count(NO_NODE_NOTE) == 1
    client = get_client(url=url, api_key=API_KEYS["alice"])
    graphs = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    for graph_id in graphs:
        [assistant] = await client.assistants.search(graph_id=graph_id)
        drawn = await client.assistants.get_graph(assistant["assistant_id"])
        assert drawn["nodes"], graph_id
    k = key()
    openai_server.script(k, ["Served without Node."])
    thread = await client.threads.create()
    state = await client.runs.wait(thread["thread_id"], "react", input=user(f"{k} hello"))
    assert state["messages"][-1]["content"] == "Served without Node."
