"""The production stack (`scripts/prod`: Aegra replicas on Postgres + Redis) as a child process,
for the integration tests (`--server aegra`) and the fault checks (`python -m bench.prod_faults`)."""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


class ProdStack:
    """`scripts/prod` started with `env`, and the replica URLs, Postgres URI and Redis URL it
    printed. `data_dir` (`PROD_DATA_DIR`) holds the replicas' logs and the Redis data."""

    def __init__(self, env: dict[str, str], data_dir: Path | None = None) -> None:
        self.env = dict(env)
        self.data_dir = data_dir or ROOT / ".data"
        if data_dir is not None:
            self.env["PROD_DATA_DIR"] = str(data_dir)
        self.process: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.urls: list[str] = []
        self.postgres_uri = self.redis_url = ""

    def start(self, replicas: int, timeout: float = 600) -> None:
        """Start the stack and wait until every replica answers `/health`."""
        self.lines = []
        self.process = subprocess.Popen(
            ["scripts/prod"],
            cwd=ROOT,
            env={**self.env, "REPLICAS": str(replicas)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._read, args=(self.process,), daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = "\n".join(self.lines)
            self.urls = re.findall(r"Aegra replica \d+: (http://\S+)", text)
            if found := re.search(r"Postgres: (\S+)\s+Redis: (\S+)", text):
                self.postgres_uri, self.redis_url = found.groups()
            if len(self.urls) >= replicas and self.redis_url:
                break
            if self.process.poll() is not None:
                raise RuntimeError("scripts/prod exited:\n" + text[-4000:])
            time.sleep(0.5)
        else:
            raise RuntimeError("scripts/prod did not start its replicas:\n" + self.log())
        for url in self.urls:
            wait_until(lambda url=url: healthy(url), timeout=deadline - time.monotonic(), what=f"{url}/health")

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line.rstrip())

    def stop(self) -> None:
        """Stop the replicas and the Redis the script started (SIGTERM; SIGKILL after 90 s)."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def log(self) -> str:
        """The script's output and every replica's log."""
        parts = ["\n".join(self.lines)]
        parts += [path.read_text(errors="replace") for path in sorted((self.data_dir / "aegra").glob("replica-*.log"))]
        return "\n".join(parts)


class RoundRobin(httpx.AsyncBaseTransport):
    """Sends each request to the next of several servers in turn (a load balancer in front of
    the replicas), whatever host the request names."""

    def __init__(self, urls: list[str]) -> None:
        self._targets = itertools.cycle([httpx.URL(url) for url in urls])
        self._transport = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = next(self._targets)
        request.url = request.url.copy_with(scheme=target.scheme, host=target.host, port=target.port)
        request.headers["host"] = request.url.netloc.decode()
        return await self._transport.handle_async_request(request)

    async def aclose(self) -> None:
        await self._transport.aclose()


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait_until(check: Any, timeout: float, what: str, every: float = 0.1) -> float:
    """Seconds until `check()` was true; RuntimeError after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(every)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
