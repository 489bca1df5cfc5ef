"""Benchmark-only SQL on the store's tables (bench/memory_bench.py): bulk load with COPY,
ANALYZE, and the query plans of one namespace's hybrid recall. Not part of the product: functions
over the product's SQL adapter (store/sql/, `StoreSQL`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from store.sql import MEMORY_KEYWORD_SQL, StoreSQL
from store.sql.base import VECTOR_SEARCH_SQL, _any_of
from store.sql.memory import keyword_params


async def copy_items(
    sql: StoreSQL,
    rows: Iterable[tuple[str, str, dict, Any]],
    field: str,
    fulltext_config: str | None = None,
    analyze: bool = True,
) -> None:
    """Bulk-load (prefix, key, value, vector) rows with COPY: the value into `store`, the
    vector (a numpy array, through pgvector's psycopg adapter) into `store_vectors` under
    `field`, and with `fulltext_config` the value's text into `memory_fulltext`; then, with
    `analyze`, `analyze_items`. For benchmarks: no embedding, no dedupe, no TTL."""
    from pgvector.psycopg import register_vector_async

    rows = list(rows)
    async with sql.pool.connection() as conn:
        await register_vector_async(conn)  # before the cursor: a cursor copies the type map
        async with conn.transaction(), conn.cursor() as cur:
            async with cur.copy("COPY store (prefix, key, value) FROM STDIN") as copy:
                for prefix, key, value, _vector in rows:
                    await copy.write_row((prefix, key, Jsonb(value)))
            async with cur.copy(
                "COPY store_vectors (prefix, key, field_name, embedding) FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["text", "text", "text", "vector"])
                for prefix, key, _value, vector in rows:
                    await copy.write_row((prefix, key, field, vector))
    if fulltext_config:
        by_prefix: dict[str, list[tuple[str, str]]] = {}
        for prefix, key, value, _vector in rows:
            by_prefix.setdefault(prefix, []).append((key, str(value.get("text", ""))))
        for prefix, pairs in by_prefix.items():
            await sql.index_memories(prefix, pairs, fulltext_config)
    if analyze:
        await analyze_items(sql, fulltext=bool(fulltext_config))


async def analyze_items(sql: StoreSQL, fulltext: bool = False) -> None:
    """ANALYZE the store's tables (and `memory_fulltext`) so the planner sees a bulk load."""
    async with sql.pool.connection() as conn:
        await conn.execute("ANALYZE store")
        await conn.execute("ANALYZE store_vectors")
        if fulltext:
            await conn.execute("ANALYZE memory_fulltext")


async def explain_memory_search(
    sql: StoreSQL, prefix: str, embedding: Sequence[float], query: str, config: str, limit: int = 100
) -> dict[str, str]:
    """EXPLAIN ANALYZE (benchmarks) of one namespace's two hybrid-recall queries: the vector
    search (VECTOR_SEARCH_SQL, as SQLBackend.vector_search runs it for `limit` items) and
    MEMORY_KEYWORD_SQL over every lexeme of the query. Returns {"vector": plan, "keyword": plan}."""
    lexemes = await sql._lexemes(config, query)
    stats = await sql.keyword_statistics(prefix, lexemes)
    explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) "
    vector = "[" + ",".join(f"{x:.6f}" for x in embedding) + "]"
    statements = {
        "vector": (
            explain + VECTOR_SEARCH_SQL.format(span=""),
            {"vector": vector, "prefix": prefix, "match": Jsonb({}), "vectors": 2 * limit + 1, "limit": limit},
        ),
        "keyword": (
            explain + MEMORY_KEYWORD_SQL,
            {**keyword_params(prefix, lexemes, stats, limit=limit), "tsquery": _any_of(lexemes) or "''"},
        ),
    }
    plans = {}
    for name, (statement, params) in statements.items():
        plans[name] = "\n".join(next(iter(row.values())) for row in await sql._fetch(statement, params))
    return plans
