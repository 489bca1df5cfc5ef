"""Runs that survive a Postgres crash or restart on Aegra (the production stack).

A run whose database goes away mid-run fails at its next checkpoint, store or table access. A
graph node that fails so is run again by the graph itself once Postgres answers
(graphs/runtime/failures.py); here, a run that fails between nodes (writing a checkpoint) waits
for Postgres to answer again (at most `DATABASE_RECOVERY_WAIT` seconds) and then resumes from its
last checkpoint, in the same worker (store/recovery.py `resume_after_outages`): the steps it had
completed are not run again, so the thread gets each message once. A run resumes at most
`DATABASE_RECOVERY_RETRIES` times; past either bound it fails with `DatabaseUnavailable`.

`install_aegra_recovery` puts that around Aegra's graph execution, and makes Aegra's own writes of
the run's status (`start_run`, `finalize_run`: conditional updates, safe to repeat) wait for
Postgres the same way. Before resuming, the run renews its lease only if it still holds it
(Aegra's lease reaper may have handed it to another replica when the outage outlasted the lease):
otherwise it stops as on a lost lease, and the other replica resumes it. Every reach into Aegra's
internals is in this module and checked by `check_aegra_hooks` when a replica starts
(`ServerLibraryChanged`, naming the aegra-api version, when they moved).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from settings import settings
from store.recovery import resume_after_outages

logger = logging.getLogger(__name__)

T = TypeVar("T")

_INSTALLED = "__agent_engine_run_recovery__"


class ServerLibraryChanged(RuntimeError):
    """The installed aegra-api no longer has what this module wraps: upgrade this module first."""


_RUN_EXECUTOR = "aegra_api.services.run_executor"
_WORKER_EXECUTOR = "aegra_api.services.worker_executor"
_ORM = "aegra_api.core.orm"
_RUN_COLUMNS = ("run_id", "status", "claimed_by", "lease_expires_at", "updated_at")


def _aegra_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aegra-api")
    except PackageNotFoundError:
        return "unknown"


def check_aegra_hooks() -> list[str]:
    """What this module needs of Aegra and did not find (empty: all there)."""
    missing: list[str] = []
    try:
        executor = importlib.import_module(_RUN_EXECUTOR)
        worker = importlib.import_module(_WORKER_EXECUTOR)
        orm = importlib.import_module(_ORM)
    except ImportError as exc:
        return [f"module {exc.name}"]
    for name, params in (("_stream_graph", ["job"]), ("start_run", ["run_id", "user_id"])):
        fn = getattr(executor, name, None)
        if not inspect.iscoroutinefunction(fn) or list(inspect.signature(fn).parameters) != params:
            missing.append(f"{_RUN_EXECUTOR}.{name}({', '.join(params)})")
    finalize = getattr(executor, "finalize_run", None)
    if not inspect.iscoroutinefunction(finalize) or "status" not in inspect.signature(finalize).parameters:
        missing.append(f"{_RUN_EXECUTOR}.finalize_run(..., status, ...)")
    run = getattr(executor, "execute_run", None)
    source = inspect.getsource(run) if run is not None else ""
    for call in ("await _stream_graph(job)", "await start_run(", "await finalize_run(", "_lease_loss_cancellations"):
        if call not in source:
            missing.append(f"{_RUN_EXECUTOR}.execute_run calling {call!r}")
    if not isinstance(getattr(executor, "_lease_loss_cancellations", None), set):
        missing.append(f"{_RUN_EXECUTOR}._lease_loss_cancellations (a set)")
    worker_source = inspect.getsource(worker)
    for piece in ('f"{socket.gethostname()}-{os.getpid()}"', 'f"{self._instance_id}-worker-{idx}"'):
        if piece not in worker_source:
            missing.append(f"{_WORKER_EXECUTOR}: worker names {piece}")
    run_orm = getattr(orm, "Run", None)
    if run_orm is None or any(not hasattr(run_orm, column) for column in _RUN_COLUMNS):
        missing.append(f"{_ORM}.Run with columns {', '.join(_RUN_COLUMNS)}")
    if not callable(getattr(orm, "_get_session_maker", None)):
        missing.append(f"{_ORM}._get_session_maker")
    return missing


def _instance_prefix() -> str:
    """The start of the names Aegra gives this process's workers (`runs.claimed_by`)."""
    import os
    import socket

    return f"{socket.gethostname()}-{os.getpid()}-worker-"


