"""Waiting out a Postgres outage: the pieces a run uses to survive Postgres going away.

- `database_uri()`: the Postgres a run waits for (`POSTGRES_URI`, which `scripts/prod` sets, else
  the one the package's pool opened);
- `wait_for_postgres(uri, timeout)`: until Postgres answers a query again, bounded;
- `resume_after_outages(attempt, ...)`: a graph run (any coroutine safe to repeat) that fails
  because Postgres went away is called again once Postgres answers, at most
  `DATABASE_RECOVERY_RETRIES` times, each time waiting at most `DATABASE_RECOVERY_WAIT` s. A
  LangGraph run with the same run id resumes from its last checkpoint instead of applying its
  input again, so the thread gets each message once.
- `gave_up(error)`: the error a run ends with once those bounds are spent (not waited out again
  by an enclosing wait: a node, then the run).

graphs/runtime/failures.py waits the same way when a graph node fails for that reason, and runs the
node again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg

from settings import settings
from store.pool import DatabaseUnavailable, exception_chain, is_database_unavailable, opened_uri

logger = logging.getLogger(__name__)

T = TypeVar("T")

_PROBE_EVERY_S = 0.5


def gave_up(error: BaseException) -> DatabaseUnavailable:
    """The error a run ends with when Postgres stayed away longer than it waits (DATABASE_RECOVERY_WAIT)
    or it lost Postgres more often than DATABASE_RECOVERY_RETRIES: a `DatabaseUnavailable` that is
    not waited out again (`outage_to_wait_out` is False)."""
    given_up = DatabaseUnavailable()
    given_up.gave_up = True  # type: ignore[attr-defined]
    return given_up


def database_uri() -> str | None:
    """The Postgres runs wait for: `POSTGRES_URI`, else the one the package's pool opened."""
    configured = settings().POSTGRES_URI
    if configured:
        return configured.get_secret_value()
    return opened_uri()


def outage_to_wait_out(exc: BaseException) -> bool:
    """Whether `exc` says Postgres went away (and no run gave up waiting for it already)."""
    return is_database_unavailable(exc) and not any(getattr(error, "gave_up", False) for error in exception_chain(exc))


async def postgres_answers(uri: str) -> bool:
    """Whether Postgres at `uri` accepts a connection and answers a query now."""
    try:
        async with await psycopg.AsyncConnection.connect(uri, connect_timeout=2, autocommit=True) as conn:
            await conn.execute("select 1")
    except (psycopg.Error, OSError):
        return False
    return True


async def wait_for_postgres(uri: str, timeout: float) -> float | None:
    """Seconds until Postgres at `uri` answered (probed every half second), None after `timeout`."""
    started = time.monotonic()
    while True:
        if await postgres_answers(uri):
            return time.monotonic() - started
        if time.monotonic() - started >= timeout:
            return None
        await asyncio.sleep(_PROBE_EVERY_S)


async def resume_after_outages(
    attempt: Callable[[], Awaitable[T]],
    *,
    uri: str | None = None,
    wait: float | None = None,
    retries: int | None = None,
    before_resume: Callable[[], Awaitable[None]] | None = None,
    what: str = "a run",
) -> T:
    """`await attempt()`; when it fails because Postgres went away, wait for Postgres (`uri`,
    default `database_uri()`; at most `wait` s, default DATABASE_RECOVERY_WAIT) and call
    `attempt()` again, at most `retries` times (default DATABASE_RECOVERY_RETRIES). `attempt`
    must be safe to repeat: a graph run with the same run id resumes from its last checkpoint.
    `before_resume` runs before each repetition (it may raise to stop). Any other error raises as
    it was; Postgres not back in time, or lost once more than `retries` times, raises `gave_up`
    (a `DatabaseUnavailable` no caller waits out again)."""
    wait = settings().DATABASE_RECOVERY_WAIT if wait is None else wait
    retries = settings().DATABASE_RECOVERY_RETRIES if retries is None else retries
    resumed = 0
    while True:
        try:
            if resumed and before_resume is not None:
                await before_resume()
            return await attempt()
        except Exception as exc:
            target = uri or database_uri()
            if wait <= 0 or target is None or not outage_to_wait_out(exc):
                raise
            if resumed >= retries:
                logger.error("Postgres went away during %s %d times: it fails", what, resumed + 1)
                raise gave_up(exc) from exc
            resumed += 1
            logger.warning(
                "Postgres went away during %s (%s: %s); waiting up to %g s for it (%d of %d)",
                what,
                type(exc).__name__,
                str(exc).splitlines()[0] if str(exc) else "",
                wait,
                resumed,
                retries,
            )
            waited = await wait_for_postgres(target, wait)
            if waited is None:
                logger.error("Postgres did not answer within %g s: %s fails", wait, what)
                raise gave_up(exc) from exc
            logger.info("Postgres answers again after %.1f s: %s goes on", waited, what)
