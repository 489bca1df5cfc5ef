"""The `memory_writer` graph: turn finished conversation turns into long-term memories.

Each turn ends by keeping itself among its conversation's pending turns and scheduling a run of
this graph (graphs/runtime/memory_schedule.py): delayed, on a thread per user and conversation,
with `multitask_strategy="rollback"`, so a newer turn replaces an extraction that has not
finished yet (debounce); the run extracts every pending turn (graphs/memory_writer/pending.py),
so the replaced run's turn is not lost. A run that finds the user's conversation busy yields to
the user's turn: it re-schedules itself for later, at most `MEMORY_WRITER_YIELD_RETRIES` times.
On a server without delayed runs (Aegra) the run waits the delay itself and extracts only if
its turn is still the latest, and one that finds the conversation busy ends at once, its turns
pending for the run the busy turn schedules.
"""

from __future__ import annotations

import logging

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from graphs.memory_writer.pending import add_pending_turn, extract_pending
from graphs.memory_writer.state import State
from graphs.runtime.context import Context
from graphs.runtime.memory_schedule import conversation_busy, create_writer_run, latest_turn_after_delay
from graphs.runtime.models import load_chat_model
from settings import settings
from tools.identity import run_user_id, run_user_name
from tools.server_api import server_delays_runs

logger = logging.getLogger(__name__)


async def extract(state: State, runtime: Runtime[Context]) -> dict:
    """Extract episodic/semantic memories and profile updates from the conversation's pending
    turns (and the input's turn, if any) and save them; or yield to a run of the user's in
    progress in the conversation."""
    if runtime.store is None:
        raise RuntimeError("memory_writer needs a store (langgraph.json `store`)")
    user_id = run_user_id(runtime)
    thread_id = state.get("thread_id")
    speaker = state.get("speaker") or run_user_name(runtime)
    done: dict = {"messages": [], "chat_ids": []}  # a turn given as input is queued once
    if state.get("messages"):
        await add_pending_turn(
            runtime.store, user_id, thread_id, state["messages"], speaker=speaker, chat_ids=state.get("chat_ids") or []
        )
    turn_id = state.get("turn_id")
    if turn_id and not await latest_turn_after_delay(
        runtime.store, user_id, thread_id, turn_id, state.get("not_before")
    ):
        return done | {"result": {"superseded": True}}
    context = runtime.context
    if runtime.server_info is not None and await conversation_busy(user_id, thread_id):
        deferrals = state.get("deferrals") or 0
        # Aegra runs no delayed runs: the busy run schedules the next writer run when it ends.
        if deferrals >= settings().MEMORY_WRITER_YIELD_RETRIES or not server_delays_runs():
            logger.info("memory_writer: conversation still busy after %d deferrals; turns left pending", deferrals)
            return done | {"result": {"yielded": True, "deferrals": deferrals}}
        await create_writer_run(
            runtime.store,
            user_id,
            thread_id,
            speaker,
            {"model": context.model},
            strategy="enqueue",
            deferrals=deferrals + 1,
            turn_id=turn_id,
        )
        return done | {"result": {"deferred": deferrals + 1}}
    model = load_chat_model(
        context.model,
        temperature=0,
        timeout=context.model_timeout,
        max_tokens=settings().MEMORY_WRITER_MAX_TOKENS,  # the answer's bound, not the chat's (AGENT_MAX_TOKENS)
    )
    counts = await extract_pending(
        runtime.store, user_id, thread_id, model, retries=context.model_retries, timeout=context.model_timeout
    )
    return done | {"result": counts}


builder = StateGraph(State, context_schema=Context)
builder.add_node("extract", extract)
builder.add_edge(START, "extract")
builder.add_edge("extract", END)

graph = builder.compile(name="memory_writer")
