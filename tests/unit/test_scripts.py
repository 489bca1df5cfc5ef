"""scripts/ helpers run as the scripts run them: the serving port, the readiness wait, and the
embedded Postgres command without warnings."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from scripts.ready import wait_ready
from tests.web_servers import LoopbackServer, Reply

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )


def test_a_taken_port_gives_the_next_free_one_and_says_so():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = run("-m", "scripts.free_port", str(port))
    chosen = int(done.stdout)
    assert port < chosen <= port + 100
    assert done.stderr.strip() == f"port {port} is in use: using {chosen}"


def test_a_free_port_is_kept_silently():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = run("-m", "scripts.free_port", str(port))
    assert (int(done.stdout), done.stderr) == (port, "")


def test_ready_waits_for_ok_and_gives_up_when_the_server_is_gone():
    with LoopbackServer({"/ok": Reply(body='{"ok": true}', content_type="application/json")}) as server:
        assert wait_ready(server.base_url, os.getpid(), timeout=10)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert not wait_ready("http://127.0.0.1:9", ended.pid, timeout=10)


def test_embedded_postgres_commands_print_no_runtime_dir_warning(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["EMBEDDED_POSTGRES_DIR"] = str(tmp_path / "pg")
    done = run("-m", "store.postgres", "status", env=env)
    assert done.stdout.strip() == f"embedded postgres at {tmp_path / 'pg'}: stopped"
    assert done.stderr == ""
