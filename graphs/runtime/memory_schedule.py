"""After a turn: record the chat messages now, extract memories later in the background.

The turn is kept among its conversation's pending turns (graphs/memory_writer/pending.py), and a
writer run extracts all of them, so a run a newer turn replaces loses nothing. Extraction is
debounced per user and conversation and a newer turn supersedes a pending one:
- inside the LangGraph server, as a run of the `memory_writer` graph created through the
  in-process SDK client with `after_seconds` and `multitask_strategy="rollback"` on a thread of
  its own (a background run: it survives this run and shows in the server's run list);
- on a server without delayed runs (Aegra), as such a run started at once that waits the delay
  itself, then extracts only if its turn is still the latest one scheduled for the conversation
  (the latest turn's id is kept in the store, `("memory_schedule", <user>)`);
- a server run that finds the user's conversation busy (a run in progress there) does not
  extract: it re-schedules itself (`create_writer_run`, "enqueue") at most
  `MEMORY_WRITER_YIELD_RETRIES` times, then ends, its turns still pending;
- elsewhere (a graph compiled in-process), as an asyncio task that a newer turn cancels.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from graphs.memory_writer.pending import add_pending_turn, extract_pending, memory_thread_id
from graphs.runtime.context import Context
from graphs.runtime.history import last_turn
from graphs.runtime.ui import chat_messages, link_to_answer
from settings import settings
from store import memory
from store.recovery import resume_after_outages
from tools import credentials
from tools.identity import check_thread_owner, run_user_id, run_user_name

logger = logging.getLogger(__name__)
ContextT = TypeVar("ContextT", bound=Context)

MEMORY_WRITER_GRAPH = "memory_writer"
SCHEDULE_NAMESPACE_ROOT = "memory_schedule"
_local_tasks: dict[str, tuple[asyncio.Task, asyncio.Event]] = {}


def extraction_delay() -> float:
    """Seconds to wait for a newer turn before extracting (`MEMORY_EXTRACTION_DELAY`, default 20)."""
    return settings().MEMORY_EXTRACTION_DELAY


async def remember_turn(
    messages: Sequence[BaseMessage], runtime: Runtime[Any], config: RunnableConfig, *, extract: bool = True
) -> None:
    """End of a turn in any graph: record its last user message and final answer in the run
    user's chat history and (with `extract`) schedule memory extraction; nothing when the run's
    context has `remember` off or the graph runs without a store."""
    if not getattr(runtime.context, "remember", False) or runtime.store is None:
        return
    # Each step waits out a Postgres outage itself (store/recovery.py), so the node that ends the
    # turn, its model call included, is not run again for it and no write is repeated.
    await resume_after_outages(lambda: check_thread_owner(config), what="checking the thread's owner")
    turn = last_turn(messages)
    thread_id = (config.get("configurable") or {}).get("thread_id")
    user_id = run_user_id(runtime)
    speaker = run_user_name(runtime)
    chat_ids = await record_turn(runtime.store, user_id, turn, thread_id, speaker=speaker)
    if extract:
        await schedule_extraction(runtime, user_id, turn, thread_id, speaker=speaker, chat_ids=chat_ids)


async def finish_turn(state: Mapping[str, Any], runtime: Runtime[Any], config: RunnableConfig) -> dict:
    """The last node of a graph's turn: `remember_turn` on the thread's messages; this run's UI
    messages are attached to the answer."""
    await remember_turn(chat_messages(state["messages"]), runtime, config)
    return link_to_answer(state, config)


async def record_turn(
    store: BaseStore, user_id: str, turn: list[dict], thread_id: str | None, *, speaker: str | None = None
) -> list[str]:
    """Append the turn's messages to the user's chat history (for `search_chat_history`), each
    with who said it: `speaker` (the user's name, default their id) for the user's message,
    `memory.ASSISTANT_SPEAKER` for the answer. Returns the recorded messages' ids."""
    space = memory.open(store, user_id)
    ids = []
    for message in turn:
        if message["content"].strip():
            said_by = memory.ASSISTANT_SPEAKER if message["role"] == "assistant" else speaker or user_id
            record = partial(space.record_chat_message, message["role"], message["content"], thread_id, speaker=said_by)
            saved = await resume_after_outages(record, what="recording the turn")
            ids.append(saved["id"])
    return ids


def _schedule_namespace(user_id: str) -> tuple[str, str]:
    return (SCHEDULE_NAMESPACE_ROOT, user_id)


async def latest_turn_after_delay(
    store: BaseStore, user_id: str, thread_id: str | None, turn_id: str, not_before: float | None
) -> bool:
    """In a `memory_writer` run scheduled without a server delay: wait until `not_before`, then
    whether `turn_id` is still the latest turn scheduled for `user_id`'s conversation `thread_id`
    (False: a newer turn superseded it, and its own run extracts)."""
    if not_before is not None and (wait := not_before - time.time()) > 0:
        await asyncio.sleep(wait)
    latest = await store.aget(_schedule_namespace(user_id), memory_thread_id(user_id, thread_id), refresh_ttl=False)
    return latest is None or latest.value.get("turn_id") == turn_id


def _extraction_model(model: str) -> dict[str, str]:
    """The model of an extraction run made by the server: the turn's, unless the turn's request
    brought its own model key or base URL (tools/credentials.py), which that run does not have:
    then the server's AGENT_MODEL (the field left out)."""
    try:
        sent = credentials.current()
    except credentials.CredentialsUnavailable:
        sent = None
    return {} if sent is not None and sent.for_model else {"model": model}


async def schedule_extraction(
    runtime: Runtime[ContextT],
    user_id: str,
    turn: list[dict],
    thread_id: str | None,
    *,
    speaker: str | None = None,
    chat_ids: Sequence[str] = (),
) -> None:
    """Keep `turn` among the conversation's pending turns (graphs/memory_writer/pending.py) and
    schedule a writer run for after the debounce delay, superseding a pending one; the run
    extracts every pending turn of the conversation. The memories are about `speaker` (the
    user's name, default their id) and keep `chat_ids`, the turn's messages in the chat history,
    as where they came from."""
    store = runtime.store
    if store is None:  # the callers check; without a store there is nothing to write to
        return
    await resume_after_outages(
        lambda: add_pending_turn(store, user_id, thread_id, turn, speaker=speaker or user_id, chat_ids=chat_ids),
        what="keeping the turn for memory extraction",
    )
    context = runtime.context
    if runtime.server_info is not None:
        model = _extraction_model(context.model)
        await resume_after_outages(
            lambda: create_writer_run(store, user_id, thread_id, speaker or user_id, model, strategy="rollback"),
            what="scheduling memory extraction",
        )
        return
    from graphs.runtime.models import load_chat_model

    key = memory_thread_id(user_id, thread_id)
    delay = extraction_delay()
    flush = asyncio.Event()

    async def run_later() -> None:
        try:
            await asyncio.wait_for(flush.wait(), delay)
        except TimeoutError:
            pass
        try:
            model = load_chat_model(context.model, temperature=0, timeout=context.model_timeout)
            await extract_pending(
                store, user_id, thread_id, model, retries=context.model_retries, timeout=context.model_timeout
            )
        except Exception:
            logger.exception("memory extraction failed for thread %s", thread_id)

    if previous := _local_tasks.get(key):
        previous[0].cancel()
    task = asyncio.create_task(run_later())
    _local_tasks[key] = (task, flush)
    task.add_done_callback(
        lambda done: _local_tasks.pop(key, None) if _local_tasks.get(key, (None,))[0] is done else None
    )


async def create_writer_run(
    store: BaseStore,
    user_id: str,
    thread_id: str | None,
    speaker: str,
    model: Mapping[str, str],
    *,
    strategy: str,
    deferrals: int = 0,
    turn_id: str | None = None,
) -> None:
    """Create a `memory_writer` run on the conversation's writer thread, `MEMORY_EXTRACTION_DELAY`
    seconds from now: with `multitask_strategy` `strategy` ("rollback" after a turn: it replaces
    a pending or running one; "enqueue" when a run re-schedules itself). On a server without
    delayed runs (Aegra) the run waits itself and extracts only while its `turn_id` (a new one
    unless given) is the conversation's latest."""
    from tools.server_api import server_client, server_delays_runs

    key = memory_thread_id(user_id, thread_id)
    delay = extraction_delay()
    run_input: dict[str, Any] = {
        "messages": [],
        "thread_id": thread_id,
        "speaker": speaker,
        "chat_ids": [],
        "deferrals": deferrals,
    }
    options: dict[str, Any] = {"multitask_strategy": strategy, "after_seconds": int(delay)}
    if not server_delays_runs():
        # No `after_seconds` nor rollback: the run waits itself and the latest turn wins.
        if turn_id is None:
            turn_id = uuid.uuid4().hex
            await store.aput(_schedule_namespace(user_id), key, {"turn_id": turn_id}, index=False)
        run_input |= {"turn_id": turn_id, "not_before": time.time() + delay}
        options = {}
    await server_client(act_as=user_id).runs.create(
        key,
        MEMORY_WRITER_GRAPH,
        input=run_input,
        context={"user_id": user_id, **model},
        if_not_exists="create",
        **options,
    )


async def conversation_busy(user_id: str, thread_id: str | None) -> bool:
    """Whether `user_id`'s conversation `thread_id` has a run in progress on this server (a
    conversation the server does not know, or none, is not busy)."""
    if not thread_id:
        return False
    from tools.server_api import server_client

    try:
        thread = await server_client(act_as=user_id).threads.get(thread_id)
    except Exception as error:  # a thread id that is no server thread (direct writer runs)
        logger.debug("memory_writer: conversation %s not found on the server: %s", thread_id, error)
        return False
    return thread.get("status") == "busy"


async def wait_for_local_extractions(*, now: bool = False) -> None:
    """Wait for pending in-process extractions (tests, and clean shutdown of scripts); with
    `now`, start them at once instead of after their debounce delay."""
    while _local_tasks:
        pending = list(_local_tasks.values())
        if now:
            for _, flush in pending:
                flush.set()
        await asyncio.gather(*(task for task, _ in pending), return_exceptions=True)
