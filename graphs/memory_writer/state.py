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
    """Who the memories are about: the user's name (default: the run's user id)."""
    result: dict
    """Counts written: created, updated, profile_fields."""
