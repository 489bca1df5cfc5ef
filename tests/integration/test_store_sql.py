"""The SQL adapter (store/sql/) against the tables langgraph-checkpoint-postgres really sets up.

If an upgrade of the library renames or drops a table or column the adapter's statements use,
these tests fail first, naming the installed version."""

from __future__ import annotations

import pytest

from store.backend import SQLBackend, backend_for
from store.postgres import checkpointer, open_pool, store
from store.sql import (
    CHECKPOINT_COLUMNS,
    STORE_COLUMNS,
    LibrarySchemaError,
    StoreSQL,
    library_version,
)
from tests.integration.conftest import sql

pytestmark = pytest.mark.integration


def columns(pg_uri: str, schema: str, tables) -> dict[str, set[str]]:
    rows = sql(
        pg_uri,
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = ANY(%s)",
        (schema, list(tables)),
    )
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(table, set()).add(column)
    return found


async def test_the_library_sets_up_every_table_and_column_the_adapter_uses(pg_schema, pg_uri):
    async with store() as pg_store, checkpointer() as saver:
        assert backend_for(pg_store) is pg_store.backend and isinstance(pg_store.backend, SQLBackend)
        assert pg_store.backend.sql is pg_store.sql
        await pg_store.sql.check_tables(STORE_COLUMNS)
        await saver.sql.check_tables(CHECKPOINT_COLUMNS)
    found = columns(pg_uri, pg_schema, {**STORE_COLUMNS, **CHECKPOINT_COLUMNS})
    for table, wanted in {**STORE_COLUMNS, **CHECKPOINT_COLUMNS}.items():
        assert wanted <= found.get(table, set()), (
            f"langgraph-checkpoint-postgres {library_version()} changed table {table}: "
            f"missing {sorted(wanted - found.get(table, set()))}; update store/sql/"
        )


async def test_a_changed_schema_stops_start_up_naming_the_library_version(pg_schema, pg_uri):
    sql(pg_uri, f"CREATE SCHEMA {pg_schema}")
    sql(pg_uri, f"CREATE TABLE {pg_schema}.store (prefix text, key text, value jsonb)")
    async with open_pool() as pool:
        adapter = StoreSQL(pool)
        with pytest.raises(LibrarySchemaError) as raised:
            await adapter.check_tables(STORE_COLUMNS)
    message = str(raised.value)
    assert f"langgraph-checkpoint-postgres {library_version()}" in message
    assert "table store lacks column(s) created_at, expires_at, ttl_minutes, updated_at" in message
    assert "table store_vectors is missing" in message


