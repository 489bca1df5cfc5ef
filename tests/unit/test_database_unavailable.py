"""Which errors mean "Postgres cannot be reached", and the 503 the server answers for them."""

from __future__ import annotations

import httpx
import psycopg
import pytest
from psycopg import errors
from psycopg_pool import PoolTimeout
from starlette.applications import Starlette
from starlette.routing import Route

from server.errors import DatabaseUnavailableMiddleware, is_queue_unavailable
from store.postgres import DatabaseUnavailable, is_database_busy, is_database_unavailable


def _wrapped(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


@pytest.mark.parametrize(
    ("error", "unavailable"),
    [
        (DatabaseUnavailable(), True),
        (PoolTimeout("couldn't get a connection after 5.00 sec"), True),
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),  # no SQLSTATE
        (errors.AdminShutdown("terminating connection due to administrator command"), True),
        (errors.CannotConnectNow("the database system is starting up"), True),
        (_wrapped(RuntimeError("saving the checkpoint failed"), PoolTimeout("timeout")), True),
        (ExceptionGroup("tasks", [ValueError("x"), PoolTimeout("timeout")]), True),
        # statement-level errors are the statement's problem, not a lost database
        (errors.QueryCanceled("canceling statement due to statement timeout"), False),
        (errors.UniqueViolation("duplicate key"), False),
        (ValueError("bad input"), False),
    ],
)
def test_database_unavailable_is_told_from_other_errors(error, unavailable):
    assert is_database_unavailable(error) is unavailable


def test_the_message_reaches_run_clients():
    # The LangGraph server shows a run's error message only for RuntimeError and a few others.
    error = DatabaseUnavailable()
    assert isinstance(error, RuntimeError) and isinstance(error, psycopg.OperationalError)
    assert "database is unavailable" in str(error)


async def test_the_middleware_answers_503_in_the_error_shape_and_lets_other_errors_through():
    app = Starlette(
        routes=[
            Route("/down", _raise(DatabaseUnavailable())),
            Route("/other", _raise(ValueError("not the database"))),
        ]
    )
    app.add_middleware(DatabaseUnavailableMiddleware)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        reply = await client.get("/down")
        assert reply.status_code == 503 and reply.headers["retry-after"] == "2"
        body = reply.json()
        assert body["error"] == "DATABASE_UNAVAILABLE" and "database" in body["message"]
        assert body["details"] == {"retry_after": 2}
        with pytest.raises(ValueError, match="not the database"):
            await client.get("/other")


def _raise(error: BaseException):
    async def endpoint(request):
        raise error

    return endpoint


# The self-hosted server (Aegra) reaches its own tables through asyncpg and queues runs in Redis;
# neither package is a dependency of this one, so their errors are recognised by module and name.
def _raised_in(module: str, error: BaseException) -> BaseException:
    """`error` as raised by code of `module` (its traceback has a frame of that module)."""
    namespace: dict = {"__name__": module, "error": error}
    exec("def connect():\n    raise error\n", namespace)
    try:
        namespace["connect"]()
    except BaseException as raised:
        return raised
    raise AssertionError("not raised")


def _foreign(module: str, name: str, base: type[BaseException] = Exception) -> BaseException:
    return type(name, (base,), {"__module__": module})(f"{name} from {module}")


@pytest.mark.parametrize(
    ("error", "unavailable"),
    [
        # asyncpg connecting to a stopped Postgres: the unix socket is gone, or the port refuses
        (_raised_in("asyncpg.connect_utils", FileNotFoundError(2, "No such file or directory")), True),
        (_raised_in("asyncpg.connect_utils", ConnectionRefusedError(111, "Connection refused")), True),
        (_wrapped(RuntimeError("sqlalchemy"), _foreign("asyncpg.exceptions", "ConnectionDoesNotExistError")), True),
        (_foreign("asyncpg.exceptions", "CannotConnectNowError"), True),
        # the same OS errors elsewhere (a file, a web tool) are not the database
        (FileNotFoundError(2, "No such file or directory"), False),
        (_raised_in("httpx._transports", ConnectionRefusedError(111, "Connection refused")), False),
        (_foreign("asyncpg.exceptions", "UniqueViolationError"), False),
    ],
)
def test_asyncpg_connection_failures_are_the_database_unavailable(error, unavailable):
    assert is_database_unavailable(error) is unavailable


@pytest.mark.parametrize(
    ("error", "unavailable"),
    [
        (_foreign("redis.exceptions", "ConnectionError"), True),
        (_wrapped(RuntimeError("enqueue"), _foreign("redis.exceptions", "TimeoutError")), True),
        (_foreign("redis.exceptions", "ResponseError"), False),
        (ConnectionError("not redis"), False),
    ],
)
def test_redis_connection_failures_are_the_queue_unavailable(error, unavailable):
    assert is_queue_unavailable(error) is unavailable


async def test_the_middleware_answers_503_queue_unavailable_and_database_unavailable_for_asyncpg():
    app = Starlette(
        routes=[
            Route("/redis", _raise(_foreign("redis.exceptions", "ConnectionError"))),
            Route("/asyncpg", _raise(_raised_in("asyncpg.connect_utils", FileNotFoundError(2, "gone")))),
        ]
    )
    app.add_middleware(DatabaseUnavailableMiddleware)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        queue = await client.get("/redis")
        assert queue.status_code == 503 and queue.headers["retry-after"] == "2"
        assert queue.json()["error"] == "QUEUE_UNAVAILABLE" and "Redis" in queue.json()["message"]
        database = await client.get("/asyncpg")
        assert database.status_code == 503 and database.json()["error"] == "DATABASE_UNAVAILABLE"


@pytest.mark.parametrize(
    ("error", "busy"),
    [
        # Postgres at max_connections: asyncpg (Aegra's tables), psycopg (with and without SQLSTATE)
        (_wrapped(RuntimeError("sqlalchemy"), _foreign("asyncpg.exceptions", "TooManyConnectionsError")), True),
        (errors.TooManyConnections("sorry, too many clients already"), True),
        (psycopg.OperationalError("connection failed: FATAL:  sorry, too many clients already"), True),
        # Aegra's SQLAlchemy pool waited for a free connection in vain
        (_foreign("sqlalchemy.exc", "TimeoutError"), True),
        (PoolTimeout("couldn't get a connection after 5.00 sec"), False),  # DATABASE_UNAVAILABLE
        (TimeoutError("a tool timed out"), False),
        (errors.UniqueViolation("duplicate key"), False),
    ],
)
def test_a_saturated_database_is_told_from_other_errors(error, busy):
    assert is_database_busy(error) is busy


async def test_the_middleware_answers_503_database_busy_when_no_connection_is_free():
    app = Starlette(
        routes=[
            Route("/limit", _raise(_foreign("asyncpg.exceptions", "TooManyConnectionsError"))),
            Route("/pool", _raise(_foreign("sqlalchemy.exc", "TimeoutError"))),
        ]
    )
    app.add_middleware(DatabaseUnavailableMiddleware)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for path in ("/limit", "/pool"):
            reply = await client.get(path)
            assert reply.status_code == 503 and reply.headers["retry-after"] == "2"
            assert reply.json()["error"] == "DATABASE_BUSY" and "busy" in reply.json()["message"]
