"""Which errors mean "Postgres cannot be reached", and the 503 the server answers for them."""

from __future__ import annotations

import httpx
import psycopg
import pytest
from psycopg import errors
from psycopg_pool import PoolTimeout
from starlette.applications import Starlette
from starlette.routing import Route

from server.errors import DatabaseUnavailableMiddleware
from store.postgres import DatabaseUnavailable, is_database_unavailable


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
