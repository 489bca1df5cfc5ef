"""A knowledge-base question through the router, this code against another commit's, in one run.

    python -m bench.router_bench --baseline REF [--questions 40] [--rounds 3] [--top-k 5]

Ingests bench/kb_corpus.py's passages into knowledge base `router-bench` (schema
ROUTER_BENCH_SCHEMA, default `bench_router`) once, then times the router graph in process
(`graph.ainvoke` on a fresh thread per question, the product's Postgres store and checkpointer)
answering the corpus's questions with the default plan (hybrid, dense and keyword workers) and no
chat model configured, so the answer is the extracted passages and the time is routing, retrieval and
merging. This code and REF's (checked out in a temporary git worktree) each run in their own
process on the same data, alternating `--rounds` times so both see the same machine; prints the
p50 and p95 wall time and the p50 CPU time (all threads of the process) of each, and their
ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KB = "router-bench"
SCHEMA = os.environ.get("ROUTER_BENCH_SCHEMA", "bench_router")


async def load() -> int:
    """(Re)create the knowledge base with this code; returns its passages."""
    os.environ["POSTGRES_SCHEMA"] = SCHEMA
    from bench.kb_corpus import build_corpus
    from store import knowledge
    from store.postgres import store

    corpus = build_corpus()
    async with store() as pg_store:
        if KB in [kb["name"] for kb in await knowledge.list_kbs(pg_store)]:
            await knowledge.delete_kb(pg_store, KB)
        await knowledge.create_kb(pg_store, KB, "machine maintenance logs, safety registers and shift reports")
        documents = [{"text": p.text, "source": f"bench:{p.id}", "title": p.id} for p in corpus.passages]
        await knowledge.ingest_texts(pg_store, KB, documents, chunk_size=2000, chunk_overlap=0)
    return len(corpus.passages)


async def measure(questions: int, top_k: int) -> list[list[float]]:
    """[wall ms, CPU ms] per question of the router graph of the code on sys.path (run in its
    tree), with the product's store and checkpointer (store/postgres.py, as langgraph.json names
    them)."""
    os.environ["POSTGRES_SCHEMA"] = SCHEMA
    from langchain_core.messages import HumanMessage

    import graphs.router.graph as router
    from bench.kb_corpus import build_corpus
    from graphs.router.context import RouterContext
    from store.postgres import checkpointer, store

    texts = [q.text for q in build_corpus().queries][:questions]
    run = os.getpid()
    async with store() as pg_store, checkpointer() as saver:
        graph = router.builder.compile(checkpointer=saver, store=pg_store)
        context = RouterContext(model="openai:gpt-4o-mini", remember=False, kb=KB, retrieval_top_k=top_k)
        timings = []
        for index, text in enumerate([*texts[:3], *texts]):  # three to warm up
            config = {"configurable": {"thread_id": f"router-bench-{run}-{index}"}}
            started, cpu = time.perf_counter(), time.process_time()
            result = await graph.ainvoke({"messages": [HumanMessage(text)]}, config, context=context)
            elapsed = [(time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000]
            if not result.get("sources"):
                raise RuntimeError(f"no sources for {text!r}: {result['messages'][-1].content[:200]}")
            if index >= 3:
                timings.append(elapsed)
    return timings


def _run_tree(tree: Path, questions: int, top_k: int, env: dict) -> list[list[float]]:
    """`measure` in a process of its own whose product code is `tree`'s."""
    found = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure", str(questions), "--top-k", str(top_k)],
        cwd=tree,
        env={**env, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise RuntimeError(f"measuring {tree} failed:\n{found.stderr[-3000:]}")
    return json.loads(found.stdout.strip().splitlines()[-1])


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="git commit to compare with (checked out in a temporary worktree)")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # internal: one side's timings
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(asyncio.run(measure(args.measure, args.top_k))))
        return 0
    if not args.baseline:
        parser.error("--baseline REF is required")
    from store.postgres import postgres_uri

    passages = asyncio.run(load())
    env = {key: value for key, value in os.environ.items() if key not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(POSTGRES_URI=postgres_uri(), LANGSMITH_TRACING="false")
    sides: dict[str, list[list[float]]] = {"this code": [], args.baseline: []}
    with tempfile.TemporaryDirectory() as folder:
        baseline = Path(folder) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(baseline), args.baseline], cwd=ROOT, check=True)
        try:
            for _ in range(args.rounds):
                sides["this code"] += _run_tree(ROOT, args.questions, args.top_k, env)
                sides[args.baseline] += _run_tree(baseline, args.questions, args.top_k, env)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=ROOT, check=False)
    print(f"{passages} passages; {args.questions} questions x {args.rounds} rounds each; top_k {args.top_k}")
    figures = {}
    for name, values in sides.items():
        wall = [w for w, _ in values]
        cpu = [c for _, c in values]
        figures[name] = (statistics.median(wall), percentile(wall, 0.95), statistics.median(cpu))
        print(
            f"  {name:<12} p50 {figures[name][0]:7.1f} ms  p95 {figures[name][1]:7.1f} ms  "
            f"CPU p50 {figures[name][2]:6.1f} ms  ({len(values)} questions)"
        )
    ours, theirs = figures["this code"], figures[args.baseline]
    print(
        f"  ratio        p50 {ours[0] / theirs[0]:.2f}x  p95 {ours[1] / theirs[1]:.2f}x  CPU p50 {ours[2] / theirs[2]:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
