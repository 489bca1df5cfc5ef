"""Custom stream events (`stream_mode="custom"`): one shape for every graph.

Each event is a dict `{"event": <kind>, "ts": <unix seconds>, ...fields}`. Tokens are not here:
they travel on the standard `messages` stream. `EVENT_FIELDS` is the catalogue; docs/events.md
documents each kind and a test checks the two agree.
"""

from __future__ import annotations

import time
from typing import Any

from langgraph.config import get_stream_writer

EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "step": ("step", "max_steps"),
    "thinking": ("step", "text"),
    "tool_call_started": ("step", "tool_call_id", "name", "args"),
    "tool_call_retrying": ("step", "tool_call_id", "name", "attempt", "error", "delay_s"),
    "tool_call_finished": ("step", "tool_call_id", "name", "duration_ms", "result_preview"),
    "tool_call_failed": ("step", "tool_call_id", "name", "duration_ms", "error", "error_type", "attempts"),
    "step_limit_reached": ("step", "max_steps"),
    "history_summarized": ("summarized_messages", "kept_messages"),
    "model_retrying": ("step", "attempt", "error", "delay_s"),
    "model_error": ("step", "error", "error_type"),
}

_PREVIEW_CHARS = 500


def emit(kind: str, **fields: Any) -> dict:
    """Send one custom event to the run's stream (a no-op outside a streaming run)."""
    expected = EVENT_FIELDS.get(kind)
    if expected is None:
        raise ValueError(f"unknown event kind {kind!r}; add it to EVENT_FIELDS and docs/events.md")
    missing = set(expected) - set(fields)
    if missing:
        raise ValueError(f"event {kind!r} lacks fields {sorted(missing)}")
    event = {"event": kind, "ts": round(time.time(), 3), **fields}
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return event
    writer(event)
    return event


def preview(value: Any, limit: int = _PREVIEW_CHARS) -> str:
    """A short text form of a tool result for events (the full result is in the ToolMessage)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"
