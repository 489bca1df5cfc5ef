"""Run a model's tool calls: concurrently, each with a timeout, bounded retries and events.

Every graph that executes tools uses `run_tool_calls`. LangGraph's `ToolNode` does the
execution (argument validation, `ToolRuntime` injection, concurrent `asyncio.gather`); the
wrapper here adds what clients see: `tool_call_started` / `_retrying` / `_finished` / `_failed`
events tied to each `tool_call_id`, with timings, and an execution-log entry per call. A failing
call becomes a `ToolMessage(status="error")` with a useful text; the agent goes on.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import httpx
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime, ServerInfo

from graphs.runtime.deadline import RunDeadlineExceeded, bounded
from graphs.runtime.events import emit, preview
from graphs.runtime.retry import RetriesExhausted, call_with_retries
from graphs.runtime.ui import deferred_state_writes
from settings import settings
from store.lru import LRU
from tools.errors import ToolInputError, TransientToolError
from tools.identity import check_thread_owner

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    TransientToolError,
    asyncio.TimeoutError,
    TimeoutError,
    httpx.TimeoutException,
    httpx.NetworkError,
)


FIX_AND_RETRY = (
    "Correct the arguments as this message says and call {tool} again now; tell the user about "
    "this error only if it cannot be corrected."
)
"""Added to the error of a call whose arguments were wrong (`ToolInputError`): a small model
otherwise tends to pass the error on to the user ("you need to use the 'semantic' kind") instead
of calling again."""


def _error_text(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not str(exc):
        return f"timed out after {timeout_s:g} s"
    return str(exc) or type(exc).__name__


@dataclass(frozen=True)
class _Batch:
    """What the wrapper of one `run_tool_calls` needs (the ToolNode itself is reused)."""

    step: int
    timeout_s: float
    retries: int
    log: list[dict]
    errors: dict[str, BaseException] | None = None
    """`run_tool` only: each failed call's exception by call id, for its caller to answer."""


_BATCH: ContextVar[_Batch] = ContextVar("tool_batch")
_MAX_NODES = 64
_NODES: LRU[tuple[int, ...], tuple[list[BaseTool], ToolNode]] = LRU(_MAX_NODES)
"""One ToolNode per tool set (by the tools' ids, the tools kept with it): a bounded LRU cache
(store/lru.py) of `_MAX_NODES` tool sets; a forgotten one is built again when next used."""


def _node_for(tools: list[BaseTool]) -> ToolNode:
    """One ToolNode per tool set, built once: building it per call cost a third of a turn."""
    key = tuple(id(tool) for tool in tools)
    cached = _NODES.get(key)
    if cached is None:
        # The tools are kept with the node, so their ids stay theirs.
        cached = _NODES.put(key, (list(tools), ToolNode(tools, handle_tool_errors=False, awrap_tool_call=_wrap)))
    return cached[1]


async def _wrap(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]) -> Any:
    """One tool call of the current batch: events, timeout, retries, execution-log entry."""
    batch = _BATCH.get()
    step, timeout_s, retries, log = batch.step, batch.timeout_s, batch.retries, batch.log
    call = request.tool_call
    call_id, name = call["id"], call["name"]
    started = time.perf_counter()
    if (size := len(json.dumps(call["args"], default=str))) > (limit := settings().TOOL_ARGS_MAX_CHARS):
        # bounded before anything else, the event included: a tool never reads what it cannot use
        too_long = ToolInputError(f"the arguments are {size:,} characters long; at most {limit:,} are accepted")
        return _failed(call, step, started, too_long, timeout_s, 0, log)
    emit("tool_call_started", step=step, tool_call_id=call_id, name=name, args=call["args"])
    attempts = [0]

    async def attempt_call() -> Any:
        attempts[0] += 1
        return await asyncio.wait_for(execute(request), timeout_s)

    def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
        emit(
            "tool_call_retrying",
            step=step,
            tool_call_id=call_id,
            name=name,
            attempt=attempt,
            error=_error_text(exc, timeout_s),
            delay_s=round(delay, 3),
        )

    try:
        result = await call_with_retries(
            attempt_call,
            retries=retries,
            on_retry=on_retry,
            is_transient=lambda exc: isinstance(exc, TRANSIENT_ERRORS),
        )
    except RetriesExhausted as failed:  # any tool failure goes back to the model
        return _failed(call, step, started, failed.error, timeout_s, failed.attempts, log)
    attempt = attempts[0]
    duration_ms = round((time.perf_counter() - started) * 1000, 1)
    content = result.content if isinstance(result, ToolMessage) else result
    status = getattr(result, "status", "success")
    if status == "error":
        emit(
            "tool_call_failed",
            step=step,
            tool_call_id=call_id,
            name=name,
            duration_ms=duration_ms,
            error=preview(content),
            error_type="ToolError",
            attempts=attempt,
        )
    else:
        emit(
            "tool_call_finished",
            step=step,
            tool_call_id=call_id,
            name=name,
            duration_ms=duration_ms,
            result_preview=preview(content),
        )
    entry = _log_entry(call, step, status, duration_ms, attempt, preview(content) if status == "error" else None)
    if status != "error":
        entry["result_preview"] = preview(content)
    log.append(entry)
    return result


