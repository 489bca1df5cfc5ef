"""Run one plan step: its tool directly (retries through the tool runner) or the `react` agent,
then, if a tool step failed, the model without the tool. Returns the step's execution-log entry.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import replace

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from graphs.plan_execute.context import PlanExecuteContext
from graphs.plan_execute.plan import resolve_references
from graphs.plan_execute.prompts import (
    CANNOT_COMPLETE,
    DEPENDENCIES_SECTION,
    FALLBACK_PROMPT,
    STEP_PROMPT,
)
from graphs.plan_execute.state import StepInput
from graphs.react.graph import graph as react_graph
from graphs.runtime.events import emit, preview
from graphs.runtime.models import NOSTREAM_TAGS, ainvoke_with_retries, load_chat_model
from graphs.runtime.tool_runner import run_tool_calls
from tools.registry import select_tools

RESULT_CHARS = 8000
"""Longest step result kept in the execution log (what dependent steps and the answer see)."""
"""Tag of model calls whose tokens stay off the `messages` stream (LangGraph's own tag)."""


class StepFailed(Exception):
    """A step attempt failed; `attempts` counts the tries made (tool retries included)."""

    def __init__(self, error: str, attempts: int = 1) -> None:
        super().__init__(error)
        self.attempts = attempts


def _dependencies_text(dependencies: list[dict]) -> str:
    if not dependencies:
        return ""
    results = "\n".join(f"- {dep['step_id']} ({dep['description']}): {dep.get('result', '')}" for dep in dependencies)
    return DEPENDENCIES_SECTION.format(results=results)


async def _call_tool(step: dict, wave: int, context: PlanExecuteContext, config: RunnableConfig) -> tuple[str, int]:
    """Call the step's tool through the shared tool runner; (result, attempts) or StepFailed."""
    call_id = f"{step['id']}-{uuid.uuid4().hex[:8]}"
    request = AIMessage(
        content="", tool_calls=[{"name": step["tool"], "args": step["args"], "id": call_id, "type": "tool_call"}]
    )
    tools = await select_tools(context.tools)
    output = await run_tool_calls(
        {"messages": [request]},
        config,
        tools,
        step=wave,
        timeout_s=context.tool_timeout,
        retries=context.tool_retries,
    )
    message = output["messages"][0]
    entry = output["execution_log"][0] if output["execution_log"] else {}
    attempts = entry.get("attempts", 1)
    if getattr(message, "status", "success") == "error":
        raise StepFailed(entry.get("error") or message.text, attempts)
    return message.text, attempts


async def _run_agent(payload: StepInput, context: PlanExecuteContext, config: RunnableConfig) -> tuple[str, list[str]]:
    """Hand a reasoning step to the `react` graph (a subgraph: its tokens and events stream)."""
    step = payload["step"]
    prompt = STEP_PROMPT.format(
        task=payload["task"],
        step_id=step["id"],
        description=step["description"],
        dependencies=_dependencies_text(payload["dependencies"]),
    )
    # Steps are not turns of the user's conversation: keep them out of chat history and memory.
    output = await react_graph.ainvoke(
        {"messages": [HumanMessage(prompt)]}, config, context=replace(context, remember=False)
    )
    tools_used = [entry["tool"] for entry in output.get("execution_log", [])]
    return output["messages"][-1].text, tools_used


async def _fallback(payload: StepInput, error: str, context: PlanExecuteContext, config: RunnableConfig) -> str:
    """Ask the model for the step's result without its tool; StepFailed if it cannot."""
    step = payload["step"]
    prompt = FALLBACK_PROMPT.format(
        tool=step["tool"],
        error=error,
        task=payload["task"],
        step_id=step["id"],
        description=step["description"],
        args=json.dumps(step["args"], ensure_ascii=False),
        dependencies=_dependencies_text(payload["dependencies"]),
    )
    model = load_chat_model(context.model, temperature=context.temperature, timeout=context.model_timeout)
    response = await ainvoke_with_retries(
        model.with_config(tags=[*NOSTREAM_TAGS, "plan_step_fallback"]),
        [HumanMessage(prompt)],
        config,
        retries=context.model_retries,
        timeout=context.model_timeout,
        step=payload["wave"],
    )
    text = response.text.strip()
    if not text or text.startswith(CANNOT_COMPLETE):
        raise StepFailed(f"{error}; without the tool: {text or 'no answer'}")
    return text


def log_entry(step: dict, wave: int, **outcome) -> dict:
    """A step's execution-log entry: the step as planned, its wave, and what happened to it."""
    return {
        "step_id": step["id"],
        "description": step["description"],
        "tool": step["tool"],
        "args": step["args"],
        "depends_on": step["depends_on"],
        "wave": wave,
        "recovery": None,
        **outcome,
    }


async def _timed(coroutine, timeout_s: float):
    try:
        return await asyncio.wait_for(coroutine, timeout_s)
    except TimeoutError as exc:
        raise StepFailed(f"step timed out after {timeout_s:g} s") from exc


async def run_step(payload: StepInput, runtime: Runtime[PlanExecuteContext], config: RunnableConfig) -> dict:
    """Run one step with recovery: retries (tool runner), then the model without the tool.

    A step that still fails is logged `failed` (the replanner decides what follows); nothing here
    raises except cancellation and interrupts.
    """
    context = runtime.context
    results = {dep["step_id"]: dep.get("result", "") for dep in payload["dependencies"]}
    step = payload["step"] | {"args": resolve_references(payload["step"]["args"], results)}
    payload = StepInput(step=step, task=payload["task"], dependencies=payload["dependencies"], wave=payload["wave"])
    wave = payload["wave"]
    emit(
        "plan_step_started",
        step_id=step["id"],
        description=step["description"],
        tool=step["tool"],
        args=step["args"],
        wave=wave,
    )
    started = time.perf_counter()
    entry = log_entry(step, wave)
    attempts = 1
    try:
        if step["tool"]:
            try:
                result, attempts = await _timed(_call_tool(step, wave, context, config), context.step_timeout)
                if attempts > 1:
                    entry.update(recovery="retry", tool_error=f"{attempts - 1} transient failure(s), retried")
            except StepFailed as failure:
                attempts = failure.attempts + 1
                entry["tool_error"] = str(failure)
                result = await _timed(_fallback(payload, str(failure), context, config), context.step_timeout)
                entry["recovery"] = "model"
        else:
            result, entry["tools_used"] = await _timed(_run_agent(payload, context, config), context.step_timeout)
    except GraphBubbleUp:
        raise
    except Exception as exc:
        error = str(exc) or type(exc).__name__
        duration_ms = round((time.perf_counter() - started) * 1000, 1)
        emit("plan_step_failed", step_id=step["id"], error=error, attempts=attempts, duration_ms=duration_ms)
        return {
            "execution_log": [
                entry | {"status": "failed", "error": error, "attempts": attempts, "duration_ms": duration_ms}
            ]
        }
    duration_ms = round((time.perf_counter() - started) * 1000, 1)
    status = "recovered" if entry["recovery"] == "model" else "completed"
    if entry["recovery"]:
        emit(
            "plan_step_recovered",
            step_id=step["id"],
            recovery=entry["recovery"],
            attempts=attempts,
            error=entry.get("tool_error", ""),
        )
    emit(
        "plan_step_completed",
        step_id=step["id"],
        status=status,
        duration_ms=duration_ms,
        attempts=attempts,
        result_preview=preview(result),
    )
    return {
        "execution_log": [
            entry
            | {
                "status": status,
                "result": preview(result, RESULT_CHARS),
                "attempts": attempts,
                "duration_ms": duration_ms,
            }
        ]
    }
