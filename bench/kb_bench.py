"""Retrieval quality of dense vs keyword vs hybrid on the labelled corpus of bench/kb_corpus.py.

    python -m bench.kb_bench [--json] [--strategies dense,keyword,hybrid,graph,fusion]

Ingests the corpus into knowledge base `bench` on the configured Postgres (POSTGRES_URI, else the
embedded one) in schema KB_BENCH_SCHEMA (default `bench_kb`), then prints recall@5, recall@10
and nDCG@10 per strategy, overall and per query kind, all measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import time
from collections.abc import Sequence

from bench.kb_corpus import Corpus, build_corpus

KB = "bench"
STRATEGIES = ("dense", "keyword", "hybrid")
DEPTH = 10


def recall_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    """Share of the relevant ids found in the first k results."""
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def ndcg_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    """Binary-relevance nDCG of the first k results."""
    dcg = sum(1 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal


async def ingest(store, corpus: Corpus) -> float:
    """Recreate the bench knowledge base from the corpus; return the seconds it took."""
    from store import knowledge

    if KB in [kb["name"] for kb in await knowledge.list_kbs(store)]:
        await knowledge.delete_kb(store, KB)
    await knowledge.create_kb(store, KB, "retrieval benchmark corpus")
    await store.embeddings.aembed_query("load the model before timing")
    started = time.perf_counter()
    documents = [{"text": p.text, "source": f"bench:{p.id}", "title": p.id} for p in corpus.passages]
    # one chunk per passage, so a relevant passage is a relevant chunk
    results = await knowledge.ingest_texts(store, KB, documents, chunk_size=2000, chunk_overlap=0)
    assert all(r["chunks"] == 1 for r in results)
    return time.perf_counter() - started


async def evaluate(store, corpus: Corpus, strategies: Sequence[str] = STRATEGIES) -> dict:
    """Per strategy and query kind: mean recall@5, recall@10, nDCG@10 and mean query latency."""
    from store import knowledge

    kinds = sorted({q.kind for q in corpus.queries})
    report: dict = {}
    for strategy in strategies:
        rows: dict[str, list[tuple[float, float, float]]] = {kind: [] for kind in ["all", *kinds]}
        started = time.perf_counter()
        for query in corpus.queries:
            result = await knowledge.retrieve(store, KB, query.text, strategy=strategy, top_k=DEPTH)
            ranked = [r["source"].removeprefix("bench:") for r in result["retrieval_results"]]
            scores = (
                recall_at(ranked, query.relevant, 5),
                recall_at(ranked, query.relevant, 10),
                ndcg_at(ranked, query.relevant, 10),
            )
            rows["all"].append(scores)
            rows[query.kind].append(scores)
        latency_ms = (time.perf_counter() - started) * 1000 / len(corpus.queries)
        report[strategy] = {
            kind: {
                "queries": len(values),
                "recall@5": sum(v[0] for v in values) / len(values),
                "recall@10": sum(v[1] for v in values) / len(values),
                "ndcg@10": sum(v[2] for v in values) / len(values),
            }
            for kind, values in rows.items()
        }
        report[strategy]["all"]["ms_per_query"] = latency_ms
    return report


def render(report: dict, corpus: Corpus, ingest_seconds: float) -> str:
    """A plain-text table of the report."""
    lines = [
        f"corpus: {len(corpus.passages)} passages, {len(corpus.queries)} queries; ingest {ingest_seconds:.1f} s",
        f"{'kind':<11} {'strategy':<8} {'queries':>7} {'R@5':>6} {'R@10':>6} {'nDCG@10':>8}",
    ]
    for kind in report["dense"]:
        for strategy in report:
            row = report[strategy][kind]
            lines.append(
                f"{kind:<11} {strategy:<8} {row['queries']:>7} {row['recall@5']:>6.3f} {row['recall@10']:>6.3f} {row['ndcg@10']:>8.3f}"
            )
    lines.append(
        "mean latency per query: " + ", ".join(f"{s} {report[s]['all']['ms_per_query']:.1f} ms" for s in report)
    )
    return "\n".join(lines)


async def run(strategies: Sequence[str] = STRATEGIES) -> tuple[dict, Corpus, float]:
    """Ingest and evaluate on the bench schema."""
    os.environ["POSTGRES_SCHEMA"] = os.environ.get("KB_BENCH_SCHEMA", "bench_kb")
    from store.postgres import store

    corpus = build_corpus()
    async with store() as pg_store:
        seconds = await ingest(pg_store, corpus)
        return await evaluate(pg_store, corpus, strategies), corpus, seconds


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m bench.kb_bench`."""
    parser = argparse.ArgumentParser(prog="python -m bench.kb_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--strategies", default=",".join(STRATEGIES), help="comma-separated, of the knowledge-base strategies"
    )
    args = parser.parse_args(argv)
    report, corpus, seconds = asyncio.run(run(args.strategies.split(",")))
    if args.json:
        print(
            json.dumps(
                {
                    "passages": len(corpus.passages),
                    "queries": len(corpus.queries),
                    "ingest_seconds": seconds,
                    "report": report,
                },
                indent=2,
            )
        )
    else:
        print(render(report, corpus, seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
