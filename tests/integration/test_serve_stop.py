"""Stopping `scripts/serve` stops everything the server started, the generative-UI bundler too.

`langgraph dev` starts the bundler as `npx -y @langchain/langgraph-ui@latest watch` and, when it
stops, terminates that `npx` process only: the `node` it started lived on after every stop. Here a
stand-in `npx` starts a long-lived child the same way, so the test needs no download."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from scripts.free_port import free_port
from tests.integration.conftest import server_env
from tests.integration.test_serve_without_node import project_copy, start_serve, wait_served

pytestmark = pytest.mark.integration


def running(marker: str) -> list[str]:
    """The command lines of this machine's processes that hold `marker`."""
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True, check=False)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


def stand_in_node(bin_dir: Path, marker: str) -> None:
    """`node` and an `npx` that, like `npm exec`, runs the bundler as a child and waits for it."""
    bin_dir.mkdir()
    (bin_dir / "node").symlink_to("/bin/true")
    bundler = bin_dir / marker
    bundler.symlink_to(subprocess.run(["which", "sleep"], capture_output=True, text=True).stdout.strip())
    npx = bin_dir / "npx"
    npx.write_text(f'#!/bin/sh\n"{bundler}" 3600 &\nwait\n')
    npx.chmod(0o755)


def test_a_stopped_server_leaves_no_ui_bundler_behind(tmp_path, pg_uri, openai_server):
    marker = f"ui-bundler-{uuid.uuid4().hex[:10]}"
    project = project_copy(tmp_path / "project")
    stand_in_node(tmp_path / "bin", marker)
    env = server_env(
        openai_server,
        PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        PYTHON=sys.executable,
        POSTGRES_URI=pg_uri,
        POSTGRES_SCHEMA="it_serve_stop",
        PORT=str(free_port()),
        N_JOBS_PER_WORKER="2",
    )
    log_path = tmp_path / "serve.log"
    serve = start_serve(project, env, log_path)
    try:
        wait_served(serve, log_path, also=lambda: bool(running(marker)))
        serve.send_signal(signal.SIGTERM)  # the script alone, as a supervisor stops it
        serve.wait(timeout=60)
        deadline = time.monotonic() + 10
        while running(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert running(marker) == [], log_path.read_text(errors="replace")[-3000:]
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        for line in running(marker):
            os.kill(int(line.split()[0]), signal.SIGKILL)
