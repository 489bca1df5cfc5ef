"""State of the `react` graph."""

from __future__ import annotations

import operator
from typing import Annotated

from langchain_core.messages import AIMessage

from graphs.runtime.state import MessagesInput
from graphs.runtime.ui import UIMessages

InputState = MessagesInput


class State(InputState, total=False):
    """The thread's state: messages plus what clients and evals read back."""

    steps: int
    """Model calls made in the current turn (reset when a new human message arrives)."""
    summary: str
    """Summary of older turns removed from `messages` to stay inside the model's budget."""
    execution_log: Annotated[list[dict], operator.add]
    """One entry per tool call: tool, args, status, duration_ms, attempts, step, tool_call_id."""
    turn_tools: list[str] | None
    """Names of the tools offered on the current turn's first model call. The turn's later calls
    offer the same ones, even when a tool changed what the user has (a memory saved mid-turn), so
    their prompt starts as the first call's did and the model server's prefix cache reuses it."""
    turn_recall: str
    """The memories recalled for the current turn's message (graphs/runtime/memory_recall.py),
    as the note its first model call showed; the turn's later calls show the same note."""
    pending_tool_calls: AIMessage | None
    """The model's message asking for tools while they run (None otherwise). It joins `messages`
    together with its results, so `messages` never holds a tool call without its result, however
    the run stops (cancelled, recursion limit, a crash). After a stop here (`next` is `tools`),
    a run with no input runs them; a new message drops them."""
    ui: UIMessages
    """Generative-UI cards of the thread's runs (docs/events.md), for chat clients."""
