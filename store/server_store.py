"""The package's SQL beside a server's own Postgres store (Aegra builds its own
`AsyncPostgresStore`; langgraph.json's store factory is not used there): a pool of the package's
own (`ServerStorePool`), prepared on first use, and the SQL backend on it that
`store.backend.backend_for` picks for such a store."""

from __future__ import annotations

import asyncio
import logging
import weakref
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast

from langgraph.store.postgres.aio import AsyncPostgresStore

from settings import settings
from store.backends import SQLBackend
from store.index import index_server_store
from store.migrations import LOCK_ID as MIGRATION_LOCK_ID
from store.migrations import migrate
from store.pool import DatabasePool, _pool_settings
from store.sql import (
    MIGRATION_COMPONENT,
    StoreSQL,
    migrations,
    server_store_conninfo,
    server_store_location,
    store_location,
)
from store.sql.graph import ensure_graph_schema

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import DictRow

logger = logging.getLogger(__name__)

_PREPARING: ContextVar[bool] = ContextVar("agent_engine_server_pool_preparing", default=False)
_SERVER_BACKENDS: weakref.WeakKeyDictionary[AsyncPostgresStore, SQLBackend] = weakref.WeakKeyDictionary()


class StoreLocationError(RuntimeError):
    """The package's Postgres (POSTGRES_URI) is not the database of the server's store."""


def _store_conninfo(server_store: AsyncPostgresStore) -> str:
    """POSTGRES_URI when set, else the database the server's store connects to."""
    configured = settings().POSTGRES_URI
    return configured.get_secret_value() if configured else server_store_conninfo(server_store)


class ServerStorePool(DatabasePool["AsyncConnection[DictRow]"]):
    """The package's own pool beside a server's Postgres store (Aegra builds its own
    `AsyncPostgresStore`; langgraph.json's store factory is not used there).

    Made without I/O (`store.backend.backend_for` is synchronous); the first connection asked
    for prepares it, once, whichever task asks first: it finds the schema of the server store's
    `store` table (over the store's own connection), opens on POSTGRES_URI (else the store's
    database) with that schema first on the `search_path`, checks it reaches that very table
    (StoreLocationError otherwise), and brings the package's tables there to their current
    version (store/sql/schema.py `migrations`, the knowledge graph's; versioned, under an advisory lock:
    replicas starting together apply each step once; a store that had rows before gets their
    full text and speakers filled in), and gives the server's store the package's semantic index
    (store/index.py `index_server_store`: the local embeddings model, vectors beside its table)."""

    def __init__(self, server_store: AsyncPostgresStore) -> None:
        super().__init__(
            conninfo=_store_conninfo(server_store),
            min_size=1,
            max_size=settings().POSTGRES_POOL_SIZE,
            open=False,
            **_pool_settings("public"),
        )
        self.server_store = server_store
        self.prepared = False
        self._prepare_lock = asyncio.Lock()

    async def getconn(self, timeout: float | None = None) -> AsyncConnection[DictRow]:
        if not self.prepared and not _PREPARING.get():
            await self.prepare()
        return await super().getconn(timeout)

    async def prepare(self) -> None:
        """Open and migrate (see the class); a failure (Postgres down) is retried by the next call."""
        async with self._prepare_lock:
            if self.prepared:
                return
            token = _PREPARING.set(True)
            try:
                theirs = await server_store_location(self.server_store)
                if theirs is None:
                    raise StoreLocationError("The server's store has no `store` table: its setup() has not run.")
                schema = theirs["schema"]
                if not schema.isidentifier():
                    raise StoreLocationError(f"The server's store is in schema {schema!r}, not a plain identifier.")
                cast(dict, self.kwargs)["options"] = _pool_settings(schema)["kwargs"]["options"]
                await self.open(wait=True, timeout=30)
                async with self.connection() as conn:
                    ours = await store_location(conn)
                    if ours != theirs:
                        raise StoreLocationError(
                            f"POSTGRES_URI is not the database of the server's store (schema {schema!r} of "
                            f"database {theirs['db']!r}; POSTGRES_URI reaches {ours and ours['db']!r}): point both "
                            "(POSTGRES_URI and the server's DATABASE_URL) at one database."
                        )
                    async with conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_ID,))
                        # in `public`, like open_pool's, so every schema's tables see the type
                        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
                text_search_config = settings().KB_TEXT_SEARCH_CONFIG
                await migrate(self, MIGRATION_COMPONENT, migrations(text_search_config))
                await StoreSQL(self).sync_kb_fulltext(text_search_config)
                await ensure_graph_schema(self)
                index = await index_server_store(self.server_store, StoreSQL(self))
                self.prepared = True
                logger.info(
                    "The package's tables are ready beside the server's store (schema %s); search by meaning: %s",
                    schema,
                    index,
                )
            finally:
                _PREPARING.reset(token)


def server_store_backend(server_store: AsyncPostgresStore) -> SQLBackend:
    """The package's SQL backend for a server's own Postgres store (one per store, on a
    `ServerStorePool` of its own): the store's items stay in the server's store, the package's
    statements (store/sql/: full text, listings, quotas; the knowledge graph) run on the
    package's pool against the same table. `store.backend.backend_for` picks it."""
    if server_store not in _SERVER_BACKENDS:
        text_search_config = settings().KB_TEXT_SEARCH_CONFIG
        sql = StoreSQL(ServerStorePool(server_store))
        _SERVER_BACKENDS[server_store] = SQLBackend(server_store, sql, text_search_config)
    return _SERVER_BACKENDS[server_store]


async def prepare_server_store(server_store: Any) -> SQLBackend | None:
    """At a server's start: the package's backend for the server's store, opened and migrated
    now rather than at its first use (None when the store is not a bare LangGraph Postgres store:
    ours, store/postgres.py's, carries its own backend; other stores keep everything in process)."""
    if not isinstance(server_store, AsyncPostgresStore) or isinstance(
        getattr(server_store, "backend", None), SQLBackend
    ):
        return None
    backend = server_store_backend(server_store)
    await cast(ServerStorePool, backend.sql.pool).prepare()
    return backend


async def close_server_backends() -> None:
    """Close the pools of the server stores' backends (server shutdown)."""
    for backend in list(_SERVER_BACKENDS.values()):
        await backend.sql.pool.close()
    _SERVER_BACKENDS.clear()