async def _keep_or_give_up(run_id: str) -> None:
    """Before a run resumes: renew its lease if this process still holds it (or it has none:
    Aegra's local executor); otherwise Aegra's reaper gave it to another replica, which resumes
    it, so this execution stops as on a lost lease (no status written)."""
    from datetime import UTC, datetime, timedelta

    from aegra_api.core.orm import Run, _get_session_maker
    from aegra_api.services import run_executor
    from aegra_api.settings import settings as aegra_settings
    from sqlalchemy import case, or_, update

    lease = datetime.now(UTC) + timedelta(seconds=aegra_settings.worker.LEASE_DURATION_SECONDS)
    async with _get_session_maker()() as session:
        result = await session.execute(
            update(Run)
            .where(
                Run.run_id == run_id,
                Run.status == "running",
                or_(Run.claimed_by.is_(None), Run.claimed_by.startswith(_instance_prefix(), autoescape=True)),
            )
            .values(lease_expires_at=case((Run.claimed_by.is_(None), None), else_=lease))
            .returning(Run.run_id)
        )
        kept = result.scalar_one_or_none() is not None
        await session.commit()
    if not kept:
        logger.warning("Run %s was handed to another replica while Postgres was down: it resumes there", run_id)
        run_executor._lease_loss_cancellations.add(run_id)
        raise asyncio.CancelledError(f"run {run_id} resumes on another replica")


def install_aegra_recovery() -> bool:
    """Under Aegra: runs resume after a Postgres outage (this module's docstring). Raises
    `ServerLibraryChanged` when Aegra's internals moved; False when the setting turns it off."""
    if settings().DATABASE_RECOVERY_WAIT <= 0 or settings().DATABASE_RECOVERY_RETRIES <= 0:
        logger.info("Runs do not wait for Postgres (DATABASE_RECOVERY_WAIT or DATABASE_RECOVERY_RETRIES is 0)")
        return False
    if missing := check_aegra_hooks():
        raise ServerLibraryChanged(
            f"aegra-api {_aegra_version()} does not have what server/run_recovery.py wraps to resume runs after a "
            f"Postgres outage: {'; '.join(missing)}. Adapt that module to this version (or set "
            "DATABASE_RECOVERY_WAIT=0 to start without it)."
        )
    executor: Any = importlib.import_module(_RUN_EXECUTOR)
    if getattr(executor, _INSTALLED, False):
        return True
    from aegra_api.settings import settings as aegra_settings

    uri = aegra_settings.db.database_url_sync
    stream_graph = executor._stream_graph

    @functools.wraps(stream_graph)
    async def stream_graph_resuming(job: Any) -> Any:
        run_id = job.identity.run_id
        return await resume_after_outages(
            lambda: stream_graph(job),
            uri=uri,
            before_resume=lambda: _keep_or_give_up(run_id),
            what=f"run {run_id} (it resumes from its last checkpoint)",
        )

    def waiting(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(fn)
        async def call(*args: Any, **kwargs: Any) -> T:
            what = f"{fn.__name__} of run {args[0]}" if args else fn.__name__
            return await resume_after_outages(lambda: fn(*args, **kwargs), uri=uri, what=what)

        return call

    executor._stream_graph = stream_graph_resuming
    executor.start_run = waiting(executor.start_run)
    executor.finalize_run = waiting(executor.finalize_run)
    setattr(executor, _INSTALLED, True)
    logger.info(
        "Runs resume after a Postgres outage: up to %d times, waiting up to %g s for it each time",
        settings().DATABASE_RECOVERY_RETRIES,
        settings().DATABASE_RECOVERY_WAIT,
    )
    return True
