"""Durable records on the development server (`langgraph dev`'s in-memory runtime).

`langgraph dev` keeps threads, runs and assistants in memory and writes them to `.langgraph_api/`
from a background thread every 10 seconds, so `kill -9` loses what was written in the last ten
seconds: a thread's metadata `PATCH`, a new run, and the attempt count of a run just started. A
run that crashes the server within ten seconds would then start afresh at every restart and
keep the server down. This module, the one place that reaches into `langgraph_runtime_inmem`,
makes both durable when they happen:

- `DurableWritesMiddleware`: a successful write to `/threads`, `/assistants` or `/runs` (create,
  update, delete; not searches) is on disk before its response starts.
- `durable_attempts()`: a run's attempt count is read back at start and is on disk before the
  run executes, so a run in flight when the server died is retried at most
  `BG_JOB_MAX_RETRIES - 1` times and then ends with an error naming the reason (`scripts/serve`
  sets 2: one retry). The runtime alone never reads the counts back: such a run started afresh
  at every restart.

Both do nothing where the in-memory runtime is not in use (the production server, Aegra, keeps
these records in Postgres). tests/unit/test_dev_persistence.py fails when the runtime's
attributes used here change.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import sys
import threading
from typing import Any

logger = logging.getLogger(__name__)

RUNTIME = "langgraph_runtime_inmem.database"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RECORD_PATH = re.compile(r"^/(threads|assistants|runs)(/|$)")
READ_PATH = re.compile(r"/(search|count|history)/?$")
_LOCK = threading.Lock()  # one writer of a file at a time: these syncs and the runtime's own thread


def _runtime() -> Any | None:
    """The in-memory runtime's database module when this server runs on it (imported by
    `langgraph dev` before the app), else None."""
    return sys.modules.get(RUNTIME)


def runs_in_this_process() -> bool:
    """Whether runs execute in the process that received their request: `langgraph dev`'s
    in-memory runtime (other servers may hand a run to another replica or worker)."""
    return _runtime() is not None


def _locked(store: Any) -> None:
    """Route the runtime's periodic flush of `store` through the same lock (once)."""
    if getattr(store, "_durable", False):
        return
    unlocked = store.sync

    def sync() -> None:
        # The runtime's flush thread ends at its first exception: a record changed while it was
        # written is logged and written at the next flush instead.
        try:
            with _LOCK:
                unlocked()
        except Exception:
            logger.warning("Could not write the development server's records to disk", exc_info=True)

    store.sync = sync
    store._durable = True
    store._unlocked_sync = unlocked


async def _write(store: Any) -> None:
    """Write `store` to disk off the event loop (the runtime's own flush does the same)."""
    unlocked = getattr(store, "_unlocked_sync", store.sync)
    try:
        await asyncio.to_thread(_sync_with, unlocked)
    except Exception:  # a record changed while written: the periodic flush writes it next
        logger.warning("Could not write the development server's records to disk", exc_info=True)


def _sync_with(sync: Any) -> None:
    with _LOCK:
        sync()


def durable_attempts() -> bool:
    """Make each run's attempt count durable before the run executes (and route every write of
    the records through one lock). False where the in-memory runtime is not in use."""
    database = _runtime()
    if database is None:
        return False
    # Every later write of the records, the runtime's periodic one included, takes the same lock
    # (set up before the first request, so the two never write one file at once).
    _locked(database.GLOBAL_STORE)
    counter = database.GLOBAL_RETRY_COUNTER
    if getattr(counter, "_durable", False):
        return True
    counters = counter._counters
    _locked(counters)
    # The runtime writes the counts but never reads them back: without this every restart
    # would make an interrupted run's next attempt its first again.
    if not counters and os.path.exists(counters.filename):
        try:
            counters.load()
        except Exception:  # unreadable: counting starts again, as the runtime would
            logger.warning("Could not read the run attempt counts of the last start", exc_info=True)
    increment = counter.increment

    @functools.wraps(increment)
    async def durable_increment(run_id: Any) -> int:
        attempt = await increment(run_id)
        await _write(counters)
        return attempt

    counter.increment = durable_increment
    counter._durable = True
    return True


def is_record_write(method: str, path: str) -> bool:
    """Whether a request writes a thread, run or assistant record (not a search, count or history read)."""
    return method in WRITE_METHODS and bool(RECORD_PATH.match(path)) and not READ_PATH.search(path)


class DurableWritesMiddleware:
    """On the in-memory runtime: a successful write of a thread, run or assistant record is on
    disk before its response starts (a streamed run's response starts once the run is created)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        database = _runtime()
        if database is None or scope["type"] != "http" or not is_record_write(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        store = database.GLOBAL_STORE
        _locked(store)

        async def durable_send(message: dict) -> None:
            if message["type"] == "http.response.start" and 200 <= message["status"] < 300:
                await _write(store)
            await send(message)

        await self.app(scope, receive, durable_send)
