"""The backend's graph part (store/backend.py): what a knowledge base's graph needs from a store.

`GraphPart` is the interface; two implementations: `MemoryGraph` here (in process, for stores
without SQL: unit tests, evals; its data lives on the store's in-process backend) and
`PostgresGraph` in store/sql/graph.py (the project's `kb_graph_*` tables). Extractions are cached
as their JSON dicts (store/knowledge/extract.py `Extraction.as_dict`), keyed by chunk hash.
What goes into the graph and how it is searched live in store/knowledge/graph.py and
graph_search.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from store.lru import LRU

USER_CHUNK = ""  # chunk_key of relations a user inserted (no chunk holds them)
WALKS_CACHED = 32  # knowledge bases whose walk structures a graph part keeps


def walks_cache() -> LRU[str, Any]:
    """The cache of a graph part's walk structures (store/knowledge/graph_search.py): by knowledge
    base, each valid for the graph generation it was built from; a bounded LRU of
    `WALKS_CACHED` knowledge bases (one rebuilt when asked for again after being forgotten)."""
    return LRU(WALKS_CACHED)


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


class GraphPart(Protocol):
    """A knowledge base's graph in a store: entities, mentions, relations, a generation number
    bumped on every change, and the cache of model extractions. `walks`: see `walks_cache`."""

    walks: LRU[str, Any]

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

    async def add_relations(
        self, kb: str, entities: dict[str, str], relations: list[tuple[str, str, str]]
    ) -> list[str]:
        """Add relations no chunk holds (a user's); return the keys of entities without an embedding."""
        ...

    async def cached(self, keys: Sequence[str]) -> dict[str, dict]:
        """The extractions (as dicts) cached under these chunk hashes."""
        ...

    async def remember(self, extractions: dict[str, dict]) -> None: ...


@dataclass
class _MemoryKB:
    generation: int = 0
    names: dict[str, str] = field(default_factory=dict)
    embeddings: dict[str, list[float]] = field(default_factory=dict)
    mentions: dict[str, set[str]] = field(default_factory=dict)  # chunk -> entity keys
    relations: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)  # chunk -> relations


class MemoryGraph:
    """The graph of a store without SQL, held by the store's in-process backend (process-local)."""

    def __init__(self) -> None:
        self.kbs: dict[str, _MemoryKB] = {}
        self.cache: dict[str, dict] = {}
        self.walks = walks_cache()

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

    async def cached(self, keys: Sequence[str]) -> dict[str, dict]:
        return {key: self.cache[key] for key in keys if key in self.cache}

    async def remember(self, extractions: dict[str, dict]) -> None:
        self.cache.update(extractions)
