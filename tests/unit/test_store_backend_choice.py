"""Which backend memories and knowledge bases get for the store a server hands in
(store/backend.py `backend_for`): a LangGraph Postgres store the server built itself (Aegra's)
gets the package's SQL backend on a pool of its own, so the knowledge graph, quotas and full text
are in Postgres whichever server runs; an in-memory store keeps everything in process."""

from __future__ import annotations

from types import SimpleNamespace

from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres.aio import AsyncPostgresStore
from psycopg_pool import AsyncConnectionPool

from store.backend import InProcessBackend, SQLBackend, backend_for
from store.graph_part import MemoryGraph
from store.postgres import ServerStorePool
from store.sql.graph import PostgresGraph
from tools import quota


def server_store(monkeypatch, uri: str | None = "postgresql://u@db.example:5432/app") -> AsyncPostgresStore:
    """A store as Aegra builds it: langgraph's AsyncPostgresStore on a pool of the server's own
    (never opened here: choosing the backend does no I/O)."""
    if uri:
        monkeypatch.setenv("POSTGRES_URI", uri)
    else:
        monkeypatch.delenv("POSTGRES_URI", raising=False)
    pool = AsyncConnectionPool("postgresql://aegra@db.example:5432/app", open=False)
    return AsyncPostgresStore(conn=pool)


async def test_a_servers_own_postgres_store_gets_the_packages_sql_backend(monkeypatch):
    store = server_store(monkeypatch)
    backend = backend_for(store)
    assert isinstance(backend, SQLBackend) and backend.store is store
    assert backend_for(store) is backend  # built once per store
    pool = backend.sql.pool
    assert isinstance(pool, ServerStorePool) and pool is not store.conn and not pool.prepared
    assert pool.conninfo == "postgresql://u@db.example:5432/app"  # the package's POSTGRES_URI
    # the knowledge graph and the quotas follow the store's backend into Postgres
    assert isinstance(backend_for(store).graph, PostgresGraph)
    assert backend_for(store).graph.pool is pool


async def test_without_postgres_uri_the_backend_connects_where_the_servers_store_does(monkeypatch):
    store = server_store(monkeypatch, uri=None)
    assert backend_for(store).sql.pool.conninfo == "postgresql://aegra@db.example:5432/app"


async def test_two_server_stores_get_a_backend_each(monkeypatch):
    first, second = server_store(monkeypatch), server_store(monkeypatch)
    assert backend_for(first) is not backend_for(second)
    assert backend_for(second).store is second


def test_an_in_memory_store_keeps_everything_in_process():
    store = InMemoryStore()
    backend = backend_for(store)
    assert type(backend) is InProcessBackend and backend.sql is None
    assert isinstance(backend_for(store).graph, MemoryGraph)


async def test_quotas_on_a_servers_postgres_store_are_counted_in_sql(monkeypatch):
    store = server_store(monkeypatch)
    calls = []

    async def charge_quota(user_id, kind, window):
        calls.append((user_id, kind))
        return 1, 0.0

    monkeypatch.setattr(backend_for(store).sql, "charge_quota", charge_quota)
    monkeypatch.setenv("WEB_QUOTA_REQUESTS", "5")
    await quota.charge(store, SimpleNamespace(identity="alice", permissions=[]), "web_search")
    assert calls == [("alice", "web_search")]


def test_the_sql_backend_phrases_vector_searches_of_the_packages_index_only():
    """store/sql/'s vector statement measures cosine distance on `vector` columns, as the
    package's index (store/index.py) is built; a server's own index of another distance or vector
    type, or a filter that is not a plain value, is searched by the library's own statement."""
    from store.backends import _phrased_here

    assert _phrased_here({"dims": 384, "fields": ["$"]}, {})
    assert _phrased_here({"dims": 384, "distance_type": "cosine"}, {"speaker": "Ann", "role": "user"})
    assert not _phrased_here({"dims": 384, "distance_type": "l2"}, {})
    assert not _phrased_here({"dims": 384, "ann_index_config": {"vector_type": "halfvec"}}, {})
    assert not _phrased_here({"dims": 384}, {"created_at": {"$gte": "2024-01-01"}})
    assert not _phrased_here({"dims": 384}, {"tags": ["a", "b"]})