def _failed(call, step, started, exc, timeout_s, attempts, log) -> ToolMessage:
    duration_ms = round((time.perf_counter() - started) * 1000, 1)
    if (errors := _BATCH.get().errors) is not None:
        errors[call["id"]] = exc
    error = _error_text(exc, timeout_s)
    emit(
        "tool_call_failed",
        step=step,
        tool_call_id=call["id"],
        name=call["name"],
        duration_ms=duration_ms,
        error=error,
        error_type=type(exc).__name__,
        attempts=attempts,
    )
    log.append(_log_entry(call, step, "error", duration_ms, attempts, error))
    content = f"Error calling {call['name']}: {error}"
    if isinstance(exc, ToolInputError):  # the arguments were wrong: the model can fix them
        content += f"\n{FIX_AND_RETRY.format(tool=call['name'])}"
    return ToolMessage(
        content=content,
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
        additional_kwargs={"error_type": type(exc).__name__},
    )


def _log_entry(call, step, status, duration_ms, attempts, error: str | None = None) -> dict:
    finished = datetime.now(UTC)
    entry = {
        "tool_call_id": call["id"],
        "tool": call["name"],
        "args": call["args"],
        "status": status,
        "duration_ms": duration_ms,
        "attempts": attempts,
        "step": step,
        "started_at": (finished - timedelta(milliseconds=duration_ms)).isoformat(timespec="milliseconds"),
        "finished_at": finished.isoformat(timespec="milliseconds"),
    }
    if error is not None:
        entry["error"] = error
    return entry


def _not_run(call: Mapping[str, Any], reason: str) -> ToolMessage:
    return ToolMessage(content=f"Not run: {reason}", tool_call_id=call["id"], name=call["name"], status="error")


async def run_tool_calls(
    state: Mapping[str, Any],
    config: RunnableConfig,
    tools: list[BaseTool],
    *,
    step: int,
    timeout_s: float,
    retries: int,
) -> dict:
    """Execute the tool calls of the last AI message in `state["messages"]`.

    Returns `{"messages": [ToolMessage, ...], "execution_log": [entry, ...]}`, one message per
    call in the order the model made them, every call answered (unknown tools and bad arguments
    included) so no tool call is ever left dangling; plus `"ui"`, the tool cards (graphs/runtime/ui.py)
    for the node's update, when there are any.
    """
    last = state["messages"][-1]
    if not isinstance(last, AIMessage) or not last.tool_calls:
        return {"messages": [], "execution_log": []}
    await check_thread_owner(config)
    try:
        timeout_s = bounded(timeout_s, "tools") or timeout_s  # never past the run's deadline
    except RunDeadlineExceeded as exc:  # answer every call, run none
        return {"messages": [_not_run(call, str(exc)) for call in last.tool_calls], "execution_log": []}
    log: list[dict] = []
    token = _BATCH.set(_Batch(step, timeout_s, retries, log))
    try:
        with deferred_state_writes() as cards:  # the tool cards join the node's update
            output = await _node_for(tools).ainvoke(state, config)
    finally:
        _BATCH.reset(token)
    messages = output["messages"] if isinstance(output, dict) else output
    order = {call["id"]: i for i, call in enumerate(last.tool_calls)}
    log.sort(key=lambda entry: order.get(entry["tool_call_id"], 0))
    return {"messages": messages, "execution_log": log, **({"ui": cards} if cards else {})}


@dataclass(frozen=True)
class ToolRun:
    """One tool call made outside a graph (`run_tool`): the tool's answer and how it went."""

    content: Any
    """The tool's result as the model would read it (a failed call: the error text)."""
    entry: dict
    """Its execution-log entry: status, duration_ms, attempts (and error)."""
    error: BaseException | None
    """Why it failed (None: it succeeded)."""


async def run_tool(
    tool: BaseTool,
    args: dict[str, Any],
    *,
    user: Any,
    user_id: str,
    store: Any,
    timeout_s: float,
    retries: int,
) -> ToolRun:
    """Call one tool for `user` outside a graph (the HTTP tool route) exactly as a run's tool
    node calls it: the same argument checks (schema, `TOOL_ARGS_MAX_CHARS`), timeout, retries and
    quotas, with the tool's injected runtime acting for `user` (as a run of theirs would,
    tools/identity.py) on `store`."""
    call_id = f"call_{uuid.uuid4().hex}"
    call = {"id": call_id, "name": tool.name, "args": args, "type": "tool_call"}
    runtime = Runtime(
        context=SimpleNamespace(user_id=user_id),
        store=store,
        server_info=ServerInfo(assistant_id="", graph_id="", user=user),
    )
    log: list[dict] = []
    errors: dict[str, BaseException] = {}
    token = _BATCH.set(_Batch(0, timeout_s, retries, log, errors))
    try:
        output = await _node_for([tool]).ainvoke({"messages": [AIMessage("", tool_calls=[call])]}, {}, runtime=runtime)
    finally:
        _BATCH.reset(token)
    message = (output["messages"] if isinstance(output, dict) else output)[0]
    entry = {key: value for key, value in log[0].items() if key not in ("tool_call_id", "step")}
    return ToolRun(content=message.content, entry=entry, error=errors.get(call_id))
