"""The package's SQL beside a server's own Postgres store, as under Aegra: the server builds a
plain LangGraph `AsyncPostgresStore` in a schema of its own (langgraph.json's store factory is
not used), and memories and knowledge bases still get the package's tables (full text, quotas,
the knowledge graph) in Postgres, next to that store's table: shared by every replica, kept
across restarts, filled in for rows the store held before."""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import pytest
from langgraph.store.postgres.aio import AsyncPostgresStore
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from store import knowledge
from store.backend import SQLBackend, backend_for
from store.memory.validate import namespace
from store.migrations import schema_version
from store.postgres import StoreLocationError, close_server_backends, prepare_server_store
from store.sql import MIGRATION_COMPONENT, migrations
from store.sql.graph import PostgresGraph
from tests.integration.conftest import sql
from tests.integration.test_knowledge_graph_pg import DOCUMENTS, GRAPH_TABLES

pytestmark = pytest.mark.integration
QUESTION = "In which town was the founder of Prajor Dynamics born?"


@asynccontextmanager
async def server_store(uri: str, schema: str):
    """A store as a server builds it: AsyncPostgresStore on its own pool, its tables in `schema`
    (Aegra's: the database's default schema), set up by the server."""
    pool = AsyncConnectionPool(
        uri,
        open=False,
        kwargs={"autocommit": True, "row_factory": dict_row, "options": f"-c search_path={schema}"},
    )
    await pool.open()
    try:
        pg_store = AsyncPostgresStore(conn=pool)
        await pg_store.setup()
        yield pg_store
    finally:
        await close_server_backends()
        await pool.close()


@pytest.fixture
def server_schema(pg_uri, monkeypatch) -> str:
    """A schema for the server's tables; POSTGRES_URI is the same database, POSTGRES_SCHEMA
    (langgraph.json's factories) another schema, unused here."""
    schema = f"srv_{uuid.uuid4().hex[:10]}"
    sql(pg_uri, f"CREATE SCHEMA {schema}")
    monkeypatch.setenv("POSTGRES_URI", pg_uri)
    monkeypatch.setenv("POSTGRES_SCHEMA", f"unused_{uuid.uuid4().hex[:8]}")
    return schema


def tables(pg_uri: str, schema: str) -> set[str]:
    rows = sql(pg_uri, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
    return {name for (name,) in rows}


async def test_the_knowledge_graph_is_in_postgres_beside_the_servers_store_and_outlives_it(pg_uri, server_schema):
    async with server_store(pg_uri, server_schema) as first:
        backend = backend_for(first)
        assert isinstance(backend, SQLBackend)
        await knowledge.create_kb(first, "kg", "graph")
        await knowledge.ingest_texts(first, "kg", DOCUMENTS)
        assert isinstance(backend_for(first).graph, PostgresGraph)
    # the package's tables are in the server store's schema, at their current version
    assert tables(pg_uri, server_schema) >= {"store", "kb_fulltext", "web_quota", *GRAPH_TABLES}
    version = f"SELECT version FROM {server_schema}.agent_schema_version WHERE component = %s"
    assert sql(pg_uri, version, (MIGRATION_COMPONENT,)) == [(len(migrations("english")),)]
    assert sql(pg_uri, f"SELECT count(*) FROM {server_schema}.kb_graph_entities WHERE kb = 'kg'")[0][0] > 0
    # another replica, or the same one restarted: a new store object on a new pool finds the graph
    async with server_store(pg_uri, server_schema) as second:
        found = await knowledge.retrieve(second, "kg", QUESTION, strategy="graph", top_k=2)
        paths = {r["source"]: r["path"] for r in found["retrieval_results"]}
        assert paths["doc:founder"] == ["Prajor Dynamics", "Edda Delkel"]
        keyword = await knowledge.retrieve(second, "kg", "Morvenholm chemistry", strategy="keyword", top_k=1)
        assert keyword["retrieval_results"][0]["source"] == "doc:founder"
        # quotas are counted in Postgres, the same count on every replica
        assert (await backend_for(second).sql.charge_quota("alice", "web_search", 3600))[0] == 1
    async with server_store(pg_uri, server_schema) as third:
        assert (await backend_for(third).sql.charge_quota("alice", "web_search", 3600))[0] == 2


async def test_rows_the_servers_store_held_before_get_their_full_text_and_speakers(pg_uri, server_schema):
    async with server_store(pg_uri, server_schema) as before:
        # written while the package kept nothing beside this store: only the items
        now = datetime.now(UTC).isoformat()
        memory = {"text": "I adopted a greyhound called Biscuit.", "kind": "episodic", "speaker": "Maya"}
        await before.aput(namespace("alice", "episodic"), "m1", {**memory, "created_at": now}, index=False)
        await before.aput(("kb", "old"), "c1", {"content": "Fault ZX-4480: the intake filter is clogged."})
    assert "kb_fulltext" not in tables(pg_uri, server_schema)
    async with server_store(pg_uri, server_schema) as after:
        backend = await prepare_server_store(after)
        assert backend is backend_for(after)
        assert await schema_version(backend.sql.pool, MIGRATION_COMPONENT) == len(migrations("english"))
        ns = namespace("alice", "episodic")
        hits = await backend.memory_keyword(ns, "greyhound", 5, {}, datetime.now(UTC))
        assert [item.key for item, _ in hits] == ["m1"]
        assert await backend.speakers(ns) == {"Maya"}
        entry = {"chunks": 1, "characters": 45}
        chunks = await backend.kb_keyword(("kb", "old"), "old", entry, "intake filter", 5)
        assert [item.key for item, _ in chunks] == ["c1"]


async def test_a_postgres_uri_of_another_database_is_refused_with_a_clear_error(pg_uri, server_schema, monkeypatch):
    other = f"other_{uuid.uuid4().hex[:8]}"
    sql(pg_uri, f"CREATE DATABASE {other}")
    monkeypatch.setenv("POSTGRES_URI", make_conninfo(pg_uri, dbname=other))
    async with server_store(pg_uri, server_schema) as pg_store:
        with pytest.raises(StoreLocationError, match="POSTGRES_URI is not the database of the server's store"):
            await prepare_server_store(pg_store)
