"""One user's large ingest against another user's react runs, through a real `langgraph dev`.

    python -m bench.ingest_load [--size-kb 300] [--runs 30] [--modes worker,inline]

One `langgraph dev` on the project's langgraph.json (Postgres store and checkpointer in schema
`bench_ingest`, dropped afterwards; the scripted OpenAI-compatible model server of
tests/openai_server.py, zero latency). User `reader` runs react turns one after the other (a new
thread each, `runs.stream`, 2 model calls + 1 calculator call, their turns remembered as a user's
are by default): first `--runs` of them on a quiet server, then as many as fit while user
`loader` uploads one `--size-kb` KB text document (until the upload is answered), then `--runs`
more on the quiet server again. It prints the reader's p50/p95 run latency quiet (before and after
together, so a change in the machine's other load shows in both) and during the ingest, their
ratio (target <= 1.2), and the ingest's wall time and work (chunks, entities, CPU seconds).

Modes: `worker` (default: the ingest in a low-priority worker process, KB_INGEST_WORKERS=1),
`inline` (KB_INGEST_WORKERS=0: the ingest in the server process, as before worker processes);
each mode starts its own server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from pathlib import Path

import httpx
import numpy as np

from bench.kb_corpus import build_corpus
from bench.server import scripted_dev_server

SCHEMA = "bench_ingest"
KEYS = {"reader": "bench-reader-key-1", "loader": "bench-loader-key-2"}
MODES = {"worker": "1", "inline": "0"}


def project_config(workdir: Path) -> Path:
    """The project's langgraph.json with absolute paths (tests/integration/conftest.py), in `workdir`."""
    from tests.integration.conftest import absolute_config

    return absolute_config(workdir)


def document(size_kb: int) -> bytes:
    """About `size_kb` KB of prose: the labelled corpus's passages, numbered rounds of them."""
    passages = [p.text for p in build_corpus().passages]
    parts: list[str] = []
    size, round_ = 0, 0
    while size < size_kb * 1024:
        round_ += 1
        for text in passages:
            parts.append(f"{text} (Record {round_}.)")
            size += len(parts[-1]) + 2
            if size >= size_kb * 1024:
                break
    return "\n\n".join(parts).encode()


async def react_turn(client, model_server) -> float:
    """One react run on a new thread, streamed to its end; seconds."""
    key = f"rk{uuid.uuid4().hex[:12]}"
    model_server.script(
        key,
        [
            {"content": "", "tool_calls": [{"name": "calculator", "args": {"expression": "17*23"}}]},
            {"content": "17 times 23 is 391."},
        ],
    )
    started = time.perf_counter()
    thread = await client.threads.create()
    async for part in client.runs.stream(
        thread["thread_id"],
        "react",
        input={"messages": [{"role": "user", "content": f"{key} what is 17 times 23?"}]},
        context={"tools": ["calculator"]},
        stream_mode=["updates"],
    ):
        if part.event == "error":
            raise RuntimeError(f"react run failed: {part.data}")
    return time.perf_counter() - started


def _summary(seconds: list[float]) -> dict:
    ms = [s * 1000 for s in seconds]
    return {"runs": len(ms), "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}


async def measure(url: str, model_server, size_kb: int, runs: int) -> dict:
    """The reader's runs quiet (`runs` before the upload and `runs` after it, so a change in the
    machine's other load shows in both) and during the loader's upload (runs that started
    before the upload was answered), and the upload's figures."""
    from langgraph_sdk import get_client

    reader = get_client(url=url, headers={"Authorization": f"Bearer {KEYS['reader']}"})
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {KEYS['loader']}"}, timeout=3600
    ) as loader:
        for _ in range(3):  # warm-up: graph loading, embeddings model, connections
            await react_turn(reader, model_server)
        before = [await react_turn(reader, model_server) for _ in range(runs)]
        kb = f"load-{uuid.uuid4().hex[:6]}"
        (await loader.post("/api/v1/kb", json={"name": kb})).raise_for_status()
        data = document(size_kb)
        started = time.perf_counter()
        upload = asyncio.create_task(
            loader.post(f"/api/v1/kb/{kb}/documents", files={"files": ("large.txt", data, "text/plain")})
        )
        answered: list[float] = []
        upload.add_done_callback(lambda _: answered.append(time.perf_counter()))
        during: list[float] = []
        while not upload.done():
            during.append(await react_turn(reader, model_server))
        answer = await upload
        after = [await react_turn(reader, model_server) for _ in range(runs)]
    answer.raise_for_status()
    body = answer.json()
    quiet = before + after
    return {
        "document_bytes": len(data),
        "quiet_before": _summary(before),
        "quiet_after": _summary(after),
        "quiet": _summary(quiet),
        "during": _summary(during),
        "ratio_p95": _summary(during)["p95_ms"] / _summary(quiet)["p95_ms"],
        "ratio_p50": _summary(during)["p50_ms"] / _summary(quiet)["p50_ms"],
        "ingest": {"wall_s": answered[0] - started, **body.get("work", {}), "chunks_stored": body["kb"]["chunks"]},
    }


def run(size_kb: int, runs: int, mode: str) -> dict:
    """Start the model server and `langgraph dev` (ingest `mode`), measure, stop both, drop the schema."""
    env = {
        "AGENT_API_KEYS": ",".join(f"{user}={key}" for user, key in KEYS.items()),
        "MEMORY_EXTRACTION_DELAY": "3600",
        "KB_INGEST_WORKERS": MODES[mode],
        "KB_INGEST_QUOTA_BYTES": "0",
        "KB_INGEST_QUOTA_CHUNKS": "0",
    }
    with scripted_dev_server(SCHEMA, env, n_jobs=8, config=project_config) as (url, model_server):
        return asyncio.run(measure(url, model_server, size_kb, runs))


def render(mode: str, report: dict) -> str:
    """One mode's figures as text lines."""
    q, d, i = report["quiet"], report["during"], report["ingest"]
    return "\n".join(
        [
            f"ingest load ({mode}): one user's {report['document_bytes'] / 1024:.0f} KB upload vs another user's react runs",
            f"  react quiet          p50 {q['p50_ms']:.0f} ms  p95 {q['p95_ms']:.0f} ms  ({q['runs']} runs; p95 "
            f"{report['quiet_before']['p95_ms']:.0f} ms before the ingest, {report['quiet_after']['p95_ms']:.0f} ms after)",
            f"  react during ingest  p50 {d['p50_ms']:.0f} ms  p95 {d['p95_ms']:.0f} ms  ({d['runs']} runs)",
            f"  ratio p95 {report['ratio_p95']:.2f}x (target <= 1.2), p50 {report['ratio_p50']:.2f}x",
            f"  ingest {i['wall_s']:.1f} s wall, {i.get('chunks', '?')} chunks, {i.get('entities', '?')} entities, "
            f"{i.get('cpu_seconds', '?')} CPU s",
            f"  load average {report['load_average']['start']} at the start, {report['load_average']['end']} at the end",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-kb", type=int, default=300)
    parser.add_argument("--runs", type=int, default=30, help="react runs on the quiet server, before and after")
    parser.add_argument("--modes", default="worker", help="comma-separated: worker, inline")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}: use worker, inline")
    reports = {}
    for mode in modes:
        load = [round(x, 2) for x in os.getloadavg()]
        reports[mode] = run(args.size_kb, args.runs, mode)
        reports[mode]["load_average"] = {"start": load, "end": [round(x, 2) for x in os.getloadavg()]}
        print(render(mode, reports[mode]), flush=True)
    if args.json:
        print(json.dumps(reports, indent=2))


if __name__ == "__main__":
    main()
