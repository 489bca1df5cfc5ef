"""The knowledge graph on the real Postgres store: versioned migrations on a database made with the
earlier schema (no graph tables), graph rows written at ingest and kept consistent on re-ingest
and delete, your own triples, graph and fusion retrieval with entity paths."""

from __future__ import annotations

import pytest

from store import knowledge
from store.migrations import migrate, schema_version
from store.postgres import store
from store.sql.graph import COMPONENT, MIGRATIONS
from tests.integration.conftest import sql

pytestmark = pytest.mark.integration

DOCUMENTS = [
    {
        "source": "doc:company",
        "title": "Prajor Dynamics",
        "text": "Prajor Dynamics is a manufacturer of precision sensors. Prajor Dynamics was founded in 1964 "
        "by Edda Delkel.",
    },
    {
        "source": "doc:founder",
        "title": "Edda Delkel",
        "text": "Edda Delkel (born 1931) is an engineer. Edda Delkel was born in Morvenholm and studied "
        "chemistry at the Ostvel Institute.",
    },
    {
        "source": "doc:other",
        "title": "Tomas Vorkel",
        "text": "Tomas Vorkel (born 1940) is an engineer. Tomas Vorkel was born in Sarford and studied law "
        "at the Belmar Institute.",
    },
]
GRAPH_TABLES = (
    "kb_graph_entities",
    "kb_graph_mentions",
    "kb_graph_relations",
    "kb_graph_state",
    "kb_graph_extractions",
)


def rows(pg_uri: str, schema: str, table: str, kb: str) -> int:
    return sql(pg_uri, f"SELECT count(*) FROM {schema}.{table} WHERE kb = %s", (kb,))[0][0]


async def test_migration_upgrades_a_database_made_with_the_earlier_schema(pg_schema, pg_uri):
    async with store() as pg_store:
        await knowledge.create_kb(pg_store, "old", "made before the graph")
        await knowledge.ingest_texts(pg_store, "old", DOCUMENTS)
    # the earlier schema: no graph tables, no version table
    for table in (*GRAPH_TABLES, "agent_schema_version"):
        sql(pg_uri, f"DROP TABLE {pg_schema}.{table}")
    async with store() as pg_store:  # start-up migrates
        assert await schema_version(pg_store.sql.pool, COMPONENT) == len(MIGRATIONS)
        assert sql(
            pg_uri, f"SELECT version FROM {pg_schema}.agent_schema_version WHERE component = %s", (COMPONENT,)
        ) == [(len(MIGRATIONS),)]
        # the old knowledge base still answers; its graph is empty until a re-ingest
        question = "In which town was the founder of Prajor Dynamics born?"
        before = await knowledge.retrieve(pg_store, "old", question, strategy="graph", top_k=2)
        assert before["retrieval_results"] and all(r["path"] == [] for r in before["retrieval_results"])
        changed = [{**d, "text": d["text"] + " (revised)"} for d in DOCUMENTS]
        await knowledge.ingest_texts(pg_store, "old", changed)
        after = await knowledge.retrieve(pg_store, "old", question, strategy="graph", top_k=2)
        assert {r["source"]: r["path"] for r in after["retrieval_results"]}["doc:founder"] == [
            "Prajor Dynamics",
            "Edda Delkel",
        ]
        # migrating again is a no-op; a database newer than the package is refused
        assert await migrate(pg_store.sql.pool, COMPONENT, MIGRATIONS) == len(MIGRATIONS)
        with pytest.raises(RuntimeError, match="newer than this package"):
            await migrate(pg_store.sql.pool, COMPONENT, MIGRATIONS[:0])


async def test_graph_rows_follow_ingest_reingest_delete_and_triples(pg_schema, pg_uri):
    async with store() as pg_store:
        await knowledge.create_kb(pg_store, "kg", "graph")
        await knowledge.ingest_texts(pg_store, "kg", DOCUMENTS)
        names = {r[0] for r in sql(pg_uri, f"SELECT entity FROM {pg_schema}.kb_graph_entities WHERE kb = 'kg'")}
        assert {"prajor dynamics", "edda delkel", "morvenholm", "ostvel institute"} <= names
        assert sql(
            pg_uri, f"SELECT count(*) FROM {pg_schema}.kb_graph_entities WHERE kb = 'kg' AND embedding IS NULL"
        ) == [(0,)]
        await knowledge.ingest_texts(
            pg_store, "kg", [{**DOCUMENTS[1], "text": "Edda Delkel was born in Quarnby and studied law."}]
        )
        names = {r[0] for r in sql(pg_uri, f"SELECT entity FROM {pg_schema}.kb_graph_entities WHERE kb = 'kg'")}
        assert "quarnby" in names and "morvenholm" not in names and "ostvel institute" not in names
        linked = {
            r[0] for r in sql(pg_uri, f"SELECT DISTINCT chunk_key FROM {pg_schema}.kb_graph_mentions WHERE kb = 'kg'")
        }
        chunks = {r[0] for r in sql(pg_uri, f"SELECT key FROM {pg_schema}.store WHERE prefix = 'kb.kg'")}
        assert linked == chunks
        assert await knowledge.insert_triples(pg_store, "kg", [("Tomas Vorkel", "mentored", "Edda Delkel")]) == {
            "entities": 2,
            "relations": 1,
        }
        result = await knowledge.retrieve(
            pg_store, "kg", "Who was mentored by Tomas Vorkel?", strategy="fusion", top_k=3
        )
        paths = {r["source"]: r["path"] for r in result["retrieval_results"]}
        assert paths.get("doc:founder") == ["Tomas Vorkel", "Edda Delkel"]
        await knowledge.delete_kb(pg_store, "kg")
        for table in ("kb_graph_entities", "kb_graph_mentions", "kb_graph_relations"):
            assert rows(pg_uri, pg_schema, table, "kg") == 0, table
