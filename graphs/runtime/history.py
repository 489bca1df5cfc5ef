"""Keep a thread inside the model's budget: summarize older turns, never split a tool pair.

Providers reject an AI message whose tool calls lack their results, and a tool result without
its call, so the cut between summarized and kept messages always falls before a human message or
an AI message, never before a tool result.
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately, get_buffer_string

SUMMARY_PROMPT = """Summarize the conversation below for the assistant's own later use.
Keep user facts, goals and preferences, decisions made, tool results that still matter
(numbers, names, URLs) and open questions. Be concise; write in the conversation's language.

{previous}Conversation:
{conversation}"""


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
    model: BaseChatModel, messages: list[AnyMessage], previous_summary: str, budget_tokens: int
) -> tuple[str, list[RemoveMessage], int] | None:
    """Summarize the older messages; return (summary, removals, kept count), or None if nothing to cut."""
    cut = cut_index(messages, budget_tokens // 2)
    if cut <= 0:
        return None
    old = messages[:cut]
    previous = f"Earlier summary:\n{previous_summary}\n\n" if previous_summary else ""
    prompt = SUMMARY_PROMPT.format(previous=previous, conversation=get_buffer_string(old))
    response = await model.ainvoke(
        [SystemMessage("You write faithful, compact conversation summaries."), HumanMessage(prompt)],
        config={"tags": ["langsmith:nostream", "summarize"]},
    )
    removals = [RemoveMessage(id=m.id) for m in old if m.id]
    return response.text, removals, len(messages) - cut
