"""Retries shared by tool and model calls: exponential backoff with jitter, bounded attempts."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

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
    raises `RetriesExhausted` (from the last error) with the number of attempts made."""

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        if error is not None:  # always: only exceptions are retried
            on_retry(state.attempt_number, error, delay)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(retries + 1),
        wait=lambda state: backoff_delay(state.attempt_number),
        retry=retry_if_exception(is_transient),
        before_sleep=before_sleep,
        reraise=True,
    )

    async def attempt() -> T:
        return await call()

    try:
        return await retrying(attempt)
    except Exception as exc:
        raise RetriesExhausted(exc, retrying.statistics.get("attempt_number", 1)) from exc
