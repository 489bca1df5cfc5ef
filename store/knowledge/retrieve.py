"""One entry point over every strategy: `retrieve(store, kb, query, strategy=...)` and the table
`SEARCHES` it dispatches on (read-only: dense, keyword and hybrid of search.py, graph and fusion of
graph_search.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

from langgraph.store.base import BaseStore

from store.knowledge.graph_search import fusion_search, graph_search
from store.knowledge.registry import get_kb
from store.knowledge.search import _check_query, dense_search, hybrid_search, keyword_search

SEARCHES: Mapping[str, Callable[[BaseStore, str, str, int], Awaitable[dict]]] = MappingProxyType(
    {
        "dense": dense_search,
        "keyword": keyword_search,
        "hybrid": hybrid_search,
        "graph": graph_search,
        "fusion": fusion_search,
    }
)


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
    if reader is not None:
        await get_kb(store, kb, reader=reader)
    return await SEARCHES[strategy](store, kb, query, top_k)
