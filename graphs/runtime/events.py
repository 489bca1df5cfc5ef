"""Custom stream events (`stream_mode="custom"`): one shape for every graph.

Each event is a dict `{"event": <kind>, "ts": <unix seconds>, ...fields}`. Tokens are not here:
they travel on the standard `messages` stream. `EVENT_FIELDS` is the catalogue; docs/events.md
documents each kind and a test checks the two agree.
"""

from __future__ import annotations

import time
from typing import Any

from langgraph.config import get_stream_writer

from graphs.runtime.ui import push_for_event

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
    "model_usage": ("step", "input_tokens", "cached_tokens", "output_tokens"),
    "model_parameter_ignored": ("parameter", "value", "model", "reason"),
    "tool_calls_recovered": ("step", "recovered", "invalid", "names", "errors", "reasked"),
    "structured_output_failed": ("schema", "attempts", "error", "method"),
    "calculation_requested": ("step", "when", "expression", "from_draft"),
    "answer_checked": ("step", "computed", "stated", "note"),
    "memory_answer": ("step", "answered", "memory"),
    "tool_call_corrected": ("step", "name", "error", "args"),
    "run_deadline_exceeded": ("deadline_s", "elapsed_s", "stage"),
    # router
    "route_decided": (
        "requested_kb_prefix",
        "routed_kb_prefix",
        "kb_prefix",
        "confidence",
        "method",
        "reason",
        "worker_name",
        "route",
    ),
    "progress": ("stage", "completed", "total", "agent_type", "retrieval_count", "error"),
    "worker_failed": ("worker_name", "agent_type", "error", "error_type"),
    "evidence": ("worker_name", "agent_type", "paths"),
    "router_error": ("stage", "error"),
    "conversation_cleared": ("removed_messages",),
    "feedback_recorded": ("run_id", "score", "sink"),
    # plan_execute
    "plan_created": ("steps", "attempts"),
    "plan_invalid": ("stage", "attempt", "error"),
    "plan_failed": ("error", "attempts"),
    "plan_reviewed": ("action", "steps"),
    "plan_step_started": ("step_id", "description", "tool", "args", "wave"),
    "plan_step_recovered": ("step_id", "recovery", "attempts", "error"),
    "plan_step_completed": ("step_id", "status", "duration_ms", "attempts", "result_preview"),
    "plan_step_failed": ("step_id", "error", "attempts", "duration_ms"),
    "plan_step_skipped": ("step_id", "status", "reason"),
    "replan": ("replan", "action", "reason", "steps", "failed_steps"),
    "synthesis_started": ("status", "failed_steps"),
    # deep_research
    "clarification_requested": ("question",),
    "research_brief": ("brief",),
    "research_plan": ("sub_questions", "queries", "dropped"),
    "research_round": ("round", "wave", "sub_questions", "pending"),
    "researcher_started": ("researcher_id", "round", "question", "queries"),
    "researcher_finished": (
        "researcher_id",
        "round",
        "question",
        "status",
        "sources_found",
        "sources_read",
        "error",
    ),
    "research_reflection": ("round", "gaps", "dropped"),
    "notes_truncated": ("stage", "reason", "tokens_before", "tokens_after"),
    "report_writing": ("sources", "notes", "notes_tokens"),
    "citations_checked": ("cited", "removed", "invented_urls", "invalid_numbers"),
    "research_failed": ("error", "failures"),
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
    push_for_event(event)  # the same progress as a generative-UI message for chat clients
    return event


def preview(value: Any, limit: int = _PREVIEW_CHARS) -> str:
    """A short text form of a tool result for events (the full result is in the ToolMessage)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"
