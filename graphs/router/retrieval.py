"""The router's retrieval route, its `retrieve` node: one compiled subgraph (`graph`), then
`merge_evidence` in the router itself:

    retrieve = [gather --(one Send per worker of the plan)--> rank (x workers)] --> merge_evidence

`gather` opens the knowledge base once (one registry read, with the run user's read check) and
gathers the question's signals once for every strategy of the plan (store/knowledge/handle.py:
one query embedding, one BM25 query, the graph walk only when a graph worker is planned). Each
`Send` carries its worker's preset (name, type, strategy) and the gathered signals as plain data;
`rank` ranks them with the preset, without a store call. `merge_evidence` takes the workers' runs
(`worker_runs`, appended by a reducer in the subgraph), streams one `progress` event per
finished worker, in the order they finished, and merges their passages
(graphs/router/evidence.py). It runs in the router's node, not in the subgraph: a client
streaming the router without `stream_subgraphs` gets these events, as it always has.

A failure is reported and recorded, never raised: a knowledge base that cannot be opened or
searched fails every worker; a graph walk that fails fails the graph and fusion workers only,
and the others answer.
"""

from __future__ import annotations

import operator
import time
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, Send
from typing_extensions import TypedDict

from graphs.router.context import RouterContext
from graphs.router.evidence import merge_runs
from graphs.router.state import State, question_of
from graphs.router.workers import Worker, worker_for
from graphs.runtime.events import emit
from graphs.runtime.subgraphs import without_checkpoints
from store import knowledge
from store.knowledge.handle import GRAPH_STRATEGIES
from tools.identity import run_kb_reader


class RetrievalInput(TypedDict, total=False):
    """What the route reads from the router's state."""

    messages: list[AnyMessage]
    decision: dict[str, Any]
    plan: list[dict]


class RetrievalOutput(TypedDict, total=False):
    """What the subgraph writes back: this question's worker runs and their log entries."""

    worker_runs: list[dict]
    execution_log: list[dict]


class RetrievalState(RetrievalInput, total=False):
    worker_runs: Annotated[list[dict], operator.add]
    """The workers' runs so far (the fan-out's progress)."""
    execution_log: Annotated[list[dict], operator.add]


class WorkerTask(TypedDict):
    """One worker's `Send`: its preset and the signals gathered for it (plain data; None with
    `error` when gathering failed)."""

    worker_name: str
    agent_type: str
    kb: str
    strategy: str
    gathered: dict | None
    error: str | None
    error_type: str | None
    started_at: float


async def gather(state: RetrievalState, runtime: Runtime[RouterContext]) -> Command:
    """Open the knowledge base and gather the question's signals once; one `Send` per worker."""
    started = time.time()
    kb = state["decision"]["kb_prefix"]
    plan = state.get("plan") or []
    workers: list[tuple[dict, Worker | None, str | None]] = []
    for spec in plan:
        try:
            named = worker_for(spec["worker_name"])
            if named.kb_prefix != kb:
                raise ValueError(f"worker {spec['worker_name']!r} is not a worker of knowledge base {kb!r}")
            workers.append((spec, named, None))
        except ValueError as exc:
            workers.append((spec, None, str(exc)))
    strategies = {worker.strategy for _, worker, _ in workers if worker is not None}
    failed: dict[str, BaseException] = {}  # strategy -> why it has no signals
    data = None
    if strategies:
        try:
            if runtime.store is None:
                raise RuntimeError("retrieval needs a store; this graph runs without one")
            handle = await knowledge.open(runtime.store, kb, reader=run_kb_reader(runtime))
            question = question_of(state["messages"])
            top_k = runtime.context.retrieval_top_k
            try:
                found = await handle.gather(question, top_k=top_k, strategies=strategies)
            except Exception as exc:
                if not strategies & GRAPH_STRATEGIES or not strategies - GRAPH_STRATEGIES:
                    raise
                failed.update(dict.fromkeys(strategies & GRAPH_STRATEGIES, exc))  # the others go on without the graph
                found = await handle.gather(question, top_k=top_k, strategies=strategies - GRAPH_STRATEGIES)
            data = found.as_data()
        except Exception as exc:
            failed.update(dict.fromkeys(strategies, exc))
    sends = []
    for spec, worker, invalid in workers:
        error: str | None = None
        error_type: str | None = None
        if invalid is not None:
            error, error_type = invalid, "ValueError"
        elif worker is not None and worker.strategy in failed:
            why = failed[worker.strategy]
            error, error_type = str(why) or type(why).__name__, type(why).__name__
        task: WorkerTask = {
            "worker_name": spec["worker_name"],
            "agent_type": spec["agent_type"],
            "kb": kb,
            "strategy": worker.strategy if worker is not None else "",
            "gathered": None if error else data,
            "error": error,
            "error_type": error_type,
            "started_at": started,
        }
        sends.append(Send("rank", task))
    return Command(goto=sends)


