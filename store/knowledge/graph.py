"""The knowledge graph of a knowledge base: entities (with embeddings), relations and
entity<->chunk links, written at ingest (store/knowledge/ingest.py) and kept consistent on
re-ingest and delete, plus triples a user inserts (`insert_triples`).

Two backends behind one small interface (`GraphBackend`): Postgres tables of the project's own
on the Postgres store (`kb_graph_*`, created by versioned migrations, store/migrations.py), and
an in-process one for other stores (unit tests, evals). `backend_for(store)` picks it.

Retrieval over the graph lives in store/knowledge/graph_search.py.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langgraph.store.base import BaseStore
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from store.backend import backend_for as store_backend
from store.embeddings import get_embeddings
from store.knowledge.extract import (
    ChunkText,
    Extraction,
    ModelExtractor,
    OfflineExtractor,
    entity_key,
    offline_extract,
)
from store.migrations import migrate

COMPONENT = "kb_graph"
USER_CHUNK = ""  # chunk_key of relations a user inserted (no chunk holds them)
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


@dataclass
class ChunkGraph:
    """One chunk's resolved part of the graph: entity key -> surface name, relations by key."""

    chunk_key: str
    entities: dict[str, str]
    relations: list[tuple[str, str, str]]


@dataclass
class GraphData:
    """A knowledge base's whole graph, as the walk reads it."""

    generation: int
    names: dict[str, str] = field(default_factory=dict)  # entity key -> name
    embeddings: dict[str, list[float]] = field(default_factory=dict)
    mentions: list[tuple[str, str]] = field(default_factory=list)  # (chunk key, entity key)
    relations: list[tuple[str, str, str, str]] = field(default_factory=list)  # (chunk, head, relation, tail)


class GraphBackend(Protocol):
    async def write(self, kb: str, chunks: Sequence[ChunkGraph]) -> list[str]:
        """Replace the chunks' mentions and relations; return the keys of entities without an embedding."""
        ...

    async def set_embeddings(self, kb: str, vectors: dict[str, list[float]]) -> None: ...

    async def remove_chunks(self, kb: str, keys: Sequence[str]) -> None:
        """Forget the chunks' mentions and relations, and the entities nothing refers to anymore."""
        ...

    async def drop(self, kb: str) -> None: ...

    async def load(self, kb: str) -> GraphData: ...

    async def generation(self, kb: str) -> int: ...

    async def cached(self, keys: Sequence[str]) -> dict[str, Extraction]: ...

    async def remember(self, extractions: dict[str, Extraction]) -> None: ...


def resolve(extraction: Extraction) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """Entity keys -> first surface name, and relations between keys (self-loops dropped)."""
    entities: dict[str, str] = {}
    for surface in extraction.entities:
        key = entity_key(surface)
        if key:
            entities.setdefault(key, surface.strip())
    relations = []
    for head, relation, tail in extraction.triples:
        head_key, tail_key = entity_key(head), entity_key(tail)
        if head_key and tail_key and head_key != tail_key:
            entities.setdefault(head_key, head.strip())
            entities.setdefault(tail_key, tail.strip())
            relations.append((head_key, relation, tail_key))
    return entities, relations


# --- in-process backend --------------------------------------------------------------------


@dataclass
class _MemoryKB:
    generation: int = 0
    names: dict[str, str] = field(default_factory=dict)
    embeddings: dict[str, list[float]] = field(default_factory=dict)
    mentions: dict[str, set[str]] = field(default_factory=dict)  # chunk -> entity keys
    relations: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)  # chunk -> relations


_MEMORY: weakref.WeakKeyDictionary[BaseStore, dict[str, _MemoryKB]] = weakref.WeakKeyDictionary()
_MEMORY_CACHE: weakref.WeakKeyDictionary[BaseStore, dict[str, Extraction]] = weakref.WeakKeyDictionary()


