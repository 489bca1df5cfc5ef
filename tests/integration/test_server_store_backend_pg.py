"""The package's SQL beside a server's own Postgres store, as under Aegra: the server builds a
plain LangGraph `AsyncPostgresStore` in a schema of its own (langgraph.json's store factory is
not used), and memories and knowledge bases still get the package's tables (full text, quotas,
the knowledge graph) in Postgres, next to that store's table: shared by every replica, kept
across restarts, filled in for rows the store held before."""

from __future__ import annotations

import asyncio
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
from store.postgres import (
    NoVectorIndex,
    StoreIndexMismatch,
    StoreLocationError,
    close_server_backends,
    prepare_server_store,
)
from store.sql import MIGRATION_COMPONENT, migrations
from store.sql.graph import PostgresGraph
from tests.integration.conftest import sql
from tests.integration.test_knowledge_graph_pg import DOCUMENTS, GRAPH_TABLES

pytestmark = pytest.mark.integration
QUESTION = "In which town was the founder of Prajor Dynamics born?"
HOME_DOCUMENTS = [
    {
        "source": "doc:sourdough",
        "text": "Feed the culture of wild yeast and lactobacilli with flour and water every day until it doubles.",
    },
    {"source": "doc:bicycle", "text": "Lubricate the chain, check the tyre pressure and replace worn brake pads."},
    {"source": "doc:tax", "text": "Submit the annual income declaration to the revenue office by 30 April."},
]


@asynccontextmanager
async def server_store(uri: str, schema: str, index: dict | None = None, public: bool = True):
    """A store as a server builds it: AsyncPostgresStore on its own pool, its tables in `schema`
    (Aegra's: the database's default schema), set up by the server (without a vector index, as
    Aegra's by default, or with `index`)."""
    pool = AsyncConnectionPool(
        uri,
        open=False,
        # the schema first, then public (pgvector's type), as a server's default search_path has it
        kwargs={
            "autocommit": True,
            "row_factory": dict_row,
            "options": f"-c search_path={schema}{',public' if public else ''}",
        },
    )
    await pool.open()
    try:
        pg_store = AsyncPostgresStore(conn=pool, index=index)  # type: ignore[arg-type]
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


async def test_replicas_starting_together_give_the_servers_store_the_package_index(pg_uri, server_schema):
    # Two replicas' stores on one database, prepared at once: the vector table's setup builds its
    # index concurrently, which waits for every open transaction, so a replica waiting for a lock
    # in one would never let it finish (the replicas did not start).
    async with server_store(pg_uri, server_schema) as first, server_store(pg_uri, server_schema) as second:
        assert not first.index_config and not second.index_config
        await asyncio.wait_for(asyncio.gather(prepare_server_store(first), prepare_server_store(second)), 300)
        assert first.index_config["dims"] == second.index_config["dims"] == 384
        await knowledge.create_kb(first, "home", "notes")
        await knowledge.ingest_texts(first, "home", HOME_DOCUMENTS)
        # put through one replica, found by meaning through the other, scored
        found = await knowledge.retrieve(second, "home", "How do I keep my bread leaven alive?", strategy="dense")
        assert found["retrieval_results"][0]["source"] == "doc:sourdough" and found["retrieval_results"][0]["score"] > 0
        await second.aput(("notes", "alice"), "n1", {"text": "The spare key is under the blue flowerpot."})
        [hit] = await first.asearch(("notes", "alice"), query="where can I find a key to get in?", limit=1)
        assert hit.key == "n1" and hit.score is not None and hit.score > 0.3
    assert "store_vectors" in tables(pg_uri, server_schema)
    recorded = sql(pg_uri, f"SELECT value FROM {server_schema}.agent_store_meta WHERE key = 'embeddings_model'")
    assert recorded == [("local:all-MiniLM-L6-v2",)]


async def test_a_server_index_of_another_model_than_embeddings_model_stops_the_replica(
    pg_uri, server_schema, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    index = {"embed": "openai:text-embedding-3-small", "dims": 1536, "fields": ["$"]}
    async with server_store(pg_uri, server_schema, index=index) as theirs:
        with pytest.raises(StoreIndexMismatch, match="indexed with openai:text-embedding-3-small .* EMBEDDINGS_MODEL"):
            await prepare_server_store(theirs)


async def test_a_server_store_that_cannot_see_pgvector_says_so_and_never_answers_empty(pg_uri, server_schema, caplog):
    async with server_store(pg_uri, server_schema, public=False) as blind:
        with caplog.at_level("ERROR"):
            await prepare_server_store(blind)
        assert "do not see pgvector's `vector` type" in caplog.text and not blind.index_config
        await knowledge.create_kb(blind, "home", "notes")
        await knowledge.ingest_texts(blind, "home", HOME_DOCUMENTS)
        with pytest.raises(NoVectorIndex):
            await knowledge.retrieve(blind, "home", "How do I keep my bread leaven alive?", strategy="dense")
        keyword = await knowledge.retrieve(blind, "home", "sourdough yeast flour", strategy="keyword")
        assert keyword["retrieval_results"][0]["source"] == "doc:sourdough"


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
