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
