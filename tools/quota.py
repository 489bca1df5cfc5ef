"""Per-user rate limits: the web tools (`WEB_QUOTA_REQUESTS` per `WEB_QUOTA_WINDOW` seconds),
shared by the tools inside runs and the HTTP routes (server/http.py), which also count the URLs a
knowledge-base ingest fetches as web reads; the model utility routes (`UTILITY_QUOTA_REQUESTS` per
`UTILITY_QUOTA_WINDOW`); and the bytes of documents a user may ingest (`KB_INGEST_QUOTA_BYTES`
per `KB_INGEST_QUOTA_WINDOW`, `charge_bytes`) and the chunks an ingest embeds, its work
(`KB_INGEST_QUOTA_CHUNKS` per the same window, `charge_chunks`); and the runs a user creates
(`RUN_QUOTA_RUNS` per `RUN_QUOTA_WINDOW`, `charge_runs`, server/run_quota.py): a request that does
not fit is refused and not counted.

Counters live in Postgres (store/sql/quotas.py `charge_quota`, table `web_quota`) when the store is the
project's Postgres store, so every server process counts the same uses; on any other store (the
LangGraph Platform's own store, in-process tests) they are kept in this process only. Windows are
fixed and aligned on the clock. Administrators, Studio's user and calls without an
authenticated user are not limited.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from settings import settings
from store.backend import backend_for
from tools.errors import ToolError
from tools.identity import acts_for_any_user

KINDS = ("web_search", "web_read", "utility")
INGEST_BYTES = "ingest_bytes"
INGEST_CHUNKS = "ingest_chunks"
RUNS = "runs"


class QuotaExceeded(ToolError):
    """A user has used up a web quota for the current window."""

    def __init__(self, kind: str, limit: int, window: float, retry_after: float, message: str | None = None) -> None:
        self.kind = kind
        self.limit = limit
        self.window = window
        self.retry_after = max(1, math.ceil(retry_after))
        super().__init__(
            message
            or f"Quota exceeded: at most {limit} {kind} calls per {window:g} seconds for this user."
            f" Try again in {self.retry_after} seconds."
        )


_local: dict[tuple[str, str], tuple[float, int]] = {}
_local_lock = threading.Lock()


def _charge_locally(
    user_id: str, kind: str, window: float, amount: int = 1, limit: int | None = None
) -> tuple[bool, int, float]:
    """(granted, uses in this window after the call, seconds left); with `limit`, an amount
    that does not fit is not granted and not counted."""
    now = time.time()
    start = math.floor(now / window) * window
    with _local_lock:
        previous_start, used = _local.get((user_id, kind), (start, 0))
        used = used if previous_start == start else 0
        granted = limit is None or used + amount <= limit
        if granted:
            used += amount
        _local[(user_id, kind)] = (start, used)
    return granted, used, start + window - now


def limited_user(user: Any) -> str | None:
    """The id whose quota a caller uses; None for callers that are not limited."""
    if user is None or not getattr(user, "identity", None) or acts_for_any_user(user):
        return None
    return str(user.identity)


async def charge(store: Any, user: Any, kind: str) -> None:
    """Count one `kind` call by `user`; QuotaExceeded when it is over the quota."""
    if kind not in KINDS:
        raise ValueError(f"unknown quota kind {kind!r}")
    config = settings()
    if kind == "utility":
        limit, window = config.UTILITY_QUOTA_REQUESTS, config.UTILITY_QUOTA_WINDOW
    else:
        limit, window = config.WEB_QUOTA_REQUESTS, config.WEB_QUOTA_WINDOW
    user_id = limited_user(user)
    if user_id is None or limit == 0:
        return
    sql = backend_for(store).sql if store is not None else None
    if sql is not None:
        used, retry_after = await sql.charge_quota(user_id, kind, window)
    else:
        _granted, used, retry_after = _charge_locally(user_id, kind, window)
    if used > limit:
        raise QuotaExceeded(kind, limit, window, retry_after)


async def _charge_budget(
    store: Any, user_id: str, kind: str, amount: int, limit: int, window: float
) -> tuple[bool, int, float]:
    """Take `amount` of `kind` from `user_id`'s budget if it fits: (granted, used, seconds left)."""
    sql = backend_for(store).sql if store is not None else None
    if sql is not None:
        return await sql.charge_budget(user_id, kind, window, amount, limit)
    return _charge_locally(user_id, kind, window, amount, limit)


