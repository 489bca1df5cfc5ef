"""Memory tools: search and save the current user's long-term memories.

The user is never a model argument: every tool acts for `tools.identity.run_user_id(runtime)`
(the authenticated user, or the run context's `user_id` where that is trusted), read through
LangGraph's injected `runtime: ToolRuntime` (hidden from the model), and the store from
`runtime.store`. Storage, dedupe and scoring live in store/memory.py.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC
from typing import Any, Literal, TypeVar

from langgraph.prebuilt import ToolRuntime

from store import memory
from tools.errors import ToolError, ToolInputError
from tools.identity import run_user_id, run_user_name

T = TypeVar("T")

# Enums in the tools' JSON schema, taken from store/memory.py's lists (one source of truth).
Category = Literal[memory.CATEGORIES]  # type: ignore[valid-type]
MemoryType = Literal[(*memory.TEXT_KINDS, "all")]  # type: ignore[valid-type]
Role = Literal[memory.ROLES]  # type: ignore[valid-type]
MAX_TOP_K = 20
MAX_LIMIT = 50


def _scope(runtime: ToolRuntime[Any, Any]) -> memory.MemorySpace:
    """The memory space of the user the run acts for."""
    user_id = run_user_id(runtime)
    if not isinstance(user_id, str) or not user_id.strip():
        raise ToolError("Memory is unavailable: this run has no user_id in its context.")
    if runtime.store is None:
        raise ToolError("Memory is unavailable: this graph runs without a store.")
    try:
        return memory.open(runtime.store, user_id)
    except ValueError as exc:
        raise ToolError(f"Memory is unavailable: {exc}") from None


def _bounded(value: int, name: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ToolInputError(f"{name} must be an integer from 1 to {maximum}, got {value!r}")
    return value


async def _call(operation: Awaitable[T]) -> T:
    try:
        return await operation
    except ValueError as exc:
        raise ToolInputError(str(exc)) from exc


async def search_episodic_memory(query: str, top_k: int = 5, *, runtime: ToolRuntime[Any, Any]) -> dict:
    """Search the user's episodic memories (events, experiences, activities) by meaning.

    Use it for questions about what happened to the user or what they did.

    Args:
        query: What to look for, in natural language, e.g. "trip to Japan" or "job interview".
        top_k: How many memories to return, 1 to 20 (default 5).

    Returns:
        {"query", "results": [{"id", "text", "kind", "importance", "created_at", "updated_at",
        "last_accessed_at", "access_count", "score", "similarity", "turns", ...}], "count"},
        best first. `score` is the ranking score: relevance to the query (with weighted scoring
        also importance, recency and how often the memory was recalled). `turns` are the chat
        messages the memory was learnt from ({"id", "role", "text", "created_at"}; empty for a
        memory saved by hand): quote them when the user asks where something came from.
    """
    space = _scope(runtime)
    _bounded(top_k, "top_k", MAX_TOP_K)
    results = await _call(space.recall(query, "episodic", top_k=top_k))
    answer: dict[str, Any] = {"query": query, "results": results, "count": len(results)}
    if not results:
        return await _other_kind(space, query, top_k, "semantic", answer)
    return answer


async def search_semantic_memory(
    query: str,
    category: Category | None = None,
    top_k: int = 5,
    *,
    runtime: ToolRuntime[Any, Any],
) -> dict:
    """Search the user's semantic memories (facts, preferences, skills, relationships, goals).

    Use it for what is true about the user: where they live, what they like, who they know.

    Args:
        query: What to look for, in natural language, e.g. "favourite food" or "sister's name".
        category: Prefer this category: "preference", "fact", "skill", "relationship", "goal"
            or "other". It narrows the search only when the best match for the query is in
            it; otherwise all categories are searched and `note` says so. Omit to search all.
        top_k: How many memories to return, 1 to 20 (default 5).

    Returns:
        {"query", "category" (the category searched, null for all), "results": [{"id", "text",
        "kind", "category", "importance", "created_at", "updated_at", "access_count", "score",
        "similarity", "turns", ...}], "count"}, best first, and a `note` when the search was
        widened. `turns` are the chat messages the fact was learnt from ({"id", "role", "text",
        "created_at"}; empty for a fact saved by hand).
        When facts contradict, prefer the one with the later `updated_at`.
    """
    space = _scope(runtime)
    _bounded(top_k, "top_k", MAX_TOP_K)
    answer: dict[str, Any] = {"query": query, "category": category}
    if category is not None:
        # A guessed category must not hide the memory asked for: look at the best match of all
        # categories first, and narrow only when it is in the category asked for.
        best = await _call(space.recall(query, "semantic", top_k=1, record_access=False))
        if best and best[0].get("category") != category:
            answer["category"] = None
            answer["note"] = f"The best match is not in category {category!r}, so all categories were searched."
    results = await _call(space.recall(query, "semantic", top_k=top_k, category=answer["category"]))
    answer.update(results=results, count=len(results))
    if not results:
        return await _other_kind(space, query, top_k, "episodic", answer)
    return answer


async def _other_kind(space: memory.MemorySpace, query: str, top_k: int, kind: str, answer: dict) -> dict:
    """`answer` (which found nothing) with the matches of the other kind of memory, if any, and a note."""
    results = await _call(space.recall(query, kind, top_k=top_k))
    if results:
        answer.update(
            results=results,
            count=len(results),
            note=f"Nothing matched here, so {kind} memories were searched instead.",
        )
    return answer


async def keyword_search(
    keywords: list[str],
    memory_type: MemoryType = "all",
    limit: int = 10,
    *,
    runtime: ToolRuntime[Any, Any],
) -> dict:
    """Find memories containing ANY of the given keywords (case-insensitive, exact substrings).

    Use it for names, places, product names or other exact terms; use the semantic searches
    for meaning.

    Args:
        keywords: 1 to 20 words or phrases, e.g. ["Berlin", "dentist"].
        memory_type: "episodic", "semantic", "chat" (raw conversation messages) or "all"
            (default: all three). When nothing of that type matches, all types are searched
            and `note` says so.
        limit: Most results to return, 1 to 50 (default 10).

    Returns:
        {"keywords", "memory_type" (the type searched), "results": [{"id", "text", "kind",
        "created_at", "updated_at", "score", "matched_keywords", ...}], "count"}: most keywords
        matched first, then newest. `score` is the fraction of keywords matched.
    """
    space = _scope(runtime)
    _bounded(limit, "limit", MAX_LIMIT)
    results = await _call(space.keyword_search(keywords, memory_type, limit))
    answer: dict[str, Any] = {"keywords": keywords, "memory_type": memory_type}
    if not results and memory_type != "all":
        results = await _call(space.keyword_search(keywords, "all", limit))
        if results:
            answer.update(memory_type="all", note=f"No {memory_type} memory matched, so all memories were searched.")
    return answer | {"results": results, "count": len(results)}


async def time_filter(
    start_date: str | None = None,
    end_date: str | None = None,
    days_ago: int | None = None,
    limit: int = 10,
    *,
    runtime: ToolRuntime[Any, Any],
) -> dict:
    """List the user's episodic and semantic memories recorded within a time range, newest first.

    Give start_date and/or end_date, or days_ago alone.

    Args:
        start_date: Earliest recording time, "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SS+HH:MM"
            (UTC when no offset is given).
        end_date: Latest recording time, same format; a plain date includes that whole day.
        days_ago: Instead of start_date: memories from the last N days (0 to 36500).
        limit: Most results to return, 1 to 50 (default 10).

    Returns:
        {"start", "end" (ISO 8601 UTC, end exclusive, null when open), "results": [{"id",
        "text", "kind", "created_at", "updated_at", "score", ...}], "count"}. `score` is the
        recency factor, 1.0 for just now, halving every half-life (180 days by default).
    """
    space = _scope(runtime)
    _bounded(limit, "limit", MAX_LIMIT)
    try:
        start, end = memory.resolve_time_range(start_date, end_date, days_ago)
    except ValueError as exc:
        raise ToolInputError(str(exc)) from exc
    results = await _call(space.time_filter(start_date, end_date, days_ago, limit))
    return {
        "start": start.astimezone(UTC).isoformat() if start else None,
        "end": end.astimezone(UTC).isoformat() if end else None,
        "results": results,
        "count": len(results),
    }


async def get_user_profile(categories: list[Category] | None = None, *, runtime: ToolRuntime[Any, Any]) -> dict:
    """Get the user's profile: structured fields (name, city, job, ...) and their known facts
    grouped by category.

    Args:
        categories: Which fact categories to include, any of "preference", "fact", "skill",
            "relationship", "goal", "other". Omit for all. When none of them holds a fact, all
            categories are returned and `note` says so.

    Returns:
        {"fields": {name: text}, "field_turns": {name: [turn]}, "created_at", "updated_at",
        "facts": {category: [{"id", "text", "importance", "created_at", "updated_at", "score",
        "turns", ...}]}}, up to 10 facts per category, most important first. `turns` and
        `field_turns` are the chat messages a fact or field was learnt from ({"id", "role",
        "text", "created_at"}).
    """
    space = _scope(runtime)
    profile = await _call(space.get_profile(categories))
    if categories and not any(profile["facts"].values()):
        everything = await _call(space.get_profile(None))
        if any(everything["facts"].values()):
            wanted = ", ".join(categories)
            return everything | {"note": f"No facts in {wanted}, so every category is shown."}
    return profile


async def get_recent_activity(limit: int = 10, *, runtime: ToolRuntime[Any, Any]) -> dict:
    """The user's most recently recorded or updated episodic and semantic memories.

    Args:
        limit: Most results to return, 1 to 50 (default 10).

    Returns:
        {"results": [{"id", "text", "kind", "created_at", "updated_at", "score", ...}],
        "count"}, newest `updated_at` first; `score` is the recency factor (1.0 = just now).
    """
    space = _scope(runtime)
    _bounded(limit, "limit", MAX_LIMIT)
    results = await _call(space.recent_activity(limit))
    return {"results": results, "count": len(results)}


async def search_chat_history(
    query: str, role: Role | None = None, limit: int = 10, *, runtime: ToolRuntime[Any, Any]
) -> dict:
    """Search the raw messages of the user's past conversations by meaning.

    Use it to find what exactly was said, e.g. a recommendation the assistant gave.

    Args:
        query: What to look for, in natural language.
        role: Only messages by "user" or by "assistant". Omit for both.
        limit: Most results to return, 1 to 50 (default 10).

    Returns:
        {"query", "role", "results": [{"id", "text", "role", "thread_id", "created_at",
        "score", "similarity", ...}], "count"}, best first. A message someone sent in
        several parts (messages in a row within two minutes) comes back once, with "parts":
        all of them in order ({"id", "text", "speaker", "created_at", ...}); read them together.
    """
    space = _scope(runtime)
    _bounded(limit, "limit", MAX_LIMIT)
    results = await _call(space.recall(query, "chat", top_k=limit, role=role))
    return {"query": query, "role": role, "results": results, "count": len(results)}


async def save_memory(
    text: str,
    kind: Literal["episodic", "semantic"] = "semantic",
    category: Category | None = None,
    importance: float = 0.5,
    *,
    runtime: ToolRuntime[Any, Any],
) -> dict:
    """Remember something about the user for future conversations, or update what is known.

    Save durable facts and preferences (kind "semantic") or notable events (kind "episodic"),
    written as a self-contained sentence about the user, e.g. "The user moved to Munich in
    May 2025". A memory nearly identical to an existing one updates it instead of duplicating.

    Args:
        text: The memory, one self-contained statement (at most 8000 characters).
        kind: "semantic" for facts and preferences (default), "episodic" for events.
        category: For semantic memories: "preference", "fact", "skill", "relationship",
            "goal" or "other" (default "other"). Leave empty for episodic memories.
        importance: 0 to 1, how much this matters for future help (default 0.5; 0.8+ for core
            facts such as name, home, job, health, strong preferences).

    Returns:
        {"id", "action": "created" or "updated", "text", "kind", "category", "importance",
        "created_at", "updated_at", ...}; an update also gives "previous_text".
    """
    space = _scope(runtime)
    speaker = run_user_name(runtime)  # the memory is about the user
    return await _call(space.save(kind, text, category=category, importance=importance, source="tool", speaker=speaker))


async def delete_memory(memory_id: str, *, runtime: ToolRuntime[Any, Any]) -> dict:
    """Forget one of the user's memories, e.g. when they ask you to forget something or it is wrong.

    Find its id first with one of the search tools. Only the current user's memories can be
    deleted.

    Args:
        memory_id: The "id" of the memory, as a search result gave it.

    Returns:
        {"id", "deleted": true or false (no such memory of this user), "kind"}.
    """
    space = _scope(runtime)
    return await _call(space.delete(memory_id))


MEMORY_TOOLS: tuple[Any, ...] = (
    search_episodic_memory,
    search_semantic_memory,
    keyword_search,
    time_filter,
    get_user_profile,
    get_recent_activity,
    search_chat_history,
    save_memory,
    delete_memory,
)
