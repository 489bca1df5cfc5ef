"""Ingests over HTTP: off the server's event loop, bounded per user and overall, metered by work.

An ingest request (server/kb.py) first takes a slot: a user has at most `KB_INGEST_PER_USER`
ingests running or waiting (administrators are not limited), the server at most
`KB_INGEST_WORKERS` running and `KB_INGEST_QUEUE` waiting; beyond, `IngestBusy` (429
INGEST_BUSY). `ingest` then parses, chunks, embeds and extracts the documents:

- on the project's Postgres store (langgraph.json), in one of `KB_INGEST_WORKERS` worker
  processes at CPU niceness `KB_INGEST_NICE` with `KB_INGEST_THREADS` math threads, on their own
  connection to the same database, so the work never holds the server's event loop or its GIL
  and takes only the CPU that runs leave;
- on any other store (the platform's, Aegra's, in-process tests) or with `KB_INGEST_WORKERS=0`,
  in the server process, still one at a time (its CPU-bound parts in threads).

The work is metered where it is known: after the documents are chunked and before anything is
written, the chunks to embed are taken from the user's `KB_INGEST_QUOTA_CHUNKS`
(tools/quota.py `charge_chunks`), so a request over it writes nothing. A slot is held until its
work ends, even when the client has gone away. `in_progress` lists the ingests a caller may see.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import os
import resource
import threading
import weakref
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from settings import settings
from tools.identity import acts_for_any_user
from tools.quota import QuotaExceeded, charge_chunks, limited_user

BUSY_RETRY_AFTER_S = 10
# Environment variables that size the math libraries' thread pools in a worker process.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


class IngestBusy(Exception):
    """The user (scope "user") or the server (scope "server") has as many ingests as allowed."""

    def __init__(self, message: str, scope: str, retry_after: int = BUSY_RETRY_AFTER_S) -> None:
        super().__init__(message)
        self.scope = scope
        self.retry_after = retry_after


class IngestFailed(RuntimeError):
    """The ingest worker process stopped before it finished (nothing is known about the writes)."""


@dataclass(frozen=True)
class IngestJob:
    """One ingest request's documents, `(bytes, source, format)` each, and whose work quota pays."""

    kb: str
    files: tuple[tuple[bytes, str, str], ...]
    date: str | None
    user_id: str | None


@dataclass
class Slot:
    """An ingest request holding its place until the request and its work have ended."""

    id: str
    user: str | None
    kb: str
    sources: list[str]
    started_at: str
    work: set[Future] = field(default_factory=set)
    running: bool = False
    request_done: bool = False

    def view(self) -> dict:
        """What `GET /api/v1/ingests` shows of it."""
        state = "running" if self.running or any(f.running() for f in self.work) else "waiting"
        return {"id": self.id, "kb": self.kb, "sources": self.sources, "state": state, "started_at": self.started_at}


