"""The backend seam: what memories and knowledge bases need from a store beyond `BaseStore`
(full text, listings by substring and time, thread neighbours, bulk deletes, atomic inserts,
updates of derived items that concurrent ones never undo: `update_items`),
chosen once per store by `backend_for`.
The implementations are in store/backends.py, each with a graph part (`backend.graph`:
store/graph_part.py in process, store/sql/graph.py on Postgres).

- `SQLBackend`: the store `store.postgres.store()` builds carries one (`PostgresStore.backend`),
  the statements of store/sql/ on its pool, with the text search configuration it was opened
  with. A LangGraph Postgres store the server built itself (Aegra's) gets one too, on the
  package's own pool beside that store's table (`store.server_store.server_store_backend`), so the
  package's tables (full text, quotas, the knowledge graph) are in Postgres on every server.
- `InProcessBackend`: any other store (InMemoryStore in unit tests and evals) gets one: the same
  calls answered by scanning the store's namespaces page by page (at most `scan_limit` items per
  namespace) and ranking in process (store/bm25.py). Full-text indexing is a no-op there.

Namespaces are tuples; results are langgraph `Item`s (keyword hits as (item, score) pairs, the
score a share of the query's BM25 ceiling, 0..1), live ones only.
"""

from __future__ import annotations

import weakref

from langgraph.store.base import BaseStore
from langgraph.store.postgres.aio import AsyncPostgresStore

from settings import settings
from store.backends import DATED_SCAN, PAGE, InProcessBackend, Listing, Scored, Span, SQLBackend, haystack
from store.server_store import server_store_backend
from store.sql import MEMORY_TEXT_SEARCH_CONFIG

__all__ = [
    "DATED_SCAN",
    "MEMORY_TEXT_SEARCH_CONFIG",
    "PAGE",
    "Backend",
    "InProcessBackend",
    "Listing",
    "SQLBackend",
    "Scored",
    "Span",
    "backend_for",
    "haystack",
]

Backend = InProcessBackend  # the interface; SQLBackend is the other implementation
_IN_PROCESS: weakref.WeakKeyDictionary[BaseStore, InProcessBackend] = weakref.WeakKeyDictionary()


def backend_for(store: BaseStore) -> Backend:
    """The store's backend, whichever store the server hands in: its own (`PostgresStore.backend`);
    for another LangGraph Postgres store (the one Aegra builds itself), the package's SQL backend
    on a pool of its own beside that store's table (`store.server_store.server_store_backend`), made
    once per store; else an in-process one, made once per store with MEMORY_SCAN_LIMIT read then."""
    own = getattr(store, "backend", None)
    if isinstance(own, InProcessBackend):
        return own
    if isinstance(store, AsyncPostgresStore):
        return server_store_backend(store)
    try:
        if store not in _IN_PROCESS:
            _IN_PROCESS[store] = InProcessBackend(store, settings().MEMORY_SCAN_LIMIT)
        return _IN_PROCESS[store]
    except TypeError:  # a store that cannot be weakly referenced: a backend per call
        return InProcessBackend(store, settings().MEMORY_SCAN_LIMIT)
