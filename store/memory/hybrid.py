"""Hybrid memory search: dense candidates (the store's vectors), keyword candidates (BM25 over
`memory_fulltext`, store/sql.py) and, when the query names a date, the memories written then;
fused by `fusion.fuse`. On stores without the SQL adapter (InMemoryStore in unit tests and evals)
keyword candidates come from an in-process BM25 over the user's scanned memories."""

from __future__ import annotations

import asyncio
from datetime import datetime

from langgraph.store.base import BaseStore, Item, SearchItem

from store.fusion import fuse
from store.knowledge.keyword_fallback import bm25_rank
from store.memory.config import TEXT_SEARCH_CONFIG, MemoryConfig
from store.memory.dates import query_time_range
from store.memory.listing import list_items, scan
from store.memory.times import expired
from store.sql import adapter_for

BM25_K1 = 1.2
BM25_B = 0.75
HYBRID_MIN_POOL = 50  # candidates per signal, at least: fusion needs depth to re-order


async def index_text(store: BaseStore, ns: tuple, key: str, text: str) -> None:
    """Write the full text of one embedded memory (Postgres store only; others search in process)."""
    adapter = adapter_for(store)
    if adapter is not None:
        await adapter.index_memories(".".join(ns), [(key, text)], TEXT_SEARCH_CONFIG)


async def unindex_text(store: BaseStore, ns: tuple, key: str) -> None:
    """Delete the full text of one memory (Postgres store only)."""
    adapter = adapter_for(store)
    if adapter is not None:
        await adapter.unindex_memories(".".join(ns), [key])


def _matches(value: dict, wanted: dict) -> bool:
    return all(value.get(name) == expected for name, expected in wanted.items())


async def keyword_candidates(
    store: BaseStore,
    ns: tuple,
    query: str,
    limit: int,
    wanted: dict,
    config: MemoryConfig,
    now: datetime,
) -> list[tuple[Item, float]]:
    """BM25 (item, score) of the namespace's live memories for `query`, best first."""
    adapter = adapter_for(store)
    if adapter is not None:
        return await adapter.memory_keyword_search(
            ".".join(ns),
            query,
            TEXT_SEARCH_CONFIG,
            k1=BM25_K1,
            b=BM25_B,
            limit=limit,
            match=wanted or None,
        )
    items = {
        item.key: item
        for item in await scan(store, ns, config.scan_limit)
        if not expired(item.value, now) and _matches(item.value, wanted)
    }
    ranked = await asyncio.to_thread(
        bm25_rank, query, [(key, item.value.get("text", "")) for key, item in items.items()]
    )
    return [(items[key], score) for key, score in ranked[:limit]]


def distinct_texts(ranked: list[tuple[str, float]], texts: dict[str, str | None]) -> list[tuple[str, float]]:
    """`ranked` with each text once, at its best rank (a chat log repeats "Haha, classic." on many
    days; ten copies of it would fill a top ten)."""
    seen: set[str | None] = set()
    kept = []
    for key, score in ranked:
        if texts.get(key) not in seen:
            seen.add(texts.get(key))
            kept.append((key, score))
    return kept


async def hybrid_search(
    store: BaseStore,
    user_id: str,
    kind: str,
    ns: tuple,
    query: str,
    pool: int,
    wanted: dict,
    config: MemoryConfig,
    now: datetime,
) -> list[tuple[SearchItem, float | None]]:
    """The fused candidates, best first, each text once: (SearchItem whose `score` is the fused
    score, dense cosine similarity or None when the memory came from the keyword or time signal
    only). The dense signal fetches twice `pool` candidates, as repeated texts take room."""
    window = query_time_range(query, now) if config.time_weight else None
    dense_task = store.asearch(ns, query=query, filter=wanted or None, limit=2 * pool, refresh_ttl=False)
    keyword_task = keyword_candidates(store, ns, query, pool, wanted, config, now)
    if window is not None:
        timed_task = list_items(store, user_id, (kind,), limit=pool, start=window[0], end=window[1])
        dense, keyword, timed = await asyncio.gather(dense_task, keyword_task, timed_task)
        timed = [item for item in timed if _matches(item.value, wanted)]
    else:
        dense, keyword = await asyncio.gather(dense_task, keyword_task)
        timed = []
    dense = [hit for hit in dense if not expired(hit.value, now)]
    keyword = [(item, score) for item, score in keyword if not expired(item.value, now)]
    by_key: dict[str, Item] = {item.key: item for item in (*timed, *(i for i, _ in keyword), *dense)}
    similarity = {hit.key: hit.score for hit in dense}
    fused = fuse(
        [(hit.key, hit.score or 0.0) for hit in dense],
        [(item.key, score) for item, score in keyword],
        keyword_weight=config.keyword_weight,
        in_range=[item.key for item in timed],
        time_weight=config.time_weight,
    )
    results = []
    for key, score in distinct_texts(fused, {key: item.value.get("text") for key, item in by_key.items()})[:pool]:
        item = by_key[key]
        hit = SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)
        results.append((hit, similarity.get(key)))
    return results
