"""Server path: N concurrent runs through `langgraph dev` + langgraph-sdk, `react` vs a trivial echo graph.

    python -m bench.server [--concurrency 1,10,50] [--batches B]

One `langgraph dev` serves bench/langgraph.json (react and bench/echo_graph.py, Postgres
checkpointer in schema `bench_server`, dropped afterwards); react's model is the scripted
OpenAI-compatible server (tests/openai_server.py, zero latency) in a child process. Each run is
`runs.stream` on a new thread (messages-tuple + updates); react turns are 2 model calls + 1
calculator call with memory off. Per graph and N: p50/p95 run latency, runs per second, and for
react the delay from the first text token leaving the model server to the client receiving it
(both clocks are this machine's wall clock). `langgraph dev`'s in-memory queue sleeps 0.5 s between
polls and takes only runs created before its sleep began, so a run waits about 1 s before it
starts, for both graphs alike: read react - echo (LangGraph Platform's queue works differently).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from scripts.free_port import free_port

ROOT = Path(__file__).resolve().parents[1]
CONFIG = Path(__file__).resolve().parent / "langgraph.json"
SCHEMA = "bench_server"
LANGGRAPH = Path(sys.executable).with_name("langgraph")
START_TIMEOUT_S = 180


def resolved_config(workdir: Path) -> Path:
    """bench/langgraph.json with its relative paths made absolute, written into `workdir`."""
    config = json.loads(CONFIG.read_text())
    base = CONFIG.parent

    def absolute(path: str) -> str:
        return str((base / path).resolve()) if path.startswith(".") else path

    config["dependencies"] = [absolute(d) for d in config["dependencies"]]
    config["graphs"] = {name: absolute(path) for name, path in config["graphs"].items()}
    config["checkpointer"]["path"] = absolute(config["checkpointer"]["path"])
    target = workdir / "langgraph.json"
    target.write_text(json.dumps(config, indent=2))
    return target


@contextmanager
def dev_server(env: dict[str, str], n_jobs: int = 64, config: Callable[[Path], Path] = resolved_config):
    """`langgraph dev` on a free port in a temporary folder with `n_jobs` run slots, on the
    configuration `config(folder)` writes there (default bench/langgraph.json); yields its URL."""
    with tempfile.TemporaryDirectory(prefix="bench-server-") as folder:
        workdir = Path(folder)
        port = free_port()
        log_path = workdir / "server.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [
                    str(LANGGRAPH),
                    "dev",
                    "--config",
                    str(config(workdir)),
                    "--port",
                    str(port),
                    "--no-browser",
                    "--no-reload",
                    "--n-jobs-per-worker",
                    str(n_jobs),
                ],
                cwd=workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"langgraph dev exited:\n{log_path.read_text()[-4000:]}")
                try:
                    if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"langgraph dev did not start:\n{log_path.read_text()[-4000:]}")
                time.sleep(0.5)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def _one_run(client, graph: str, text: str) -> dict:
    started = time.perf_counter()
    thread = await client.threads.create()
    first_token_at = None
    async for part in client.runs.stream(
        thread["thread_id"],
        graph,
        input={"messages": [{"role": "user", "content": text}]},
        context={"remember": False, "tools": ["calculator"]} if graph == "react" else None,
        stream_mode=["messages-tuple", "updates"],
    ):
        if part.event == "error":
            raise RuntimeError(f"{graph} run failed: {part.data}")
        if first_token_at is None and part.event == "messages":
            chunk = part.data[0]
            if chunk.get("type") == "AIMessageChunk" and chunk.get("content"):
                first_token_at = time.time()
    return {"seconds": time.perf_counter() - started, "first_token_at": first_token_at}


async def _batch(client, model_server, graph: str, n: int) -> tuple[list[dict], float, list[str]]:
    keys = [f"bk{uuid.uuid4().hex[:12]}" for _ in range(n)]
    if graph == "react":
        for key in keys:
            model_server.script(
                key,
                [
                    {"content": "", "tool_calls": [{"name": "calculator", "args": {"expression": "17*23"}}]},
                    {"content": "17 times 23 is 391."},
                ],
            )
    started = time.perf_counter()
    runs = await asyncio.gather(*(_one_run(client, graph, f"{key} what is 17 times 23?") for key in keys))
    return runs, time.perf_counter() - started, keys


def _token_delays(model_server, keys: list[str], runs: list[dict]) -> list[float]:
    sent = {}
    for record in model_server.requests():
        text = json.dumps(record.get("messages", []))
        for key in keys:
            if key in text and record.get("first_content_sent_at"):
                sent[key] = record["first_content_sent_at"]
    return [
        (run["first_token_at"] - sent[key]) * 1000
        for key, run in zip(keys, runs, strict=True)
        if key in sent and run["first_token_at"]
    ]


async def measure(url: str, model_server, concurrency: list[int], batches: int) -> dict:
    """Per graph and N: p50/p95 latency (ms), runs/s, and react's token delay (ms)."""
    from langgraph_sdk import get_client

    client = get_client(url=url)
    for graph in ("echo", "react"):  # warm-up: graph loading, connections
        await _batch(client, model_server, graph, 2)
    report: dict = {}
    for n in concurrency:
        for graph in ("echo", "react"):
            latencies, walls, delays = [], [], []
            rounds = batches if n > 1 else max(batches, 10)
            for _ in range(rounds):
                runs, wall, keys = await _batch(client, model_server, graph, n)
                latencies += [r["seconds"] * 1000 for r in runs]
                walls.append(wall)
                if graph == "react":
                    delays += _token_delays(model_server, keys, runs)
            row = {
                "runs": len(latencies),
                "p50_ms": float(np.percentile(latencies, 50)),
                "p95_ms": float(np.percentile(latencies, 95)),
                "runs_per_s": n * rounds / sum(walls),
            }
            if delays:
                row["token_delay_p50_ms"] = float(np.percentile(delays, 50))
                row["token_delay_p95_ms"] = float(np.percentile(delays, 95))
            report.setdefault(str(n), {})[graph] = row
        both = report[str(n)]
        both["react_vs_echo_p50"] = both["react"]["p50_ms"] / both["echo"]["p50_ms"]
        both["react_minus_echo_p50_ms"] = both["react"]["p50_ms"] - both["echo"]["p50_ms"]
    return report