class MemoryGraph:
    """The graph of a store without SQL, kept next to the store object (process-local)."""

    def __init__(self, store: BaseStore) -> None:
        self.kbs = _MEMORY.setdefault(store, {})
        self.cache = _MEMORY_CACHE.setdefault(store, {})

    def _kb(self, kb: str) -> _MemoryKB:
        return self.kbs.setdefault(kb, _MemoryKB())

    async def write(self, kb: str, chunks: Sequence[ChunkGraph]) -> list[str]:
        graph = self._kb(kb)
        for chunk in chunks:
            for key, name in chunk.entities.items():
                graph.names.setdefault(key, name)
            graph.mentions[chunk.chunk_key] = set(chunk.entities)
            graph.relations[chunk.chunk_key] = list(chunk.relations)
        self._prune(graph)
        graph.generation += 1
        return [key for key in graph.names if key not in graph.embeddings]

    async def set_embeddings(self, kb: str, vectors: dict[str, list[float]]) -> None:
        graph = self._kb(kb)
        graph.embeddings.update({k: v for k, v in vectors.items() if k in graph.names})
        graph.generation += 1

    @staticmethod
    def _prune(graph: _MemoryKB) -> None:
        used = {key for keys in graph.mentions.values() for key in keys}
        used |= {k for relations in graph.relations.values() for h, _, t in relations for k in (h, t)}
        for key in [key for key in graph.names if key not in used]:
            del graph.names[key]
            graph.embeddings.pop(key, None)

    async def remove_chunks(self, kb: str, keys: Sequence[str]) -> None:
        graph = self._kb(kb)
        for key in keys:
            graph.mentions.pop(key, None)
            graph.relations.pop(key, None)
        self._prune(graph)
        graph.generation += 1

    async def drop(self, kb: str) -> None:
        self.kbs.pop(kb, None)

    async def load(self, kb: str) -> GraphData:
        graph = self._kb(kb)
        return GraphData(
            graph.generation,
            dict(graph.names),
            dict(graph.embeddings),
            [(chunk, key) for chunk, keys in graph.mentions.items() for key in sorted(keys)],
            [(chunk, h, r, t) for chunk, relations in graph.relations.items() for h, r, t in relations],
        )

    async def generation(self, kb: str) -> int:
        return self._kb(kb).generation

    async def add_relations(
        self, kb: str, entities: dict[str, str], relations: list[tuple[str, str, str]]
    ) -> list[str]:
        graph = self._kb(kb)
        existing = graph.relations.get(USER_CHUNK, [])
        return (
            await self.write(kb, [ChunkGraph(USER_CHUNK, {}, [*existing, *relations])]) if entities or relations else []
        )

    async def cached(self, keys: Sequence[str]) -> dict[str, Extraction]:
        return {key: self.cache[key] for key in keys if key in self.cache}

    async def remember(self, extractions: dict[str, Extraction]) -> None:
        self.cache.update(extractions)


# --- Postgres backend ----------------------------------------------------------------------

_MIGRATED: weakref.WeakSet[AsyncConnectionPool[Any]] = weakref.WeakSet()


async def ensure_graph_schema(pool: AsyncConnectionPool[Any]) -> int:
    """Bring the graph tables to the current version (store start-up; idempotent)."""
    version = await migrate(pool, COMPONENT, MIGRATIONS)
    _MIGRATED.add(pool)
    return version


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

    async def _ready(self) -> None:
        if self.pool not in _MIGRATED:
            await ensure_graph_schema(self.pool)

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

    async def cached(self, keys: Sequence[str]) -> dict[str, Extraction]:
        await self._ready()
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT cache_key, extraction FROM kb_graph_extractions WHERE cache_key = ANY(%s)", (list(keys),)
            )
            rows = await cur.fetchall()
        found = {}
        for row in rows:
            value = _value(row, "extraction", 1)
            found[_value(row, "cache_key", 0)] = Extraction.from_dict(
                json.loads(value) if isinstance(value, str) else value
            )
        return found

    async def remember(self, extractions: dict[str, Extraction]) -> None:
        await self._ready()
        async with self.pool.connection() as conn, conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO kb_graph_extractions (cache_key, extraction) VALUES (%s, %s) "
                "ON CONFLICT (cache_key) DO UPDATE SET extraction = EXCLUDED.extraction",
                [(key, Jsonb(extraction.as_dict())) for key, extraction in extractions.items()],
            )


