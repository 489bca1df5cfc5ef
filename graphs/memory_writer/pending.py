"""The turns of a conversation waiting for the memory writer.

Each turn that ends with memory on is kept in the store at once, one item per turn, under
`("memory_pending", <user label>, <memory thread id>)`, with the key ordered by time. A writer
run extracts the conversation's pending turns oldest first, one model call each, at most
`MEMORY_WRITER_MAX_TURNS` turns and `MEMORY_WRITER_MAX_CHARS` characters (its first turn always),
and deletes each turn once its memories are saved. So a turn whose scheduled run a newer turn
replaced (or cancelled mid-way) is extracted by the newer turn's run, and what one run leaves is
left for the next. A turn whose extraction fails stays pending for the next run, and is dropped
(logged) after `MAX_FAILURES` failed runs, so one turn a model cannot extract never blocks the rest.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import convert_to_messages
from langgraph.store.base import BaseStore, Item

from graphs.memory_writer.extract import extract_and_save
from settings import settings
from store.clean import strip_nul
from store.memory.validate import user_label

PENDING_ROOT = "memory_pending"
MAX_FAILURES = 2
MAX_PENDING_READ = 1000
COUNTS = ("created", "updated", "profile_fields", "dropped")

logger = logging.getLogger(__name__)


def memory_thread_id(user_id: str, thread_id: str | None) -> str:
    """The thread that debounces extraction for one user's conversation (also the label of its
    pending turns)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memory-writer:{user_id}:{thread_id or '-'}"))


def pending_namespace(user_id: str, thread_id: str | None) -> tuple[str, str, str]:
    """Where `user_id`'s turns of conversation `thread_id` wait for the writer."""
    return (PENDING_ROOT, user_label(user_id), memory_thread_id(user_id, thread_id))


async def add_pending_turn(
    store: BaseStore,
    user_id: str,
    thread_id: str | None,
    turn: list[dict],
    *,
    speaker: str | None = None,
    chat_ids: Sequence[str] = (),
) -> str:
    """Keep `turn` for the conversation's next writer run; returns its key."""
    key = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
    # Postgres' jsonb cannot hold NUL characters: a message holding one is kept without them
    value = strip_nul({"messages": turn, "speaker": speaker, "chat_ids": list(chat_ids), "failures": 0})
    await store.aput(pending_namespace(user_id, thread_id), key, value, index=False)
    return key


async def pending_turns(store: BaseStore, user_id: str, thread_id: str | None) -> list[Item]:
    """The conversation's pending turns, oldest first (at most `MAX_PENDING_READ` are read)."""
    items = await store.asearch(pending_namespace(user_id, thread_id), limit=MAX_PENDING_READ)
    return sorted(items, key=lambda item: item.key)


def next_batch(items: Sequence[Item], max_turns: int, max_chars: int) -> list[Item]:
    """The oldest turns of `items` one run extracts: at most `max_turns`, and no more than
    `max_chars` characters of messages unless that is the first turn alone."""
    batch: list[Item] = []
    chars = 0
    for item in items:
        size = sum(len(message.get("content") or "") for message in item.value.get("messages") or [])
        if batch and (len(batch) >= max_turns or chars + size > max_chars):
            break
        batch.append(item)
        chars += size
    return batch


async def extract_pending(
    store: BaseStore,
    user_id: str,
    thread_id: str | None,
    model: BaseChatModel,
    *,
    retries: int = 2,
    timeout: float | None = None,
) -> dict:
    """Extract and save the memories of the conversation's next batch of pending turns (each
    memory keeps its own turn's chat message ids). Returns the summed counts of
    `extract_and_save` plus `turns` (extracted) and `pending` (left for the next run). A failed
    turn stops the run with its error; it stays pending unless it has failed `MAX_FAILURES` times."""
    config = settings()
    items = await pending_turns(store, user_id, thread_id)
    batch = next_batch(items, config.MEMORY_WRITER_MAX_TURNS, config.MEMORY_WRITER_MAX_CHARS)
    counts = dict.fromkeys(COUNTS, 0) | {"turns": 0, "pending": len(items)}
    for item in batch:
        turn = item.value
        try:
            done = await extract_and_save(
                store,
                user_id,
                convert_to_messages(turn.get("messages") or []),
                model,
                thread_id,
                retries=retries,
                timeout=timeout,
                speaker=turn.get("speaker") or user_id,
                turn_ids=turn.get("chat_ids") or [],
            )
        except Exception:
            failures = int(turn.get("failures") or 0) + 1
            if failures >= MAX_FAILURES:
                logger.warning("memory_writer: a turn failed extraction %d times, dropped from the queue", failures)
                await store.adelete(item.namespace, item.key)
            else:
                await store.aput(item.namespace, item.key, {**turn, "failures": failures}, index=False)
            raise
        await store.adelete(item.namespace, item.key)
        for name in COUNTS:
            counts[name] += done.get(name, 0)
        counts["turns"] += 1
        counts["pending"] -= 1
    return counts
