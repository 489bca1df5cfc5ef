"""How many concurrent runs one `langgraph dev` worker should take (`--n-jobs-per-worker`).

    python -m bench.run_slots [--slots 8,32,64] [--runs 50] [--model-delay 1.0]

Agent runs mostly wait on the model, so run slots are cheap until the CPU saturates. For each slot
count one server is started (bench/langgraph.json: react on a Postgres checkpointer, memory off),
the scripted OpenAI-compatible server answers each run after `--model-delay` seconds, and
`--runs` runs are started at once. Printed: p50 / p95 / max run latency, and the same as a ratio
to the first slot count (the baseline) measured in the same run. The ideal latency is the model
delay plus `langgraph dev`'s queue poll (about 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid

import numpy as np

from bench import server as bench_server
from tests.openai_server import spawn_openai_server


async def _one(client, key: str) -> float:
    started = time.perf_counter()
    thread = await client.threads.create()
    result = await client.runs.wait(
        thread["thread_id"],
        "react",
        input={"messages": [{"role": "user", "content": f"{key} hello"}]},
        context={"remember": False, "tools": ["calculator"]},
    )
    if not isinstance(result, dict) or not result.get("messages"):
        raise RuntimeError(f"run failed: {result}")
    return time.perf_counter() - started


async def _measure(url: str, model_server, runs: int, delay: float) -> list[float]:
    from langgraph_sdk import get_client

    client = get_client(url=url)
    keys = [f"slot{uuid.uuid4().hex[:10]}" for _ in range(runs + 1)]
    for key in keys:
        model_server.script(key, [{"content": "done", "delay": delay}])
    await _one(client, keys[0])  # warm-up: graph import, first connections
    return list(await asyncio.gather(*(_one(client, key) for key in keys[1:])))


def run(slots: list[int], runs: int, delay: float) -> list[dict]:
    """Latencies of `runs` concurrent runs for each slot count."""
    from store.postgres import ensure_embedded_postgres

    rows = []
    with spawn_openai_server() as model_server:
        env = {
            **os.environ,
            "POSTGRES_URI": os.environ.get("POSTGRES_URI") or ensure_embedded_postgres(),
            "POSTGRES_SCHEMA": "bench_slots",
            "OPENAI_BASE_URL": model_server.base_url,
            "OPENAI_API_KEY": "bench",
            "AGENT_MODEL": "openai:scripted",
            "LANGSMITH_TRACING": "false",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
        }
        for count in slots:
            with bench_server.dev_server(env, n_jobs=count) as url:
                seconds = asyncio.run(_measure(url, model_server, runs, delay))
            rows.append(
                {
                    "slots": count,
                    "p50": float(np.percentile(seconds, 50)),
                    "p95": float(np.percentile(seconds, 95)),
                    "max": max(seconds),
                }
            )
    return rows


def render(rows: list[dict], runs: int, delay: float) -> str:
    """A table of the figures, ratios against the first row."""
    base = rows[0]
    lines = [
        f"{runs} concurrent react runs, model answers after {delay:g} s (ratios vs {base['slots']} slots)",
        "slots   p50 s   p95 s   max s   p95 ratio",
    ]
    for row in rows:
        lines.append(
            f"{row['slots']:>5} {row['p50']:7.2f} {row['p95']:7.2f} {row['max']:7.2f} {row['p95'] / base['p95']:9.2f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", default="8,32,64")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--model-delay", type=float, default=1.0)
    args = parser.parse_args(argv)
    slots = [int(s) for s in args.slots.split(",")]
    print(render(run(slots, args.runs, args.model_delay), args.runs, args.model_delay))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
