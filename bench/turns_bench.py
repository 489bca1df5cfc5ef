"""What showing a recalled memory's turns costs: `recall` with and without `turns`, same data,
same run, on the embedded Postgres (or POSTGRES_URI).

    python -m bench.turns_bench                      # 200 memories, 400 turns, 100 queries
    python -m bench.turns_bench --facts 500 --queries 200

One user gets `--facts` episodic memories written through `save_memory`, each linked to the two
chat messages (`record_chat_message`, user and assistant) it was learnt from, in schema
`bench_turns` (dropped at the end; an embedded server the run had to start is stopped). Each query is asked twice in alternation, with
`turns=True` (the memories' turns read in one batch) and `turns=False`, which first alternating
(the second of a pair finds the query's vector cached), top_k 10, query embedding included; p50 / p95 ms of each and their ratio are printed with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

import numpy as np
import psycopg

from bench.memory_bench import _embedded_was_running
from store import memory
from store.pool import stop_embedded_postgres
from store.postgres import postgres_uri, store

SCHEMA = "bench_turns"
USER = "bench_turns_user"
TOPICS = ["hiking", "piano", "sourdough", "chess", "cycling", "pottery", "salsa", "astronomy", "kayaking", "knitting"]
PLACES = ["Lisbon", "Kyoto", "the lake", "Marta's flat", "the old mill", "Oslo", "the park", "a barn", "Quito"]
PEOPLE = ["my cousin Theo", "Priya from work", "the neighbours", "Dad", "two strangers", "my book club", "Ana"]
WHEN = ["on a rainy Monday", "at dawn", "all weekend", "after the exam", "in the snow", "on my birthday"]


def _texts(n: int) -> list[tuple[str, str, str]]:
    """(user message, assistant reply, event) per memory, the events differing in four parts."""
    rows = []
    for i in range(n):
        topic, place = TOPICS[i % len(TOPICS)], PLACES[i % len(PLACES)]
        person, when = PEOPLE[i % len(PEOPLE)], WHEN[i % len(WHEN)]
        rows.append(
            (
                f"Did some {topic} in {place} with {person} {when}, lovely time ({i}).",
                f"That sounds lovely, {topic} in {place}!",
                f"The user did {topic} in {place} with {person} {when} (outing {i})",
            )
        )
    return rows


async def _drop(uri: str) -> None:
    async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
        await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


async def run(facts: int, queries: int, top_k: int) -> dict:
    was_running = _embedded_was_running()
    uri = await asyncio.to_thread(postgres_uri)
    previous = os.environ.get("POSTGRES_SCHEMA")
    os.environ["POSTGRES_SCHEMA"] = SCHEMA
    await _drop(uri)
    try:
        async with store() as pg_store:
            space = memory.open(pg_store, USER)
            for said, reply, fact in _texts(facts):
                ids = [
                    (await space.record_chat_message(r, t, "t"))["id"]
                    for r, t in (("user", said), ("assistant", reply))
                ]
                await space.save("episodic", fact, source="extraction", turn_ids=ids)
            stored = len(await pg_store.asearch(memory.namespace(USER, "episodic"), limit=facts))
            asked = [
                f"when did I go {TOPICS[i % len(TOPICS)]} with {PEOPLE[(i * 3) % len(PEOPLE)]}" for i in range(queries)
            ]
            for query in asked[:10]:  # warm-up
                await space.recall(query, "episodic", top_k=top_k, record_access=False)
            times: dict[str, list[float]] = {"with turns": [], "without": []}
            shown = 0
            for i, query in enumerate(asked):
                # alternate which goes first: the second of a pair finds the query's vector cached
                order = (("with turns", True), ("without", False))
                for label, turns in order if i % 2 else order[::-1]:
                    started = time.perf_counter()
                    results = await space.recall(query, "episodic", top_k=top_k, record_access=False, turns=turns)
                    times[label].append((time.perf_counter() - started) * 1000)
                    shown += sum(len(r.get("turns") or []) for r in results)
    finally:
        await _drop(uri)
        if previous is None:
            os.environ.pop("POSTGRES_SCHEMA", None)
        else:
            os.environ["POSTGRES_SCHEMA"] = previous
        if not was_running:  # a server this run started is stopped again
            stop_embedded_postgres()
    figures = {k: (float(np.percentile(v, 50)), float(np.percentile(v, 95))) for k, v in times.items()}
    return {"figures": figures, "turns_per_recall": shown / queries, "stored": stored}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=200)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--top-k", type=int, default=10)
    args = parser.parse_args(argv)
    report = asyncio.run(run(args.facts, args.queries, args.top_k))
    figures = report["figures"]
    for label, (p50, p95) in figures.items():
        print(f"recall {label:>10}: p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    ratio = figures["with turns"][0] / figures["without"][0]
    print(
        f"ratio with / without (p50): {ratio:.2f}; turns shown per recall: {report['turns_per_recall']:.1f} "
        f"({report['stored']} memories after dedupe, top_k {args.top_k})"
    )
    print(f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
