"""State of the `router` graph."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langchain_core.messages import AnyMessage, HumanMessage
from typing_extensions import TypedDict

from graphs.runtime.state import Messages
from graphs.runtime.ui import UIMessages


def question_of(messages: list[AnyMessage]) -> str:
    """The text of the turn's question: the last message when the user sent it, else ""."""
    return messages[-1].text if messages and isinstance(messages[-1], HumanMessage) else ""


def per_turn(left: list | None, right: list | None) -> list:
    """Append within a turn; `None` starts the list afresh (sent once at the start of a turn)."""
    if right is None:
        return []
    return [*(left or []), *right]


class FeedbackInput(TypedDict, total=False):
    """Feedback on one answer of this thread."""

    run_id: str
    """The run that produced the answer (`runs.stream` / `runs.create` return it)."""
    score: str
    """"up" or "down"."""
    comment: str


class InputState(TypedDict, total=False):
    """What a caller sends: new messages, and/or `clear` / `feedback`."""

    messages: Messages
    clear: bool
    """True empties the thread's messages and summary (long-term memory is untouched)."""
    feedback: FeedbackInput | None
    """Up/down + comment against a run of this thread."""


class State(InputState, total=False):
    """The thread's state: what clients render and evals read back."""

    summary: str
    """Summary of older turns (kept by the sub-agents' history summarization)."""
    decision: dict[str, Any]
    """The last `RouteDecision` (seed fields plus `route`)."""
    plan: list[dict]
    """Run specs of the retrieval route: {"agent_type", "worker_name"}."""
    worker_runs: Annotated[list[dict], per_turn]
    """This turn's worker results (evidence before merging)."""
    sources: list[dict]
    """The numbered sources of the last retrieval answer: index, kb, chunk_id, source, title, locator, ..."""
    citation_check: dict
    """Citations of the last retrieval answer: cited, invalid, unknown_urls."""
    execution_log: Annotated[list[dict], operator.add]
    """One entry per worker run (and per tool call of sub-agents): timing, status, counts."""
    answered_runs: Annotated[list[dict], operator.add]
    """{"run_id", "route", "message_id"} of each answered turn: what feedback may refer to."""
    feedback_log: Annotated[list[dict], operator.add]
    """Feedback left on this thread's answers."""
    seen_message_id: str | None
    """The last message the router has handled: later ones are a run's new input."""
    answering: bool
    """Whether this run's input brought a question to answer."""
    ui: UIMessages
    """Generative-UI cards of the thread's runs (docs/events.md), for chat clients."""
    pending: dict[str, Any] | None
    """A sub-agent's question to the user the thread waits on: {"route", "value" (the interrupt
    value, a standard HITL request), "reply" once answered}; None when nothing waits."""
