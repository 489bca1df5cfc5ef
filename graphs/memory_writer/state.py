"""State of the `memory_writer` graph."""

from __future__ import annotations

from typing_extensions import TypedDict


class State(TypedDict, total=False):
    """A run of the writer for one conversation. Each run replaces these (no reducer): the thread
    only debounces; the turns to extract wait in the store (graphs/memory_writer/pending.py)."""

    messages: list[dict]
    """A turn given directly, as `{"role": "user"|"assistant", "content": str}` dicts: queued
    with the conversation's pending turns and extracted with them (scheduled runs send none)."""
    thread_id: str | None
    """The conversation thread the turn came from."""
    speaker: str | None
    """Who said the turn's user messages: the user's name (default: the run's user id). Each
    memory records whom it is about (`subject`) when that is someone else."""
    chat_ids: list[str]
    """The messages of the turn given in `messages` in the user's chat history: each memory
    keeps them (`turn_ids`)."""
    turn_id: str | None
    """On a server without delayed runs (Aegra): this turn's id; the run extracts only while it is
    still the conversation's latest scheduled turn (graphs/runtime/memory_schedule.py)."""
    not_before: float | None
    """With `turn_id`: Unix time the run waits for before extracting (the debounce delay)."""
    deferrals: int
    """How many times this run's schedule yielded to a run in progress in the conversation."""
    result: dict
    """Counts written: created, updated, profile_fields."""
