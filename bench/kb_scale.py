"""Keyword search on a large knowledge base: latency with the common words' chunks left unread
(MaxScore, store/sql/base.py `essential`) against scoring every chunk that holds a query word, in
the same run, and a small knowledge base's searches beside the large one.

    python -m bench.kb_scale                     # 40,000 chunks, 200 questions (~2 min)
    python -m bench.kb_scale --chunks 20000 --queries 400 --json

The corpus is real English technical prose that every machine with this package has: the
docstrings of Python's standard library and of the packages installed beside it (files in sorted
order, docstrings of 80 characters or more, cut at whitespace into chunks of at most 800
characters, the knowledge bases' default chunk size; about 44,000 with this package's
dependencies on Python 3.11). The large knowledge base holds the first
`--chunks` of them, the small one the next 1,000. Only the full text is written (kb_fulltext, as
ingest writes it; no vectors: the keyword search reads none), on the embedded Postgres in schema
`bench_kb_scale` (POSTGRES_URI for another server), dropped first.

The questions, half worded, half paraphrased, are drawn (seeded) from chunks of the large
knowledge base: a run of 3-7 of a chunk's words framed as a question ("How does <words> work?"),
or 3-5 of its words out of order with a question's little words ("Which ... for ...?"). Each is
searched twice, in alternating order: as the product does, and scoring every chunk that holds one
of its words (nothing left out, no common word rule); the results of the two are compared (keys,
and scores within 1e-9).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import random
import re
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

SCHEMA = "bench_kb_scale"
CHUNK = 800
SMALL = 1_000
FRAMES = ("How does {} work?", "What is {}?", "{}", "Where do I find {}?")
LITTLE = ("which", "what", "for", "the", "of", "to", "with", "when", "a", "how")
_WORD = re.compile(r"[A-Za-z][A-Za-z']+")


def docstring_chunks(limit: int) -> list[str]:
    """Up to `limit` chunks of docstrings of the standard library, then of site-packages."""
    stdlib = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    roots = [stdlib] + sorted({Path(p) for p in sys.path if p.endswith("site-packages")})
    chunks: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if root == stdlib and "site-packages" in path.parts:
                continue
            try:
                tree = ast.parse(path.read_text(errors="ignore"))
            except (SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    text = ast.get_docstring(node)
                    if text and len(text) >= 80:
                        chunks.extend(_cut(" ".join(text.split())))
                        if len(chunks) >= limit:
                            return chunks[:limit]
    return chunks


def _cut(text: str) -> list[str]:
    pieces, rest = [], text
    while len(rest) > CHUNK:
        at = rest.rfind(" ", 0, CHUNK)
        at = at if at > 0 else CHUNK
        pieces.append(rest[:at])
        rest = rest[at:].lstrip()
    return pieces + [rest] if rest else pieces


def questions(chunks: list[str], count: int, seed: int) -> list[tuple[str, str]]:
    """(style, question) pairs: worded and paraphrased in turn."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    while len(out) < count:
        words = _WORD.findall(rng.choice(chunks))
        if len(words) < 8:
            continue
        if len(out) % 2 == 0:
            size = rng.randint(3, 7)
            start = rng.randrange(len(words) - size)
            out.append(("worded", rng.choice(FRAMES).format(" ".join(words[start : start + size]))))
        else:
            picked = rng.sample(words, rng.randint(3, 5))
            out.append(("paraphrased", f"{rng.choice(LITTLE).capitalize()} {' '.join(picked)} {rng.choice(LITTLE)}?"))
    return out


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