async def charge_bytes(store: Any, user: Any, amount: int) -> None:
    """Take `amount` bytes from `user`'s ingest budget; QuotaExceeded (not counted) when they do
    not fit in what is left of the current window."""
    config = settings()
    limit, window = config.KB_INGEST_QUOTA_BYTES, config.KB_INGEST_QUOTA_WINDOW
    user_id = limited_user(user)
    if user_id is None or limit == 0:
        return
    granted, used, retry_after = await _charge_budget(store, user_id, INGEST_BYTES, amount, limit, window)
    if not granted:
        left = max(0, limit - used)
        budget = f"at most {limit:,} bytes of documents per {window:g} seconds for this user"
        if amount > limit:
            message = f"Ingest quota: {budget}, and this document has {amount:,} bytes; split it or ingest it as an administrator."
        else:
            message = (
                f"Ingest quota exceeded: {budget}; {left:,} left in this window and this document has "
                f"{amount:,}. Try again in {max(1, math.ceil(retry_after))} seconds."
            )
        raise QuotaExceeded(INGEST_BYTES, limit, window, retry_after, message)


async def charge_chunks(store: Any, user_id: str | None, amount: int) -> None:
    """Take `amount` chunks (the work of an ingest: each is embedded and its entities extracted)
    from the budget of the limited user `user_id` (`limited_user`; None: not limited);
    QuotaExceeded (not counted) when they do not fit. `amount` 0 checks that some are left."""
    config = settings()
    limit, window = config.KB_INGEST_QUOTA_CHUNKS, config.KB_INGEST_QUOTA_WINDOW
    if user_id is None or limit == 0:
        return
    granted, used, retry_after = await _charge_budget(store, user_id, INGEST_CHUNKS, amount, limit, window)
    if granted and (amount > 0 or used < limit):
        return
    budget = f"at most {limit:,} chunks of documents embedded per {window:g} seconds for this user"
    wait = f"Try again in {max(1, math.ceil(retry_after))} seconds."
    if amount > limit:
        message = f"Ingest work quota: {budget}, and these documents make {amount:,} chunks; split them or ingest them as an administrator."
    elif amount == 0:
        message = f"Ingest work quota exceeded: {budget}, and none are left in this window. {wait}"
    else:
        message = (
            f"Ingest work quota exceeded: {budget}; {max(0, limit - used):,} left in this window and these "
            f"documents make {amount:,}. {wait}"
        )
    raise QuotaExceeded(INGEST_CHUNKS, limit, window, retry_after, message)


async def charge_runs(store: Any, user: Any, amount: int = 1) -> None:
    """Take `amount` runs created by `user` from their run budget (`RUN_QUOTA_RUNS` per
    `RUN_QUOTA_WINDOW`); QuotaExceeded (not counted) when they do not fit."""
    config = settings()
    limit, window = config.RUN_QUOTA_RUNS, config.RUN_QUOTA_WINDOW
    user_id = limited_user(user)
    if user_id is None or limit == 0:
        return
    granted, _used, retry_after = await _charge_budget(store, user_id, RUNS, amount, limit, window)
    if not granted:
        raise QuotaExceeded(
            RUNS,
            limit,
            window,
            retry_after,
            f"Run quota exceeded: at most {limit} runs per {window:g} seconds for this user. "
            f"Try again in {max(1, math.ceil(retry_after))} seconds.",
        )


async def charge_run(runtime: Any, kind: str) -> None:
    """`charge` for a tool call inside a run: the run's authenticated user and store."""
    if runtime is None:
        return
    server_info = getattr(runtime, "server_info", None)
    user = server_info.user if server_info is not None else None
    await charge(getattr(runtime, "store", None), user, kind)
