"""Searching a knowledge base in one call, through its handle (store/knowledge/handle.py):
`retrieve(store, kb, query, strategy=...)`, and one function per strategy (`dense_search`,
`keyword_search`, `hybrid_search`, `graph_search`, `fusion_search`) for callers that name it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langgraph.store.base import BaseStore

from store.knowledge.handle import open as open_kb
from store.knowledge.search import _check_query


async def retrieve(
    store: BaseStore,
    kb: str,
    query: str,
    *,
    strategy: str = "hybrid",
    top_k: int = 5,
    reader: str | None = None,
) -> dict[str, Any]:
    """Search `kb` with one strategy ("dense", "keyword", "hybrid", "graph" or "fusion") and return the retrieve-only
    contract {"context", "retrieval_results", "reference"} (plus "kb", "query", "strategy"), for
    the user `reader` (their own and the shared knowledge bases; None: any, see `readable_by`).

    Raises ValueError for an empty query, top_k outside 1..50 or an unknown strategy, and
    KBUnknownError (a ValueError listing the knowledge bases `reader` may read) for a kb that
    does not exist or that `reader` may not read.
    """
    _check_query(query, top_k, strategy)
    handle = await open_kb(store, kb, reader=reader)
    return await handle.search(query, strategy=strategy, top_k=top_k)


async def dense_search(store: BaseStore, kb: str, query: str, top_k: int = 5) -> dict:
    """Vector search (the store's semantic index, cosine similarity) over `kb`'s chunks."""
    return await retrieve(store, kb, query, strategy="dense", top_k=top_k)


async def keyword_search(store: BaseStore, kb: str, query: str, top_k: int = 5) -> dict:
    """BM25 keyword search over `kb`'s chunks (Postgres full-text on a Postgres store)."""
    return await retrieve(store, kb, query, strategy="keyword", top_k=top_k)


async def hybrid_search(
    store: BaseStore,
    kb: str,
    query: str,
    top_k: int = 5,
    *,
    keyword_weight: float | None = None,
    now: datetime | None = None,
) -> dict:
    """Dense and keyword candidates fused by the hybrid pipeline (store/hybrid.py, `kb_policy`;
    `keyword_weight` default KB_HYBRID_KEYWORD_WEIGHT); score is the fused score. When the query
    names a time range (relative to `now`), the chunks of documents dated in it are searched too
    and get KB_TIME_WEIGHT more; chunks holding a name of the query that many chunks hold
    (`common_names`: the person a chat-log question asks about) get KB_NAME_WEIGHT more."""
    _check_query(query, top_k, "hybrid")
    handle = await open_kb(store, kb)
    if keyword_weight is not None:
        handle = handle.with_keyword_weight(keyword_weight)
    return await handle.search(query, strategy="hybrid", top_k=top_k, now=now)


async def graph_search(store: BaseStore, kb: str, query: str, top_k: int = 5) -> dict:
    """Knowledge-graph retrieval (store/knowledge/graph_search.py); each result has `path`."""
    return await retrieve(store, kb, query, strategy="graph", top_k=top_k)


async def fusion_search(store: BaseStore, kb: str, query: str, top_k: int = 5) -> dict:
    """Reciprocal rank fusion of the hybrid (dense and keyword) and graph rankings; results keep
    the graph's `path`."""
    return await retrieve(store, kb, query, strategy="fusion", top_k=top_k)
