"""State of the `memory_writer` graph."""

from __future__ import annotations

from typing_extensions import TypedDict


class State(TypedDict, total=False):
    """One turn to learn from. Each run replaces it (no reducer): the thread only debounces."""

    messages: list[dict]
    """The turn as `{"role": "user"|"assistant", "content": str}` dicts."""
    thread_id: str | None
    """The conversation thread the turn came from."""
    speaker: str | None
    """Who said the turn's user messages: the user's name (default: the run's user id). Each
    memory records whom it is about (`subject`) when that is someone else."""
    chat_ids: list[str]
    """The turn's messages in the user's chat history: each memory keeps them (`turn_ids`)."""
    turn_id: str | None
    """On a server without delayed runs (Aegra): this turn's id; the run extracts only while it is
    still the conversation's latest scheduled turn (graphs/runtime/memory_schedule.py)."""
    not_before: float | None
    """With `turn_id`: Unix time the run waits for before extracting (the debounce delay)."""
    result: dict
    """Counts written: created, updated, profile_fields."""
