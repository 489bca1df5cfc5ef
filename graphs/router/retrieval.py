"""The router's retrieval route: one retrieve-only worker per `Send` (`retrieve`), then one merge
(`merge_evidence`). graph.py fans out (`route_after_select`, one batch id per question from
`new_batch`) and wires the nodes.

Progress: each worker's `progress` event says how many workers of its batch have finished so
far. The workers of one fan-out run in one superstep, and LangGraph applies their state writes
only when the superstep ends, so this running count cannot come from graph state: it is kept in
`_PROGRESS`, a bounded, process-local count per batch (see `BatchProgress`). What the turn
returns (`worker_runs`, `execution_log`) is graph state as before.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from graphs.router.context import RouterContext
from graphs.router.evidence import merge_runs
from graphs.router.state import State
from graphs.router.workers import get_worker
from graphs.runtime.events import emit
from store import knowledge
from store.lru import LRU
from tools.identity import run_kb_reader


class BatchProgress:
    """How many workers of each fan-out batch have finished, for the live `progress` events.

    A bounded LRU cache (store/lru.py): at most `limit` batches, the least recently counted
    forgotten first. A batch lives from its fan-out to its merge (`merge_evidence` forgets it);
    one forgotten early (more than `limit` questions in flight in one process) only makes its
    count restart at 1."""

    def __init__(self, limit: int = 1024) -> None:
        self._done: LRU[str, int] = LRU(limit)

    def start(self, batch: str) -> None:
        self._done.put(batch, 0)

    def finished(self, batch: str) -> int:
        """Count one more finished worker of `batch`; return the count."""
        return self._done.put(batch, (self._done.get(batch) or 0) + 1)

    def forget(self, batch: str) -> None:
        self._done.pop(batch)


_PROGRESS = BatchProgress()


def new_batch() -> str:
    """A fresh batch id for one question's fan-out, its progress count started at 0."""
    batch = uuid.uuid4().hex
    _PROGRESS.start(batch)
    return batch


class WorkerTask(TypedDict):
    """One retrieve-only run (a `Send` payload)."""

    agent_type: str
    worker_name: str
    kb: str
    query: str
    total: int
    batch: str


async def retrieve(task: WorkerTask, runtime: Runtime[RouterContext], config: RunnableConfig) -> dict:
    """Run one retrieve-only worker; a failure is reported and recorded, never raised."""
    started = time.time()
    thread_id = (config.get("configurable") or {}).get("thread_id")
    run: dict[str, Any] = {
        "worker_name": task["worker_name"],
        "agent_type": task["agent_type"],
        "kb": task["kb"],
        "batch": task["batch"],
    }
    try:
        if runtime.store is None:
            raise RuntimeError("retrieval needs a store; this graph runs without one")
        worker = get_worker(task["worker_name"])
        # The decision checked the knowledge base; a client-sent `Send` to this node did not.
        await knowledge.get_kb(runtime.store, worker.kb_prefix, reader=run_kb_reader(runtime))
        result = await worker.retrieve_with_trace(
            runtime.store, task["query"], thread_id=thread_id, top_k=runtime.context.retrieval_top_k
        )
        run.update(status="success", retrieval_results=result["retrieval_results"], error=None)
        if any(item.get("path") for item in result["retrieval_results"]):  # how the graph reached each passage
            emit(
                "evidence",
                worker_name=task["worker_name"],
                agent_type=task["agent_type"],
                paths=[
                    {"id": item["id"], "title": item.get("title"), "source": item["source"], "path": item["path"]}
                    for item in result["retrieval_results"]
                ],
            )
    except Exception as exc:
        error = str(exc) or type(exc).__name__
        run.update(status="error", retrieval_results=[], error=error)
        emit(
            "worker_failed",
            worker_name=task["worker_name"],
            agent_type=task["agent_type"],
            error=error,
            error_type=type(exc).__name__,
        )
    finished = time.time()
    count = len(run["retrieval_results"])
    emit(
        "progress",
        stage="retrieval",
        completed=_PROGRESS.finished(task["batch"]),
        total=task["total"],
        agent_type=task["agent_type"],
        retrieval_count=count,
        error=run["error"],
    )
    entry = {
        "node": "retrieve",
        "worker_name": task["worker_name"],
        "agent_type": task["agent_type"],
        "status": run["status"],
        "retrieval_count": count,
        "started_at": round(started, 6),
        "finished_at": round(finished, 6),
        "duration_ms": round((finished - started) * 1000, 1),
        "error": run["error"],
    }
    return {"worker_runs": [run], "execution_log": [entry]}


async def merge_evidence(state: State, runtime: Runtime[RouterContext]) -> dict:
    """Deduplicate the workers' passages by chunk id and fuse their rankings (RRF)."""
    runs = state.get("worker_runs", [])
    for run in runs:
        _PROGRESS.forget(run["batch"])
    good = [run for run in runs if run["status"] == "success"]
    return {"sources": merge_runs(good, runtime.context.retrieval_top_k)}