async def rank(task: WorkerTask) -> dict:
    """Run one retrieve-only worker: its preset over the gathered signals."""
    run: dict[str, Any] = {
        "worker_name": task["worker_name"],
        "agent_type": task["agent_type"],
        "kb": task["kb"],
        "strategy": task["strategy"],
    }
    error, error_type = task["error"], task["error_type"]
    results: list[dict] = []
    if error is None:
        try:
            if task["gathered"] is None:
                raise RuntimeError(f"no signals were gathered for worker {task['worker_name']!r}")
            found = knowledge.rank(knowledge.Gathered.from_data(task["gathered"]), task["strategy"])
            results = found["retrieval_results"]
        except Exception as exc:
            error, error_type = str(exc) or type(exc).__name__, type(exc).__name__
    finished = time.time()
    run.update(
        status="error" if error else "success",
        retrieval_results=results,
        error=error,
        error_type=error_type,
        finished_at=round(finished, 6),
    )
    entry = {
        "node": "retrieve",
        "worker_name": task["worker_name"],
        "agent_type": task["agent_type"],
        "status": run["status"],
        "retrieval_count": len(results),
        "started_at": round(task["started_at"], 6),
        "finished_at": round(finished, 6),
        "duration_ms": round((finished - task["started_at"]) * 1000, 1),
        "error": error,
    }
    return {"worker_runs": [run], "execution_log": [entry]}


def merge_evidence(runs: list[dict], top_k: int) -> list[dict]:
    """Stream each worker's `progress` (in the order they finished) and its evidence paths or
    failure, then merge the passages of the workers that succeeded. `runs` are in the plan's order."""
    for completed, run in enumerate(sorted(runs, key=lambda run: run.get("finished_at") or 0.0), 1):
        results = run["retrieval_results"]
        if run["status"] == "error":
            emit(
                "worker_failed",
                worker_name=run["worker_name"],
                agent_type=run["agent_type"],
                error=run["error"],
                error_type=run["error_type"],
            )
        elif any(item.get("path") for item in results):  # how the graph reached each passage
            emit(
                "evidence",
                worker_name=run["worker_name"],
                agent_type=run["agent_type"],
                paths=[
                    {"id": item["id"], "title": item.get("title"), "source": item["source"], "path": item["path"]}
                    for item in results
                ],
            )
        emit(
            "progress",
            stage="retrieval",
            completed=completed,
            total=len(runs),
            agent_type=run["agent_type"],
            retrieval_count=len(results),
            error=run["error"],
        )
    return merge_runs([run for run in runs if run["status"] == "success"], top_k)


async def retrieve(state: State, runtime: Runtime[RouterContext], config: RunnableConfig) -> dict:
    """The router's `retrieve` node: the subgraph (`graph`), then `merge_evidence` here in the
    router, whose events reach every client (see the module's docstring)."""
    task: RetrievalInput = {
        "messages": state["messages"],
        "decision": state["decision"],
        "plan": state.get("plan") or [],
    }
    found = await graph.ainvoke(task, without_checkpoints(config), context=runtime.context)
    runs = found.get("worker_runs") or []
    return {
        "worker_runs": runs,
        "execution_log": found.get("execution_log") or [],
        "sources": merge_evidence(runs, runtime.context.retrieval_top_k),
    }


builder = StateGraph(
    RetrievalState, input_schema=RetrievalInput, output_schema=RetrievalOutput, context_schema=RouterContext
)
builder.add_node("gather", gather, destinations=("rank",))  # type: ignore[call-overload, arg-type]
builder.add_node("rank", rank)  # type: ignore[call-overload, arg-type]
builder.add_edge(START, "gather")
# No checkpoints of its own: the subgraph runs within one step of the router, whose checkpoint
# keeps what it returns (the worker runs). The gathered signals (some 30 KB a question, in every `Send`)
# are never written, and a run resumed after a crash runs the whole step again.
graph = builder.compile(name="retrieval", checkpointer=False)