async def run(args: argparse.Namespace) -> dict:
    import store.sql.base as sql_base
    from store.postgres import postgres_uri, store

    uri = postgres_uri()
    async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
        await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    os.environ["POSTGRES_SCHEMA"] = SCHEMA
    started = time.perf_counter()
    chunks = docstring_chunks(args.chunks + SMALL)
    if len(chunks) < args.chunks + SMALL:
        raise SystemExit(f"only {len(chunks)} docstring chunks on this machine: ask for fewer --chunks")
    bases = {"large": chunks[: args.chunks], "small": chunks[args.chunks :]}
    asked = questions(bases["large"], args.queries, args.seed)
    figures: dict = {"chunks": args.chunks, "queries": len(asked), "corpus_seconds": time.perf_counter() - started}
    async with store() as pg_store:
        sql = pg_store.sql
        started = time.perf_counter()
        for kb, texts in bases.items():
            for offset in range(0, len(texts), 5_000):
                batch = texts[offset : offset + 5_000]
                await sql.index_kb_chunks(kb, [(f"c{offset + i}", text) for i, text in enumerate(batch)], "english")
        async with sql.pool.connection() as conn:
            await conn.execute("ANALYZE kb_fulltext")
        figures["load_seconds"] = time.perf_counter() - started
        stats = {kb: (len(texts), sum(map(len, texts)) / len(texts)) for kb, texts in bases.items()}

        async def search(kb: str, question: str, whole: bool) -> tuple[float, list]:
            saved = getattr(sql_base, "PRUNE_SHARE", 0.0), getattr(sql_base, "COMMON_SHARE", 2.0)
            if whole:
                sql_base.PRUNE_SHARE, sql_base.COMMON_SHARE = 0.0, 2.0
            try:
                n, avgdl = stats[kb]
                begun = time.perf_counter()
                found = await sql.kb_keyword_search(kb, question, "english", n=n, avgdl=avgdl, limit=args.limit)
                return (time.perf_counter() - begun) * 1000, found
            finally:
                sql_base.PRUNE_SHARE, sql_base.COMMON_SHARE = saved

        for _, question in asked[:10]:  # warm-up: caches, connections
            await search("large", question, False)
            await search("large", question, True)
        times: dict[str, dict[str, list[float]]] = {}
        same = differ = empty = 0
        for index, (style, question) in enumerate(asked):
            order = (False, True) if index % 2 == 0 else (True, False)
            results = {}
            for whole in order:
                took, results[whole] = await search("large", question, whole)
                times.setdefault("whole" if whole else "pruned", {}).setdefault(style, []).append(took)
            took, _ = await search("small", question, False)
            times.setdefault("small", {}).setdefault(style, []).append(took)
            pruned, whole = results[False], results[True]
            if [k for k, _ in pruned] == [k for k, _ in whole] and all(
                abs(a - b) <= 1e-9 for (_, a), (_, b) in zip(pruned, whole, strict=True)
            ):
                same += 1
            elif not pruned:
                empty += 1  # only words most chunks hold: found nothing (the common word rule)
            else:
                differ += 1
    figures["identical"], figures["common_only"], figures["different"] = same, empty, differ
    figures["latency_ms"] = {
        path: {
            style: {"p50": _percentile(values, 50), "p95": _percentile(values, 95)}
            for style, values in [*by_style.items(), ("all", [t for values in by_style.values() for t in values])]
        }
        for path, by_style in times.items()
    }
    return figures


def report(figures: dict) -> None:
    latency = figures["latency_ms"]
    print(
        f"knowledge base of {figures['chunks']:,} docstring chunks (+ {SMALL:,} beside it), "
        f"{figures['queries']} questions, loaded in {figures['load_seconds']:.0f} s"
    )
    print(f"{'search':<46} {'p50 ms':>8} {'p95 ms':>8}   (worded p50/p95, paraphrased p50/p95)")
    rows = (
        ("large KB, every chunk holding a word scored", "whole"),
        ("large KB, as the product searches (MaxScore)", "pruned"),
        ("small KB beside the large one", "small"),
    )
    for label, path in rows:
        all_, worded, para = latency[path]["all"], latency[path]["worded"], latency[path]["paraphrased"]
        print(
            f"{label:<46} {all_['p50']:>8.1f} {all_['p95']:>8.1f}   ({worded['p50']:.1f}/{worded['p95']:.1f}, "
            f"{para['p50']:.1f}/{para['p95']:.1f})"
        )
    whole, pruned = latency["whole"]["all"], latency["pruned"]["all"]
    print(
        f"ratio pruned / whole: p50 {pruned['p50'] / whole['p50']:.2f}, p95 {pruned['p95'] / whole['p95']:.2f}; "
        f"results identical on {figures['identical']} of {figures['queries']}, "
        f"{figures['common_only']} held only words most chunks hold (nothing found), {figures['different']} different"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=40_000, help="chunks of the large knowledge base")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=40, help="results per search (hybrid asks 40 for 5)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args))
    report(figures)
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