def backend_for(store: BaseStore) -> PostgresGraph | MemoryGraph:
    """The graph backend of `store`: Postgres tables next to its SQL backend, else in process."""
    sql = store_backend(store).sql
    return PostgresGraph(sql.pool) if sql is not None else MemoryGraph(store)


# --- writing -------------------------------------------------------------------------------


async def _embed_entities(
    backend: PostgresGraph | MemoryGraph, kb: str, missing: Iterable[str], names: dict[str, str]
) -> None:
    keys = [key for key in missing if key in names]
    if not keys:
        return
    vectors = await get_embeddings().aembed_documents([names[key] for key in keys])
    await backend.set_embeddings(kb, dict(zip(keys, vectors, strict=True)))


async def index_chunks(
    store: BaseStore,
    kb: str,
    chunks: Sequence[ChunkText],
    extractor: OfflineExtractor | ModelExtractor | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Extract and write the graph of `chunks` (replacing what they had); embed the new
    entities. A model extractor's earlier results come from the backend's cache (by chunk hash).
    Returns the number of entities the chunks mention."""
    if not chunks:
        return 0
    backend = backend_for(store)
    if isinstance(extractor, ModelExtractor):
        keys = [extractor.cache_key(chunk) for chunk in chunks]
        extractor.cache.update(await backend.cached(keys))
        known = set(extractor.cache)
        extractions = await extractor.extract(chunks, progress)
        fresh = {k: extractor.cache[k] for k in keys if k in extractor.cache and k not in known}
        if fresh:
            await backend.remember(fresh)
    else:
        extractions = await asyncio.to_thread(lambda: [offline_extract(chunk) for chunk in chunks])
        if progress is not None:
            progress(len(chunks), len(chunks))
    graphs, names = [], {}
    for chunk, extraction in zip(chunks, extractions, strict=True):
        entities, relations = resolve(extraction)
        names.update({k: v for k, v in entities.items() if k not in names})
        graphs.append(ChunkGraph(chunk.key, entities, relations))
    missing = await backend.write(kb, graphs)
    await _embed_entities(backend, kb, missing, names)
    return sum(len(graph.entities) for graph in graphs)


async def unindex_chunks(store: BaseStore, kb: str, keys: Sequence[str]) -> None:
    """Forget deleted chunks (and the entities only they mentioned)."""
    if keys:
        await backend_for(store).remove_chunks(kb, keys)


async def drop_graph(store: BaseStore, kb: str) -> None:
    """Forget a deleted knowledge base's graph."""
    await backend_for(store).drop(kb)


async def insert_triples(store: BaseStore, kb: str, triples: Sequence[Sequence[str]]) -> dict:
    """Add your own (head, relation, tail) facts to `kb`'s graph: their entities resolve with the
    extracted ones (same `entity_key`), so the walk crosses them. Returns {"entities", "relations"}
    (how many were given). Raises KBUnknownError for an unknown kb, ValueError for a malformed triple."""
    from store.knowledge.registry import get_kb

    await get_kb(store, kb)
    checked = []
    for triple in triples:
        if (
            isinstance(triple, str)
            or len(triple) != 3
            or not all(isinstance(part, str) and part.strip() for part in triple)
        ):
            raise ValueError(f"A triple is three non-empty strings (head, relation, tail), got {triple!r}.")
        checked.append((triple[0].strip(), triple[1].strip(), triple[2].strip()))
    entities, relations = resolve(Extraction([], checked))
    backend = backend_for(store)
    missing = await backend.add_relations(kb, entities, relations)
    await _embed_entities(backend, kb, missing, entities)
    return {"entities": len(entities), "relations": len(relations)}
