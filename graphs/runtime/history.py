"""Keep a thread inside the model's budget: summarize older turns, never split a tool pair.

Providers reject an AI message whose tool calls lack their results, and a tool result without
its call, so the cut between summarized and kept messages always falls before a human message or
an AI message, never before a tool result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately, get_buffer_string

from graphs.runtime.prompts import SUMMARY_PROMPT, SUMMARY_SYSTEM

CANCELLED_TOOL_RESULT = (
    "Tool call cancelled: no result was recorded (the run was interrupted or stopped before this call finished)."
)


def repair_tool_history(messages: list[AnyMessage]) -> list[AnyMessage]:
    """The messages with every tool call answered and every tool result attached to its call.

    A run interrupted while its tools ran (or stopped by a recursion limit) leaves an AI message
    whose tool calls have no results; OpenAI-compatible servers reject such a history. Each
    missing result becomes an error ToolMessage saying the call was cancelled, placed after the
    results that do exist; a tool result whose call is nowhere before it is dropped. Returns the
    list unchanged (the same object) when nothing needed repair.
    """
    repaired: list[AnyMessage] = []
    pending: dict[str, str] = {}
    changed = False

    def close_pending() -> None:
        nonlocal changed
        for call_id, name in pending.items():
            repaired.append(ToolMessage(CANCELLED_TOOL_RESULT, tool_call_id=call_id, name=name, status="error"))
            changed = True
        pending.clear()

    answered: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id in pending:
                pending.pop(message.tool_call_id)
                answered.add(message.tool_call_id)
                repaired.append(message)
            else:
                changed = True  # an orphan result (or a second one for the same call)
            continue
        close_pending()
        repaired.append(message)
        if isinstance(message, AIMessage):
            pending = {
                call_id: call["name"]
                for call in message.tool_calls
                if (call_id := call.get("id")) and call_id not in answered
            }
    close_pending()
    return repaired if changed else messages


def last_turn(messages: Sequence[BaseMessage]) -> list[dict]:
    """The last user message and the final answer after it, as role/content dicts."""
    turn: list[dict] = []
    for message in reversed(messages):
        if isinstance(message, AIMessage) and not turn and message.text.strip():
            turn.append({"role": "assistant", "content": message.text})
        elif isinstance(message, HumanMessage):
            turn.append({"role": "user", "content": message.text})
            break
    return list(reversed(turn))


def cut_index(messages: list[AnyMessage], keep_tokens: int) -> int:
    """Index of the first message to keep so the kept tail fits `keep_tokens` where possible.

    The tail always keeps at least the last complete turn segment, and never starts with a
    ToolMessage (which would orphan it from the AI message that called it).
    """
    index = len(messages)
    used = 0
    while index > 0:
        cost = count_tokens_approximately([messages[index - 1]])
        if used + cost > keep_tokens and index < len(messages):
            break
        used += cost
        index -= 1
    # Step back over tool results to the AI message that made those calls.
    while 0 < index < len(messages) and isinstance(messages[index], ToolMessage):
        index -= 1
    return index


def needs_summary(messages: list[AnyMessage], budget_tokens: int) -> bool:
    """Whether the messages exceed the token budget."""
    return count_tokens_approximately(messages) > budget_tokens


async def summarize(
    invoke: Callable[[list[AnyMessage]], Awaitable[AIMessage]],
    messages: list[AnyMessage],
    previous_summary: str,
    budget_tokens: int,
) -> tuple[str, list[RemoveMessage], int] | None:
    """Summarize the older messages with `invoke` (a model call); return (summary, removals,
    kept count), or None if nothing to cut. The text sent is capped at the budget: a huge tool
    result is cut, so the summary call itself always fits the model's window."""
    cut = cut_index(messages, budget_tokens // 2)
    if cut <= 0:
        return None
    old = messages[:cut]
    previous = f"Earlier summary:\n{previous_summary}\n\n" if previous_summary else ""
    conversation = get_buffer_string(old)
    limit = budget_tokens * 3  # ~4 characters a token; leaves room for the prompt and the answer
    if len(conversation) > limit:
        conversation = conversation[: limit // 2] + "\n[... cut ...]\n" + conversation[-limit // 2 :]
    prompt = SUMMARY_PROMPT.format(previous=previous, conversation=conversation)
    response = await invoke([SystemMessage(SUMMARY_SYSTEM), HumanMessage(prompt)])
    removals = [RemoveMessage(id=m.id) for m in old if m.id]
    return response.text, removals, len(messages) - cut
