"""The project's own tables next to the library's come from versioned migrations run when the store
opens: a fresh database gets every one, and a database made by earlier versions (the same tables
created lazily on first use, no version recorded, or older still: some tables missing) is
upgraded in place, its rows kept and what it lacked filled in from the rows already stored."""

from __future__ import annotations

import psycopg
import pytest

from store import knowledge, memory
from store.migrations import schema_version
from store.postgres import store
from store.sql import MIGRATION_COMPONENT, migrations
from tests.integration.conftest import sql

pytestmark = pytest.mark.integration

TABLES = {"agent_store_meta", "web_quota", "kb_fulltext", "memory_fulltext", "memory_speakers"}
STEPS = len(migrations("english"))


def tables(pg_uri: str, schema: str) -> set[str]:
    rows = sql(pg_uri, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
    return {name for (name,) in rows}


def count(pg_uri: str, schema: str, table: str) -> int:
    return sql(pg_uri, f"SELECT count(*) FROM {schema}.{table}")[0][0]


async def test_a_fresh_database_gets_every_project_table_when_the_store_opens(pg_schema, pg_uri):
    async with store() as pg_store:
        assert await schema_version(pg_store.sql.pool, MIGRATION_COMPONENT) == STEPS
    assert tables(pg_uri, pg_schema) >= TABLES
    version = f"SELECT version FROM {pg_schema}.agent_schema_version WHERE component = %s"
    assert sql(pg_uri, version, (MIGRATION_COMPONENT,)) == [(STEPS,)]
    # the full-text indexes the keyword searches count on: per knowledge base and lexeme (the
    # whole-table one dropped), a namespace's memory lengths read from the index alone
    indexes = {name for (name,) in sql(pg_uri, "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (pg_schema,))}
    assert {"kb_fulltext_scoped", "memory_fulltext_tsv", "memory_fulltext_lengths"} <= indexes
    assert "kb_fulltext_tsv" not in indexes


async def test_opening_upgrades_a_database_made_by_earlier_versions(pg_schema, pg_uri):
    async with store() as pg_store:
        await knowledge.create_kb(pg_store, "manual", "the pump manual")
        await knowledge.ingest_text(pg_store, "manual", "Fault code ZX-4480 means the intake filter is clogged.", "m")
        for speaker, text in (("Maya", "I adopted a greyhound from the shelter."), ("Tom", "Berlin was lovely.")):
            await memory.save_memory(pg_store, "alice", "episodic", text, speaker=speaker)
        await pg_store.sql.charge_quota("alice", "web", 3600)
    meta = count(pg_uri, pg_schema, "agent_store_meta")
    # Today's database: the tables as earlier versions created them, but no version recorded.
    sql(pg_uri, f"DELETE FROM {pg_schema}.agent_schema_version WHERE component = %s", (MIGRATION_COMPONENT,))
    async with store() as pg_store:
        assert await schema_version(pg_store.sql.pool, MIGRATION_COMPONENT) == STEPS
    assert (count(pg_uri, pg_schema, "kb_fulltext"), count(pg_uri, pg_schema, "memory_fulltext")) == (1, 2)
    assert (count(pg_uri, pg_schema, "memory_speakers"), count(pg_uri, pg_schema, "web_quota")) == (2, 1)
    assert count(pg_uri, pg_schema, "agent_store_meta") == meta
    # Older still: the full-text and speaker tables never created (the first versions).
    sql(pg_uri, f"DELETE FROM {pg_schema}.agent_schema_version WHERE component = %s", (MIGRATION_COMPONENT,))
    for table in ("kb_fulltext", "memory_speakers", "web_quota"):
        sql(pg_uri, f"DROP TABLE {pg_schema}.{table}")
    async with store() as pg_store:
        assert tables(pg_uri, pg_schema) >= TABLES
        # filled from the stored chunks and memories: keyword search and the speaker bonus work
        found = await knowledge.retrieve(pg_store, "manual", "ZX-4480", strategy="keyword")
        assert [r["source"] for r in found["retrieval_results"]] == ["m"]
        assert sorted(await pg_store.sql.memory_speakers(".".join(memory.namespace("alice", "episodic")))) == [
            "Maya",
            "Tom",
        ]
        recalled = await memory.recall(pg_store, "alice", "what did Maya adopt", "episodic", record_access=False)
        assert "greyhound" in recalled[0]["text"]
        assert (await pg_store.sql.charge_quota("alice", "web", 3600))[0] == 1
    # opening again applies nothing
    async with store() as pg_store:
        assert await schema_version(pg_store.sql.pool, MIGRATION_COMPONENT) == STEPS
    assert count(pg_uri, pg_schema, "kb_fulltext") == 1


async def test_the_reads_around_a_hit_use_the_order_indexes(pg_schema, pg_uri, monkeypatch):
    """The neighbour and previous-message reads filter and order by the expressions the
    migrations index (store/sql/base.py): were the two to drift apart, each read would sort all
    of a user's or a knowledge base's rows again."""
    from datetime import UTC, datetime, timedelta

    from store.backend import backend_for
    from store.dates import stamp
    from store.sql.base import SQLBase

    at = datetime(2023, 6, 1, 9, tzinfo=UTC)
    seen: list[tuple[str, dict]] = []
    fetch = SQLBase._fetch

    async def recorded(self, query, params=None):
        seen.append((query, params))
        return await fetch(self, query, params)

    async with store() as s:
        said = [
            (
                await memory.record_chat_message(
                    s, "u", "user", f"message {i}", "t", speaker="Ann", now=at + timedelta(minutes=i)
                )
            )["id"]
            for i in range(3)
        ]
        await knowledge.create_kb(s, "log")
        await knowledge.ingest_texts(
            s, "log", [{"text": f"Ann: line {i}", "source": f"l{i}", "date": at} for i in range(3)]
        )
        chunk = (await s.asearch(knowledge.chunk_namespace("log"), limit=1))[0].key
        monkeypatch.setattr(SQLBase, "_fetch", recorded)
        await backend_for(s).neighbours(memory.namespace("u", "chat"), [said[1]], 1)
        await backend_for(s).thread_last(memory.namespace("u", "chat"), "t", stamp(at + timedelta(hours=1)))
        await backend_for(s).kb_neighbours(knowledge.chunk_namespace("log"), [chunk], 1)
    assert len(seen) == 3
    for (query, params), index in zip(
        seen, ["store_thread_order", "store_thread_order", "store_document_order"], strict=True
    ):
        with psycopg.connect(pg_uri, autocommit=True, options=f"-c search_path={pg_schema},public") as conn:
            conn.execute("SET enable_seqscan = off")
            conn.execute("SET enable_bitmapscan = off")
            plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN {query}", params).fetchall())
        # the index gives the order: no sort of the rows it found
        assert f"using {index} on store" in plan and "Sort" not in plan, plan
