"""The knowledge graph's SQL: the `kb_graph_*` tables (versioned migrations, component
`COMPONENT`, store/migrations.py) and `PostgresGraph`, the backend's graph part on Postgres
(interface: store/graph_part.py `GraphPart`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from store.graph_part import USER_CHUNK, ChunkGraph, GraphData, walks_cache
from store.migrations import migrate

COMPONENT = "kb_graph"
MIGRATIONS: list[list[str]] = [
    [
        "CREATE TABLE IF NOT EXISTS kb_graph_entities ("
        " kb text NOT NULL, entity text NOT NULL, name text NOT NULL, embedding real[],"
        " PRIMARY KEY (kb, entity))",
        "CREATE TABLE IF NOT EXISTS kb_graph_mentions ("
        " kb text NOT NULL, chunk_key text NOT NULL, entity text NOT NULL, PRIMARY KEY (kb, chunk_key, entity))",
        "CREATE INDEX IF NOT EXISTS kb_graph_mentions_entity ON kb_graph_mentions (kb, entity)",
        "CREATE TABLE IF NOT EXISTS kb_graph_relations ("
        " kb text NOT NULL, chunk_key text NOT NULL, head text NOT NULL, relation text NOT NULL, tail text NOT NULL)",
        "CREATE INDEX IF NOT EXISTS kb_graph_relations_chunk ON kb_graph_relations (kb, chunk_key)",
        "CREATE TABLE IF NOT EXISTS kb_graph_state (kb text PRIMARY KEY, generation bigint NOT NULL)",
        "CREATE TABLE IF NOT EXISTS kb_graph_extractions (cache_key text PRIMARY KEY, extraction jsonb NOT NULL)",
    ],
]


async def ensure_graph_schema(pool: AsyncConnectionPool[Any]) -> int:
    """Bring the graph tables to the current version (store start-up; idempotent)."""
    return await migrate(pool, COMPONENT, MIGRATIONS)


def _value(row: Any, column: str, index: int) -> Any:
    return row[column] if isinstance(row, dict) else row[index]


async def _insert_entities(cur: Any, kb: str, entities: dict[str, str]) -> None:
    """Add the entities (key -> name) of a knowledge base that are not there yet."""
    await cur.executemany(
        "INSERT INTO kb_graph_entities (kb, entity, name) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
        [(kb, key, name) for key, name in entities.items()],
    )


class PostgresGraph:
    """The graph in the `kb_graph_*` tables, over the store's pool."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool
        self.migrated = False  # the tables were brought to the current version through this part
        self.walks = walks_cache()

    async def ensure_schema(self) -> int:
        """Bring the graph tables to the current version (idempotent); later calls skip it."""
        version = await ensure_graph_schema(self.pool)
        self.migrated = True
        return version

    async def _ready(self) -> None:
        if not self.migrated:
            await self.ensure_schema()

    async def _bump(self, conn: Any, kb: str) -> None:
        await conn.execute(
            "INSERT INTO kb_graph_state (kb, generation) VALUES (%s, 1) "
            "ON CONFLICT (kb) DO UPDATE SET generation = kb_graph_state.generation + 1",
            (kb,),
        )

    async def _prune(self, conn: Any, kb: str) -> None:
        await conn.execute(
            "DELETE FROM kb_graph_entities e WHERE e.kb = %(kb)s"
            " AND NOT EXISTS (SELECT 1 FROM kb_graph_mentions m WHERE m.kb = e.kb AND m.entity = e.entity)"
            " AND NOT EXISTS (SELECT 1 FROM kb_graph_relations r WHERE r.kb = e.kb AND (r.head = e.entity OR r.tail = e.entity))",
            {"kb": kb},
        )

    async def write(self, kb: str, chunks: Sequence[ChunkGraph]) -> list[str]:
        await self._ready()
        keys = [chunk.chunk_key for chunk in chunks]
        entities: dict[str, str] = {}
        for chunk in chunks:
            for key, name in chunk.entities.items():
                entities.setdefault(key, name)
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM kb_graph_mentions WHERE kb = %s AND chunk_key = ANY(%s)", (kb, keys))
            await conn.execute("DELETE FROM kb_graph_relations WHERE kb = %s AND chunk_key = ANY(%s)", (kb, keys))
            async with conn.cursor() as cur:
                await _insert_entities(cur, kb, entities)
                await cur.executemany(
                    "INSERT INTO kb_graph_mentions (kb, chunk_key, entity) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    [(kb, chunk.chunk_key, key) for chunk in chunks for key in chunk.entities],
                )
                await cur.executemany(
                    "INSERT INTO kb_graph_relations (kb, chunk_key, head, relation, tail) VALUES (%s, %s, %s, %s, %s)",
                    [(kb, chunk.chunk_key, h, r, t) for chunk in chunks for h, r, t in chunk.relations],
                )
            await self._prune(conn, kb)
            await self._bump(conn, kb)
            cur = await conn.execute("SELECT entity FROM kb_graph_entities WHERE kb = %s AND embedding IS NULL", (kb,))
            return [_value(row, "entity", 0) for row in await cur.fetchall()]

    async def set_embeddings(self, kb: str, vectors: dict[str, list[float]]) -> None:
        await self._ready()
        async with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(
                "UPDATE kb_graph_entities SET embedding = %s WHERE kb = %s AND entity = %s",
                [(vector, kb, key) for key, vector in vectors.items()],
            )
            await self._bump(conn, kb)

    async def remove_chunks(self, kb: str, keys: Sequence[str]) -> None:
        await self._ready()
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM kb_graph_mentions WHERE kb = %s AND chunk_key = ANY(%s)", (kb, list(keys)))
            await conn.execute("DELETE FROM kb_graph_relations WHERE kb = %s AND chunk_key = ANY(%s)", (kb, list(keys)))
            await self._prune(conn, kb)
            await self._bump(conn, kb)

    async def drop(self, kb: str) -> None:
        await self._ready()
        async with self.pool.connection() as conn, conn.transaction():
            for table in ("kb_graph_mentions", "kb_graph_relations", "kb_graph_entities"):
                await conn.execute(f"DELETE FROM {table} WHERE kb = %s", (kb,))  # type: ignore[arg-type]
            await self._bump(conn, kb)

    async def generation(self, kb: str) -> int:
        await self._ready()
        async with self.pool.connection() as conn:
            cur = await conn.execute("SELECT generation FROM kb_graph_state WHERE kb = %s", (kb,))
            row = await cur.fetchone()
        return int(_value(row, "generation", 0)) if row else 0

    async def load(self, kb: str) -> GraphData:
        await self._ready()
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute("SELECT generation FROM kb_graph_state WHERE kb = %s", (kb,))
            row = await cur.fetchone()
            data = GraphData(int(_value(row, "generation", 0)) if row else 0)
            cur = await conn.execute("SELECT entity, name, embedding FROM kb_graph_entities WHERE kb = %s", (kb,))
            for row in await cur.fetchall():
                key = _value(row, "entity", 0)
                data.names[key] = _value(row, "name", 1)
                if _value(row, "embedding", 2) is not None:
                    data.embeddings[key] = _value(row, "embedding", 2)
            cur = await conn.execute("SELECT chunk_key, entity FROM kb_graph_mentions WHERE kb = %s", (kb,))
            data.mentions = [(_value(r, "chunk_key", 0), _value(r, "entity", 1)) for r in await cur.fetchall()]
            cur = await conn.execute(
                "SELECT chunk_key, head, relation, tail FROM kb_graph_relations WHERE kb = %s", (kb,)
            )
            data.relations = [
                (_value(r, "chunk_key", 0), _value(r, "head", 1), _value(r, "relation", 2), _value(r, "tail", 3))
                for r in await cur.fetchall()
            ]
        return data

    async def add_relations(
        self, kb: str, entities: dict[str, str], relations: list[tuple[str, str, str]]
    ) -> list[str]:
        await self._ready()
        async with self.pool.connection() as conn, conn.transaction():
            async with conn.cursor() as cur:
                await _insert_entities(cur, kb, entities)
                await cur.executemany(
                    "INSERT INTO kb_graph_relations (kb, chunk_key, head, relation, tail) VALUES (%s, %s, %s, %s, %s)",
                    [(kb, USER_CHUNK, h, r, t) for h, r, t in relations],
                )
            await self._bump(conn, kb)
            cur = await conn.execute("SELECT entity FROM kb_graph_entities WHERE kb = %s AND embedding IS NULL", (kb,))
            return [_value(row, "entity", 0) for row in await cur.fetchall()]

    async def cached(self, keys: Sequence[str]) -> dict[str, dict]:
        await self._ready()
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT cache_key, extraction FROM kb_graph_extractions WHERE cache_key = ANY(%s)", (list(keys),)
            )
            rows = await cur.fetchall()
        found = {}
        for row in rows:
            value = _value(row, "extraction", 1)
            found[_value(row, "cache_key", 0)] = json.loads(value) if isinstance(value, str) else value
        return found

    async def remember(self, extractions: dict[str, dict]) -> None:
        await self._ready()
        async with self.pool.connection() as conn, conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO kb_graph_extractions (cache_key, extraction) VALUES (%s, %s) "
                "ON CONFLICT (cache_key) DO UPDATE SET extraction = EXCLUDED.extraction",
                [(key, Jsonb(extraction)) for key, extraction in extractions.items()],
            )
