"""The utilities as plain async functions over the shared model factory (timeouts, retries,
validated structured output). A missing or unusable model raises `ModelConfigError`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import get_buffer_string
from pydantic import BaseModel, Field

from graphs.runtime.context import Context
from graphs.runtime.models import load_chat_model
from graphs.runtime.structured import ainvoke_structured
from graphs.utilities.prompts import RELATED_PROMPT, TIP_PROMPT, TITLE_PROMPT

MAX_CONVERSATION_CHARS = 8000


class Title(BaseModel):
    """A short title for a conversation."""

    title: str = Field(min_length=1, max_length=120)


class RelatedQuestions(BaseModel):
    """Follow-up questions to an answer."""

    questions: list[str] = Field(min_length=1, max_length=10)


class DailyTip(BaseModel):
    """One practical tip."""

    tip: str = Field(min_length=1, max_length=1000)


async def ask(context: Context, schema: type[BaseModel], prompt: str) -> BaseModel:
    """`schema` filled in by the context's model for `prompt` (validated structured output)."""
    model = load_chat_model(context.model, temperature=context.temperature, timeout=context.model_timeout)
    messages: list[AnyMessage] = [HumanMessage(prompt)]
    result = await ainvoke_structured(
        model, schema, messages, None, retries=context.model_retries, step=1, timeout=context.model_timeout
    )
    return result.value


async def conversation_title(messages: Sequence[BaseMessage], context: Context) -> str:
    """A short title for the conversation in `messages`."""
    conversation = get_buffer_string(list(messages))[-MAX_CONVERSATION_CHARS:]
    result = await ask(context, Title, TITLE_PROMPT.format(conversation=conversation))
    assert isinstance(result, Title)
    return clean_title(result.title)


def clean_title(title: str) -> str:
    """A model's title without surrounding quotes, spaces and a final period."""
    return title.strip().strip('"').rstrip(".")


async def related_questions(question: str, answer: str, context: Context, count: int = 3) -> list[str]:
    """`count` follow-up questions to `question` and its `answer` (duplicates removed)."""
    prompt = RELATED_PROMPT.format(count=count, question=question, answer=answer[:MAX_CONVERSATION_CHARS])
    result = await ask(context, RelatedQuestions, prompt)
    assert isinstance(result, RelatedQuestions)
    unique = list(dict.fromkeys(q.strip() for q in result.questions if q.strip()))
    return unique[:count]


async def daily_tip(context: Context, topic: str | None = None) -> dict:
    """Today's tip (on `topic` when given) and the date it is for (UTC)."""
    today = datetime.now(UTC).date().isoformat()
    prompt = TIP_PROMPT.format(today=today, topic=f", about: {topic}" if topic else "")
    result = await ask(context, DailyTip, prompt)
    assert isinstance(result, DailyTip)
    return {"tip": result.tip.strip(), "date": today}
