"""Request bodies and error mapping of the model utility routes (server/http.py; the utilities
themselves are graphs/utilities/tasks.py)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from pydantic import BaseModel, ConfigDict, Field, field_validator

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


MODEL_FIELD = Field(None, description="'provider:model'; default AGENT_MODEL.")


class Space(BaseModel):
    """A space of the client (seed 000's Qurio): its other fields are returned as sent."""

    model_config = ConfigDict(extra="allow")
    label: str = Field(..., min_length=1, max_length=200)
    description: str | None = Field(None, max_length=2000)


class SpaceAgent(BaseModel):
    name: str = Field(..., min_length=1, max_length=200)
    description: str | None = Field(None, max_length=2000)


class SpaceWithAgents(Space):
    agents: list[SpaceAgent] = Field(default_factory=list, max_length=50)

    @field_validator("agents", mode="before")
    @classmethod
    def _names_alone(cls, value: object) -> object:
        """An agent may be sent as its name alone."""
        if isinstance(value, list):
            return [{"name": agent} if isinstance(agent, str) else agent for agent in value]
        return value


class TitleAndSpaceRequest(BaseModel):
    message: str = Field(..., min_length=1, max_length=10_000, description="The conversation's first message.")
    spaces: list[Space] = Field(default_factory=list, max_length=100)
    model: str | None = MODEL_FIELD


class TitleSpaceAgentRequest(BaseModel):
    message: str = Field(..., min_length=1, max_length=10_000, description="The conversation's first message.")
    spacesWithAgents: list[SpaceWithAgents] = Field(default_factory=list, max_length=100)
    model: str | None = MODEL_FIELD


class AgentForAutoRequest(BaseModel):
    message: str = Field(..., min_length=1, max_length=10_000)
    currentSpace: SpaceWithAgents
    model: str | None = MODEL_FIELD


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
