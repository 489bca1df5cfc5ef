"""Turn a conversation turn into long-term memory: the episodic memories, semantic facts and
profile fields an LLM extracts from it.

Extraction asks for `MemoryExtraction` through the runtime's structured call
(graphs/runtime/structured.py: JSON-schema constrained output on OpenAI-compatible servers,
function calling elsewhere, validated, re-asked once); saving goes through store/memory.py, so
near-duplicates update existing memories instead of piling up. Nothing is written when the model
call or its output validation fails, and the failure says so (event, log, the run's error).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.store.base import BaseStore
from pydantic import BaseModel, Field, StringConstraints

from graphs.memory_writer.prompts import EXTRACTION_PROMPT
from graphs.runtime.history import last_turn
from graphs.runtime.structured import ainvoke_structured
from store import memory

MAX_ITEMS = 10
MAX_EXISTING = 20
MAX_TURN_CHARS = 12000
EXTRACTION_ATTEMPTS = 2

CategoryName = Literal[memory.CATEGORIES]  # type: ignore[valid-type]
ProfileField = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=memory.MAX_PROFILE_KEY_CHARS)
]
ProfileValue = Annotated[str, StringConstraints(max_length=memory.MAX_PROFILE_VALUE_CHARS)]


class EpisodicItem(BaseModel):
    """An event or experience of the user worth remembering."""

    text: str = Field(
        min_length=1,
        max_length=2000,
        description="One self-contained sentence about what happened, e.g. "
        "'The user ran the Berlin marathon in April 2025'.",
    )
    importance: float = Field(default=0.5, ge=0, le=1, description="0 trivial .. 1 essential")


class SemanticItem(BaseModel):
    """A durable fact, preference, skill, relationship or goal of the user."""

    text: str = Field(
        min_length=1,
        max_length=2000,
        description="One self-contained statement, e.g. 'The user is vegetarian'.",
    )
    category: CategoryName = Field(description="preference, fact, skill, relationship, goal or other")
    importance: float = Field(default=0.5, ge=0, le=1, description="0 trivial .. 1 essential")


class MemoryExtraction(BaseModel):
    """Memories worth keeping from the latest conversation turn (empty lists when none)."""

    # Facts first: the order a model fills them in when its output is constrained to the schema.
    semantic: list[SemanticItem] = Field(default_factory=list, max_length=MAX_ITEMS)
    episodic: list[EpisodicItem] = Field(default_factory=list, max_length=MAX_ITEMS)
    profile_updates: dict[ProfileField, ProfileValue] = Field(
        default_factory=dict,
        description="Stable profile fields stated in this turn, e.g. {'name': 'Alice', "
        "'city': 'Munich', 'occupation': 'nurse'}.",
    )


def _render_turn(turn: list[dict]) -> str:
    labels = {"user": "User", "assistant": "Assistant"}
    lines = [f"{labels[m['role']]}: {m['content'].strip()}" for m in turn if m["content"].strip()]
    return "\n".join(lines)[-MAX_TURN_CHARS:]


def _render_existing(existing: Sequence[dict]) -> str:
    lines = []
    for item in existing[:MAX_EXISTING]:
        label = item.get("kind", "memory")
        if item.get("category"):
            label += f"/{item['category']}"
        lines.append(f"- [{label}] {item.get('text', '')}")
    return "\n".join(lines) or "(none)"


async def extract_memories(
    model: BaseChatModel,
    messages: Sequence[BaseMessage],
    existing: list[dict],
    *,
    retries: int = 2,
    timeout: float | None = None,
) -> MemoryExtraction:
    """Ask the model which memories the latest turn of `messages` holds.

    `existing` are memories already known (dicts with "text", "kind", "category"), shown to the
    model so it does not repeat them. An answer that is not a valid extraction is asked again
    once; then `StructuredOutputError` (with a `structured_output_failed` event and a log line):
    a model that cannot extract is never taken for a turn with nothing to remember.
    """
    conversation = _render_turn(last_turn(messages))
    if not conversation:
        return MemoryExtraction()
    prompt: list[AnyMessage] = [
        SystemMessage(EXTRACTION_PROMPT),
        HumanMessage(f"Known memories:\n{_render_existing(existing)}\n\nLatest conversation turn:\n{conversation}"),
    ]
    result = await ainvoke_structured(
        model, MemoryExtraction, prompt, None, retries=retries, timeout=timeout, attempts=EXTRACTION_ATTEMPTS
    )
    return result.value


async def extract_and_save(
    store: BaseStore,
    user_id: str,
    messages: Sequence[BaseMessage],
    model: BaseChatModel,
    thread_id: str | None,
    *,
    retries: int = 2,
    timeout: float | None = None,
    speaker: str | None = None,
) -> dict:
    """Save what the model extracts from the latest turn of `messages` (dedupe applies), as
    memories about `speaker` (the user's name; default their id).

    The chat messages themselves are recorded when the turn ends
    (graphs/runtime/memory_schedule.py), not here. Returns counts: {"created", "updated",
    "profile_fields"}. The model is asked first; if it fails, nothing is written.
    """
    memory.namespace(user_id, "chat")  # validates user_id before any model call
    asked = next((m["content"] for m in last_turn(messages) if m["role"] == "user" and m["content"].strip()), None)
    existing: list[dict] = []
    if asked is not None:
        for kind in memory.MEMORY_KINDS:
            existing += await memory.recall(
                store,
                user_id,
                asked[: memory.memory_config().max_text_chars],
                kind,
                top_k=MAX_EXISTING // 2,
                record_access=False,
            )
    extraction = await extract_memories(model, messages, existing, retries=retries, timeout=timeout)

    saves = [("episodic", item.text, None, item.importance) for item in extraction.episodic]
    saves += [("semantic", item.text, item.category, item.importance) for item in extraction.semantic]
    limit = memory.memory_config().max_text_chars
    if any(not text.strip() or len(text) > limit for _, text, _, _ in saves):
        raise ValueError(f"extracted memory text is empty or longer than {limit} characters")

    counts = {"created": 0, "updated": 0, "profile_fields": 0}
    for kind, text, category, importance in saves:
        saved = await memory.save_memory(
            store,
            user_id,
            kind,
            text,
            category=category,
            importance=importance,
            source="extraction",
            thread_id=thread_id,
            speaker=speaker or user_id,
        )
        counts[saved["action"]] += 1
    if extraction.profile_updates:
        await memory.update_profile(store, user_id, extraction.profile_updates)
        counts["profile_fields"] = len(extraction.profile_updates)
    return counts
