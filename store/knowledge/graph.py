"""The knowledge graph of a knowledge base: entities (with embeddings), relations and
entity<->chunk links, written at ingest (store/knowledge/ingest.py) and kept consistent on
re-ingest and delete, plus triples a user inserts (`insert_triples`).

The graph is stored by the store's backend (store/backend.py `backend_for(store).graph`): the
Postgres tables of store/sql/graph.py, or in process (store/graph_part.py) for other stores.

Retrieval over the graph lives in store/knowledge/graph_search.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence

from langgraph.store.base import BaseStore

from store.backend import backend_for
from store.embeddings import get_embeddings
from store.graph_part import ChunkGraph, GraphPart
from store.knowledge.extract import (
    ChunkText,
    Extraction,
    ModelExtractor,
    OfflineExtractor,
    entity_key,
    offline_extract,
)
from store.knowledge.registry import get_kb


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


# --- writing -------------------------------------------------------------------------------


async def _embed_entities(backend: GraphPart, kb: str, missing: Iterable[str], names: dict[str, str]) -> None:
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
    backend = backend_for(store).graph
    if isinstance(extractor, ModelExtractor):
        keys = [extractor.cache_key(chunk) for chunk in chunks]
        extractor.cache.update({k: Extraction.from_dict(v) for k, v in (await backend.cached(keys)).items()})
        known = set(extractor.cache)
        extractions = await extractor.extract(chunks, progress)
        fresh = {k: extractor.cache[k].as_dict() for k in keys if k in extractor.cache and k not in known}
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
        await backend_for(store).graph.remove_chunks(kb, keys)


async def drop_graph(store: BaseStore, kb: str) -> None:
    """Forget a deleted knowledge base's graph."""
    await backend_for(store).graph.drop(kb)


async def insert_triples(store: BaseStore, kb: str, triples: Sequence[Sequence[str]]) -> dict:
    """Add your own (head, relation, tail) facts to `kb`'s graph: their entities resolve with the
    extracted ones (same `entity_key`), so the walk crosses them. Returns {"entities", "relations"}
    (how many were given). Raises KBUnknownError for an unknown kb, ValueError for a malformed triple."""
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
    backend = backend_for(store).graph
    missing = await backend.add_relations(kb, entities, relations)
    await _embed_entities(backend, kb, missing, entities)
    return {"entities": len(entities), "relations": len(relations)}
