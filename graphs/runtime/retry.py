"""Retries shared by tool and model calls: exponential backoff with jitter, bounded attempts."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from settings import settings

T = TypeVar("T")
BACKOFF_MAX_S = 8.0


def backoff_delay(attempt: int) -> float:
    """Exponential backoff with jitter for retry `attempt` (1-based).

    Base delay `AGENT_RETRY_BASE_DELAY` seconds (default 0.5): ~0.5 s, 1 s, 2 s ... capped at 8 s.
    """
    base = settings().AGENT_RETRY_BASE_DELAY
    return min(BACKOFF_MAX_S, base * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)


class RetriesExhausted(Exception):
    """The call failed for good; `error` is its last error, `attempts` how many were made."""

    def __init__(self, error: BaseException, attempts: int) -> None:
        super().__init__(str(error))
        self.error, self.attempts = error, attempts


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    retries: int,
    is_transient: Callable[[BaseException], bool],
    on_retry: Callable[[int, BaseException, float], None],
) -> T:
    """Await `call()`, retrying errors `is_transient` accepts at most `retries` times with
    `backoff_delay`; `on_retry(attempt, error, delay_s)` runs before each wait. A final failure
    raises `RetriesExhausted` (from the last error) with the number of attempts made.

    A plain loop, not tenacity: this wraps every model and tool call, and tenacity's machinery
    cost about 0.14 ms a call, several percent of an agent step."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except Exception as exc:
            if attempt > retries or not is_transient(exc):
                raise RetriesExhausted(exc, attempt) from exc
            delay = backoff_delay(attempt)
            on_retry(attempt, exc, delay)
            await asyncio.sleep(delay)
