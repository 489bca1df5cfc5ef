"""Per-user run quotas, checked when a run is created (server/api_checks.py calls `check_run_quota`).

Two limits, each off at 0 (the default): `RUN_QUOTA_RUNS` runs created per `RUN_QUOTA_WINDOW`
seconds (counted in Postgres like the web quota, tools/quota.py `charge_runs`, so every server
process counts the same runs; a refused request is not counted), and `RUN_QUOTA_CONCURRENT` runs
pending or running at once, read from the server's own run records of the user's threads (threads
are stamped with their owner, server/auth.py; the memory extraction runs the server schedules after
each turn are not the user's and do not count). Over either limit the request is answered 429
QUOTA_EXCEEDED with `Retry-After` before the server creates anything: the thread is not touched.

Only regular users are limited (tools/quota.py `limited_user`): administrators, Studio's user, an
open `langgraph dev` and the server's own in-process calls (memory extraction runs) are not. Each
user's runs count against that user only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from langgraph_sdk import Auth

from graphs.runtime.memory_schedule import MEMORY_WRITER_GRAPH
from server import kb as kb_service
from server import web
from server.auth import authenticate
from server.errors import ApiError
from server.route_auth import RouteUser
from settings import settings
from tools.quota import QuotaExceeded, charge_runs, limited_user
from tools.server_api import server_client

ACTIVE = ("pending", "running")
CONCURRENT_RETRY_AFTER_S = 5
"""What a client refused for too many runs at once is told to wait: runs end at their own pace."""


async def active_runs(user_id: str, limit: int) -> int:
    """How many runs of `user_id`'s threads are pending or running (counted up to `limit` + 1);
    the memory extraction runs the server schedules after a turn (their threads' graph is
    `memory_writer`) are the server's work, not the user's."""
    client = server_client(act_as=user_id)
    found = await client.threads.search(metadata={"owner": user_id}, status="busy", limit=limit + 20)
    threads = [t for t in found if (t.get("metadata") or {}).get("graph_id") != MEMORY_WRITER_GRAPH][: limit + 1]
    counts = await asyncio.gather(
        *(
            client.runs.list(thread["thread_id"], status=status, limit=limit + 1)
            for thread in threads
            for status in ACTIVE
        )
    )
    return sum(len(runs) for runs in counts)


async def check_run_quota(headers: Mapping[str, str], runs: int) -> None:
    """ApiError 429 when the caller of a request creating `runs` runs is over a run quota."""
    config = settings()
    concurrent = config.RUN_QUOTA_CONCURRENT
    if runs <= 0 or (config.RUN_QUOTA_RUNS == 0 and concurrent == 0):
        return
    try:
        user: Any = RouteUser(await authenticate(dict(headers)))
    except Auth.exceptions.HTTPException:
        return  # the server refuses the request itself
    user_id = limited_user(user)
    if user_id is None:
        return
    if concurrent and (active := await active_runs(user_id, concurrent)) + runs > concurrent:
        raise ApiError(
            "QUOTA_EXCEEDED",
            f"Too many runs at once: at most {concurrent} pending or running runs for this user, and "
            f"{active} are. Wait for one to finish (or cancel one) and try again.",
            {"kind": "concurrent_runs", "limit": concurrent, "active": active, "retry_after": CONCURRENT_RETRY_AFTER_S},
        )
    try:
        await charge_runs(await kb_service.server_store(), user, runs)
    except QuotaExceeded as exc:
        raise web.quota_error(exc) from None