class IngestRunner:
    """The slots of this server process and its worker processes (created on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, Slot] = {}
        self._ids = itertools.count(1)
        self._pool: ProcessPoolExecutor | None = None
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    # --- slots ------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def slot(self, user: Any, kb: str, sources: Sequence[str]) -> AsyncIterator[Slot]:
        """A place for one ingest request of `user`, or IngestBusy; released when the request
        and every piece of work it started have ended."""
        config = settings()
        who = None if user is None else str(getattr(user, "identity", None) or "") or None
        limited = user is not None and not acts_for_any_user(user)
        with self._lock:
            mine = [s for s in self._slots.values() if s.user == who] if limited else []
            if len(mine) >= config.KB_INGEST_PER_USER:
                raise IngestBusy(
                    f"You already have {len(mine)} ingest(s) in progress (at most {config.KB_INGEST_PER_USER} at "
                    f"once): wait for it to finish (GET /api/v1/ingests lists them), then send this one.",
                    "user",
                )
            capacity = max(1, config.KB_INGEST_WORKERS) + config.KB_INGEST_QUEUE
            if len(self._slots) >= capacity:
                raise IngestBusy(
                    f"The server is busy with {len(self._slots)} ingests; try again in a few seconds.", "server"
                )
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            slot = Slot(f"ingest-{os.getpid()}-{next(self._ids)}", who, kb, list(sources), stamp)
            self._slots[slot.id] = slot
        try:
            yield slot
        finally:
            with self._lock:
                slot.request_done = True
                self._release_if_done(slot)

    def _release_if_done(self, slot: Slot) -> None:
        """Forget `slot` once its request and work have ended (call with the lock held)."""
        if slot.request_done and not slot.work:
            self._slots.pop(slot.id, None)

    def _work_ended(self, slot: Slot, future: Future) -> None:
        with self._lock:
            slot.work.discard(future)
            self._release_if_done(slot)

    def in_progress(self, user: Any) -> list[dict]:
        """The ingests `user` may see: their own; every one for administrators (with `user`)."""
        everyone = user is None or acts_for_any_user(user)
        who = None if user is None else str(getattr(user, "identity", None) or "") or None
        with self._lock:
            slots = list(self._slots.values())
        return [{**s.view(), **({"user": s.user} if everyone else {})} for s in slots if everyone or s.user == who]

    # --- work -------------------------------------------------------------------------------------

    async def ingest(
        self,
        store: Any,
        slot: Slot | None,
        kb: str,
        files: Sequence[tuple[bytes, str, str]],
        *,
        date: str | None = None,
        user: Any = None,
    ) -> dict:
        """Ingest `files` into `kb` (store/knowledge/ingest.py `ingest_files`), the chunks taken
        from `user`'s work quota before anything is written: in a worker process when `slot` is
        given and the store is the project's Postgres store, else here. Returns {"documents",
        "work": {"chunks", "entities", "cpu_seconds"}}."""
        job = IngestJob(kb, tuple(files), date, limited_user(user))
        await charge_chunks(store, job.user_id, 0)  # none left: refused before any parsing
        if slot is None or not _worker_can_open(store):
            return await self._ingest_here(store, slot, job)
        # Starting a worker and handing it the job write to pipes: not on the event loop.
        future = await asyncio.to_thread(self._submit, job, slot)
        try:
            outcome = await asyncio.wrap_future(future)
        except BrokenProcessPool:
            await asyncio.to_thread(self._reset_pool)
            raise IngestFailed("The ingest worker stopped before it finished; send the documents again.") from None
        return _unwrap(outcome)

    async def _ingest_here(self, store: Any, slot: Slot | None, job: IngestJob) -> dict:
        loop = asyncio.get_running_loop()
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = asyncio.Semaphore(max(1, settings().KB_INGEST_WORKERS))
        async with turn:
            if slot is not None:
                slot.running = True
            started = _cpu_seconds()
            result = await run_job(store, job)
            result["work"]["cpu_seconds"] = round(_cpu_seconds() - started, 3)
            return result

    def _submit(self, job: IngestJob, slot: Slot) -> Future:
        """Hand `job` to a worker (started if needed); `slot` is held until the job ends."""
        with self._lock:
            if self._pool is None:
                config = settings()
                self._pool = ProcessPoolExecutor(
                    max_workers=config.KB_INGEST_WORKERS,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(config.KB_INGEST_THREADS, config.KB_INGEST_NICE),
                )
            pool = self._pool
            future = pool.submit(_run_in_worker, job)
            slot.work.add(future)
        future.add_done_callback(lambda done: self._work_ended(slot, done))
        return future

    def _reset_pool(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    async def close(self) -> None:
        """Stop the worker processes (the server is stopping; running work is abandoned)."""
        await asyncio.to_thread(self._reset_pool)


def _worker_can_open(store: Any) -> bool:
    """Whether a worker process can open the same store: the project's Postgres store, whose
    database and schema come from the environment the worker inherits."""
    from store.backend import SQLBackend

    # `PostgresStore` carries a SQLBackend (the server loads store/postgres.py under another
    # module name, so its class is not this package's `store.postgres.PostgresStore`).
    return isinstance(getattr(store, "backend", None), SQLBackend) and settings().KB_INGEST_WORKERS > 0


def _cpu_seconds() -> float:
    """CPU time of this process so far, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run_job(store: Any, job: IngestJob) -> dict:
    """Ingest `job` on `store`, its chunks charged to its user before anything is written."""
    from store.knowledge.ingest import ingest_files

    async def charge(chunks: int) -> None:
        await charge_chunks(store, job.user_id, chunks)

    return await ingest_files(store, job.kb, job.files, date=job.date, before_write=charge)


# --- inside a worker process ------------------------------------------------------------------------


def _start_worker(threads: int, nice: int) -> None:
    """A worker process's start: math libraries on `threads` threads, CPU niceness `nice`."""
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))  # for libraries loaded later
    if nice:
        os.nice(nice)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)  # for a library the process had loaded already


async def _run_on_own_store(job: IngestJob) -> dict:
    from store.knowledge.config import knowledge_config
    from store.postgres import PostgresStore, open_pool, store_index_config

    async with open_pool(max_size=2) as pool:
        store = PostgresStore(pool, knowledge_config().text_search_config, index=store_index_config())
        return await run_job(store, job)


def _run_in_worker(job: IngestJob) -> dict:
    """Run `job` in this worker process; errors come back as data (exceptions with their own
    constructors do not survive pickling)."""
    from store.knowledge.registry import KBUnknownError

    started = _cpu_seconds()
    try:
        result = asyncio.run(_run_on_own_store(job))
    except QuotaExceeded as exc:
        return {"error": "quota", "args": [exc.kind, exc.limit, exc.window, exc.retry_after, str(exc)]}
    except KBUnknownError as exc:
        return {"error": "kb_unknown", "args": [exc.name, exc.existing]}
    except ValueError as exc:
        return {"error": "invalid", "args": [str(exc)]}
    result["work"]["cpu_seconds"] = round(_cpu_seconds() - started, 3)
    return result


def _unwrap(outcome: dict) -> dict:
    """A worker's result, or its error raised again here."""
    from store.knowledge.registry import KBUnknownError

    error = outcome.get("error")
    if error == "quota":
        raise QuotaExceeded(*outcome["args"])
    if error == "kb_unknown":
        raise KBUnknownError(*outcome["args"])
    if error == "invalid":
        raise ValueError(*outcome["args"])
    return outcome


# The runner of this server process (a process's slots must be counted in one place).
RUNNER = IngestRunner()
