"""Request bodies and error mapping of the model utility routes (server/http.py; the utilities
themselves are graphs/utilities/tasks.py)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from pydantic import BaseModel, Field

from graphs.runtime.context import Context
from graphs.runtime.models import ModelCallError, ModelConfigError
from server.errors import ApiError


class ChatMessage(BaseModel):
    role: str = Field(..., pattern=r"^(user|assistant|system)$")
    content: str = Field(..., max_length=100_000)


class TitleRequest(BaseModel):
    messages: list[ChatMessage] = Field(..., min_length=1, max_length=200)
    model: str | None = Field(None, description="'provider:model'; default AGENT_MODEL.")


class RelatedRequest(BaseModel):
    question: str = Field(..., min_length=1, max_length=10_000)
    answer: str = Field(..., min_length=1, max_length=100_000)
    count: int = Field(3, ge=1, le=10)
    model: str | None = Field(None, description="'provider:model'; default AGENT_MODEL.")


@contextlib.asynccontextmanager
async def model_errors(model: str | None) -> AsyncIterator[Context]:
    """The run context for `model` (default AGENT_MODEL); model failures become API errors:
    an unusable model MODEL_NOT_AVAILABLE (400), a failed call MODEL_ERROR (502)."""
    try:
        context = Context(model=model) if model else Context()
    except ValueError as exc:
        raise ApiError("VALIDATION_ERROR", str(exc), {"errors": [{"field": "model", "message": str(exc)}]}) from None
    try:
        yield context
    except ModelConfigError as exc:
        raise ApiError("MODEL_NOT_AVAILABLE", str(exc)) from None
    except (ModelCallError, ValueError) as exc:
        raise ApiError("MODEL_ERROR", str(exc)) from None
