"""The `memory_writer` graph: turn a finished conversation turn into long-term memories.

The `react` graph schedules one run of it per turn (graphs/runtime/memory_schedule.py): delayed,
on a thread per user and conversation, with `multitask_strategy="rollback"`, so a newer turn
cancels an extraction that has not finished yet (debounce). On a server without delayed runs
(Aegra) the run waits the delay itself and extracts only if its turn is still the latest.
"""

from __future__ import annotations

from langchain_core.messages import convert_to_messages
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from graphs.memory_writer.extract import extract_and_save
from graphs.memory_writer.state import State
from graphs.runtime.context import Context
from graphs.runtime.memory_schedule import latest_turn_after_delay
from graphs.runtime.models import load_chat_model
from tools.identity import run_user_id, run_user_name


async def extract(state: State, runtime: Runtime[Context]) -> dict:
    """Extract episodic/semantic memories and profile updates from the turn and save them."""
    if runtime.store is None:
        raise RuntimeError("memory_writer needs a store (langgraph.json `store`)")
    user_id = run_user_id(runtime)
    turn_id = state.get("turn_id")
    if turn_id and not await latest_turn_after_delay(
        runtime.store, user_id, state.get("thread_id"), turn_id, state.get("not_before")
    ):
        return {"result": {"superseded": True}}
    context = runtime.context
    model = load_chat_model(context.model, temperature=0, timeout=context.model_timeout)
    counts = await extract_and_save(
        runtime.store,
        user_id,
        convert_to_messages(state.get("messages") or []),
        model,
        state.get("thread_id"),
        retries=context.model_retries,
        timeout=context.model_timeout,
        speaker=state.get("speaker") or run_user_name(runtime),
        turn_ids=state.get("chat_ids") or [],
    )
    return {"result": counts}


builder = StateGraph(State, context_schema=Context)
builder.add_node("extract", extract)
builder.add_edge(START, "extract")
builder.add_edge("extract", END)

graph = builder.compile(name="memory_writer")
