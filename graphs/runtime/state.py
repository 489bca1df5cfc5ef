"""State pieces every graph shares: the `messages` channel clients read and write.

Every graph keeps the conversation under the state key `messages` with standard message types
(what LangGraph clients such as agent-chat-ui expect). Graphs build their input and state
TypedDicts on `MessagesInput`.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage, convert_to_messages
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

Messages = Annotated[list[AnyMessage], add_messages]
"""The `messages` channel: new messages are appended, a message with a known id replaces it."""


class MessagesInput(TypedDict):
    """What a caller sends to any graph: new messages, appended to the thread."""

    messages: Messages


def check_input_messages(raw: Any) -> None:
    """Raise ValueError with a clear message when a run's input `messages` would break a thread.

    Checked before the run is created (server/api_checks.py): every item must convert to a standard
    message (unknown roles are refused), an assistant message's tool calls must be answered by
    tool messages in the same input, and every tool message must answer such a call.
    """
    if raw is None:
        return
    items = raw if isinstance(raw, list) else [raw]
    calls: set[str] = set()
    for index, item in enumerate(items):
        try:
            (message,) = convert_to_messages([item])
        except (ValueError, TypeError, NotImplementedError) as exc:
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"input messages[{index}]: {first_line}") from None
        if isinstance(message, AIMessage):
            calls.update(call_id for call in message.tool_calls if (call_id := call.get("id")))
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in calls:
                raise ValueError(
                    f"input messages[{index}]: tool message for call {message.tool_call_id!r}, "
                    "which no assistant message before it in this input made"
                )
            calls.discard(message.tool_call_id)
    if calls:
        raise ValueError(
            f"input messages: assistant tool call(s) {', '.join(sorted(calls))} have no tool message with their result"
        )