def test_only_the_adapter_touches_the_librarys_tables_or_members():
    """No module of the project but the SQL adapter (store/sql/) and the benchmarks' bulk load
    (bench/bench_sql.py) runs SQL on the library's tables or reaches into its stores' connections."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    offenders = []
    for folder in ("store", "graphs", "tools", "server", "bench"):
        for path in (root / folder).rglob("*.py"):
            if path.parent == root / "store" / "sql" or path == root / "bench" / "bench_sql.py":
                continue
            text = path.read_text()
            for needle in (
                "FROM store",
                "INTO store",
                "FROM checkpoint",
                "store.conn",
                "._cursor(",
                "store.lock",
                "COPY store",
            ):
                if needle in text:
                    offenders.append(f"{path.relative_to(root)}: {needle}")
    assert offenders == []


async def test_the_adapters_vector_search_ranks_as_the_librarys_search(pg_schema, pg_uri):
    """SQLBackend.vector_search runs store/sql/'s own statement (VECTOR_SEARCH_SQL) on the
    library's vector table: it finds the items, scores and order the library's search finds,
    filtered by value and by date range, each item once at its best passage; expired items and
    other namespaces stay out. Fails when the library changes how it stores or scores vectors."""
    from datetime import UTC, datetime, timedelta

    from store.backends import best_first
    from store.dates import stamp

    texts = [
        ("Ann", "We adopted a kitten from the rescue, she hides under the sofa."),
        ("Ben", "The weather has been so grey lately."),
        ("Ann", "Our cat knocked the plant over again."),
        ("Ben", "I started running on Tuesdays with the club."),
        ("Ann", "Dinner was pasta with far too much garlic."),
        ("Ben", "My dog only sleeps when the cat is in another room."),
        ("Ann", "Work was long. Then the kitten climbed the curtains and would not come down."),
        ("Ben", "We booked the train to Lisbon for May."),
    ]
    start = datetime(2024, 1, 1, tzinfo=UTC)
    ns, other = ("memories", "vec", "chat"), ("memories", "someone", "chat")
    async with store() as pg_store:
        for i, (speaker, text) in enumerate(texts):
            value = {"text": text, "speaker": speaker, "created_at": stamp(start + timedelta(days=i))}
            if i == 6:  # two passages, each with a vector of its own beside the whole text's
                value["passages"] = ["Work was long.", "Then the kitten climbed the curtains and would not come down."]
            index = ["text", "passages[*]"] if "passages" in value else ["text"]
            await pg_store.aput(ns, f"m{i}", value, index=index)
        await pg_store.aput(other, "x", {"text": "Our kitten and cat sleep on the sofa.", "speaker": "Ann"})
        assert isinstance(pg_store.backend, SQLBackend)
        query = "the kitten and the cat"
        span = (start + timedelta(days=2), start + timedelta(days=7))
        cases = [  # (what we match, date range, the library's filter for the same)
            ({}, None, None),
            ({"speaker": "Ann"}, None, {"speaker": "Ann"}),
            ({}, span, {"created_at": {"$gte": stamp(span[0]), "$lt": stamp(span[1])}}),
        ]
        for wanted, dates, library_filter in cases:
            for limit in (3, 8):
                ours = await pg_store.backend.vector_search(ns, query, limit, wanted, "created_at", dates)
                theirs = best_first(
                    await pg_store.asearch(ns, query=query, filter=library_filter, limit=limit, refresh_ttl=False)
                )
                assert [(item.key, round(item.score or 0, 6)) for item in ours] == [
                    (item.key, round(item.score or 0, 6)) for item in theirs
                ], (wanted, dates, limit)
                assert [item.value for item in ours] == [item.value for item in theirs]
                assert all(item.namespace == ns for item in ours)
        everything = await pg_store.backend.vector_search(ns, query, 8, {}, "created_at")
        assert len(everything) == 8 and everything[0].key in {"m0", "m6"}  # m6 on its kitten passage
        assert {item.key for item in everything} == {f"m{i}" for i in range(8)}
        sql(pg_uri, f"UPDATE {pg_schema}.store SET expires_at = NOW() - interval '1 minute' WHERE key = 'm0'")
        live = await pg_store.backend.vector_search(ns, query, 8, {}, "created_at")
        assert [item.key for item in live] == [item.key for item in everything if item.key != "m0"]


async def test_a_scan_returns_every_item_once_though_batches_share_their_stamps(pg_schema):
    """Rows put by one batch share their `updated_at`, the only order of the store's search
    without a query: its pages (LIMIT / OFFSET) then return some rows twice and others never
    (a knowledge base of 1,311 chunks ingested in 11 batches: 17 of them lost, 17 read twice, and
    its registry of people rebuilt from them wrong). SQLBackend.scan reads the namespace and the
    ones below it in one stable order, with expired items left out, as the store's search
    leaves them out."""
    from langgraph.store.base import PutOp

    from store.backends import PAGE

    ns, below, beside = ("kb", "logs"), ("kb", "logs", "part"), ("kb", "logsx")
    count = 2 * PAGE + 311
    async with store() as pg_store:
        for batch in range(0, count, 120):  # 11 batches, 11 stamps
            await pg_store.abatch(
                [
                    PutOp(ns, f"c{i:05d}", {"content": f"line {i} " + "word " * 20}, index=False)
                    for i in range(batch, min(batch + 120, count))
                ]
            )
        await pg_store.abatch([PutOp(below, "deeper", {"content": "below"}, index=False)])
        await pg_store.abatch([PutOp(beside, "other", {"content": "beside"}, index=False)])
        await pg_store.aput(ns, "gone", {"content": "expired"}, index=False)
        async with pg_store.sql.pool.connection() as conn:
            await conn.execute("UPDATE store SET expires_at = NOW() - interval '1 minute' WHERE key = 'gone'")
        stamps = await pg_store.sql._fetch(
            "SELECT count(DISTINCT updated_at) AS n FROM store WHERE prefix = 'kb.logs' AND key <> 'gone'"
        )
        scanned = await backend_for(pg_store).scan(ns)
        limited = await backend_for(pg_store).scan(ns, 10)
    assert stamps[0]["n"] == 11  # one stamp a statement
    keys = [(item.namespace, item.key) for item in scanned]
    assert len(keys) == len(set(keys)) == count + 1
    assert (below, "deeper") in keys and (beside, "other") not in keys and (ns, "gone") not in keys
    assert len(limited) == 10 and {(item.namespace, item.key) for item in limited} <= set(keys)