@contextmanager
def scripted_dev_server(schema: str, env: dict[str, str], **options: Any) -> Iterator[tuple[str, Any]]:
    """The scripted model server and `langgraph dev` (`dev_server` `options`) on the configured
    Postgres, in `schema` (dropped afterwards), offline, with `env` on top; yields (server URL,
    model server)."""
    import psycopg

    from store.postgres import postgres_uri
    from tests.openai_server import spawn_openai_server

    uri = postgres_uri()
    try:
        with spawn_openai_server() as model_server:
            base = {
                **os.environ,
                "POSTGRES_URI": uri,
                "POSTGRES_SCHEMA": schema,
                "OPENAI_BASE_URL": model_server.base_url,
                "OPENAI_API_KEY": "bench",
                "AGENT_MODEL": "openai:scripted",
                "LANGGRAPH_CLI_NO_ANALYTICS": "1",
                "LANGGRAPH_NO_VERSION_CHECK": "true",
                "LANGSMITH_TRACING": "false",
                "PYTHONPATH": str(ROOT),
            }
            with dev_server({**base, **env}, **options) as url:
                yield url, model_server
    finally:
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def run(concurrency: list[int], batches: int = 3) -> dict:
    """Start the model server and `langgraph dev`, measure, stop both, drop the schema."""
    with scripted_dev_server(SCHEMA, {"AGENT_REMEMBER": "false"}) as (url, model_server):
        return asyncio.run(measure(url, model_server, concurrency, batches))


def render(report: dict) -> str:
    """The server figures as text lines."""
    lines = ["server path: langgraph dev + langgraph-sdk, runs.stream on a new thread per run"]
    for n, row in report.items():
        for graph in ("echo", "react"):
            r = row[graph]
            extra = (
                f"  token delay p50 {r['token_delay_p50_ms']:.1f} / p95 {r['token_delay_p95_ms']:.1f} ms"
                if "token_delay_p50_ms" in r
                else ""
            )
            lines.append(
                f"  N={n:<3} {graph:<5} p50 {r['p50_ms']:7.1f} ms  p95 {r['p95_ms']:7.1f} ms  "
                f"{r['runs_per_s']:6.1f} runs/s ({r['runs']} runs){extra}"
            )
        lines.append(
            f"  N={n:<3} react / echo p50: {row['react_vs_echo_p50']:.2f}x "
            f"(react {row['react_minus_echo_p50_ms']:+.0f} ms)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m bench.server`."""
    parser = argparse.ArgumentParser(prog="python -m bench.server", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--concurrency",
        default="1,10",
        type=lambda s: [int(x) for x in s.split(",")],
        help="concurrent runs per batch (default 1,10; the issue's full set is 1,10,50)",
    )
    parser.add_argument("--batches", type=int, default=3, help="batches per N (N=1: at least 10)")
    args = parser.parse_args(argv)
    print(render(run(args.concurrency, args.batches)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
