"""Per-user rate limit of the web tools (`WEB_QUOTA_REQUESTS` per `WEB_QUOTA_WINDOW` seconds),
shared by the tools inside runs and the HTTP routes (server/http.py).

Counters live in Postgres (store/sql.py `charge_quota`, table `web_quota`) when the store is the
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
from store.sql import adapter_for
from tools.errors import ToolError
from tools.identity import acts_for_any_user

KINDS = ("web_search", "web_read")


class QuotaExceeded(ToolError):
    """A user has used up a web quota for the current window."""

    def __init__(self, kind: str, limit: int, window: float, retry_after: float) -> None:
        self.kind = kind
        self.limit = limit
        self.window = window
        self.retry_after = max(1, math.ceil(retry_after))
        super().__init__(
            f"Quota exceeded: at most {limit} {kind} calls per {window:g} seconds for this user. "
            f"Try again in {self.retry_after} seconds."
        )


_local: dict[tuple[str, str], tuple[float, int]] = {}
_local_lock = threading.Lock()


def _charge_locally(user_id: str, kind: str, window: float) -> tuple[int, float]:
    now = time.time()
    start = math.floor(now / window) * window
    with _local_lock:
        previous_start, used = _local.get((user_id, kind), (start, 0))
        used = used + 1 if previous_start == start else 1
        _local[(user_id, kind)] = (start, used)
    return used, start + window - now


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
    user_id = limited_user(user)
    if user_id is None or config.WEB_QUOTA_REQUESTS == 0:
        return
    adapter = adapter_for(store) if store is not None else None
    if adapter is not None:
        used, retry_after = await adapter.charge_quota(user_id, kind, config.WEB_QUOTA_WINDOW)
    else:
        used, retry_after = _charge_locally(user_id, kind, config.WEB_QUOTA_WINDOW)
    if used > config.WEB_QUOTA_REQUESTS:
        raise QuotaExceeded(kind, config.WEB_QUOTA_REQUESTS, config.WEB_QUOTA_WINDOW, retry_after)


async def charge_run(runtime: Any, kind: str) -> None:
    """`charge` for a tool call inside a run: the run's authenticated user and store."""
    if runtime is None:
        return
    server_info = getattr(runtime, "server_info", None)
    user = server_info.user if server_info is not None else None
    await charge(getattr(runtime, "store", None), user, kind)
