"""The context schema every graph shares (LangGraph `context_schema`, read through `Runtime`).

A value set on the assistant or the run always wins; the environment only fills what the caller
left unset (each field's default is read from its environment variable when the run starts).
docs/configuration.md lists every field and variable.

Every value is checked when the run's context is built, before the run writes anything to the
thread: a wrong type or a value out of its range is one `ValueError` naming the field and what it
accepts. Graphs add their own fields by subclassing `Context` with `env_field(...)` fields;
bounds given there are checked the same way.
"""

from __future__ import annotations

import math
import os
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from graphs.runtime.models import check_model_spec


def parse_list(raw: str) -> list[str] | None:
    """Comma-separated names from the environment; None when empty."""
    return [item.strip() for item in raw.split(",") if item.strip()] or None


def parse_bool(raw: str) -> bool:
    """An environment flag: 1/true/yes/on (any case) is true, anything else false."""
    return raw.strip().lower() in ("1", "true", "yes", "on")


def parse_optional(raw: str) -> str | None:
    """An optional string from the environment; None when empty."""
    return raw.strip() or None


def env_field(
    variable: str,
    default: str,
    parse: Callable[[str], Any],
    description: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
) -> Any:
    """A field whose default is `parse($variable)`, or `parse(default)` when the variable is unset.

    `minimum` / `maximum` bound a numeric field (inclusive); they are checked on every run and
    shown in the description.
    """
    bounds = ""
    if minimum is not None or maximum is not None:
        low = "-inf" if minimum is None else f"{minimum:g}"
        high = "inf" if maximum is None else f"{maximum:g}"
        bounds = f" Range {low}..{high}."
    return field(
        default_factory=lambda: parse(os.environ.get(variable) or default),
        metadata={
            "description": f"{description}{bounds} Env: {variable}.",
            "minimum": minimum,
            "maximum": maximum,
            "env": variable,
        },
    )


@cache
def _adapter(hint: Any) -> TypeAdapter:
    return TypeAdapter(hint)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _type_name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return " or ".join(_type_name(arg) for arg in typing.get_args(hint))
    return str(hint).replace("typing.", "")


def validate_fields(context: Any) -> None:
    """Check and coerce every field of a context dataclass by its type hint and bounds.

    Raises ValueError("Invalid context field `name`: ...") for the first bad value. Strings are
    not turned into numbers or flags (`max_steps="abc"`, `remember="maybe"` are refused); whole
    floats are accepted for integers.
    """
    hints = _hints(type(context))
    for spec in fields(context):
        value = getattr(context, spec.name)
        hint = hints[spec.name]
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"Invalid context field `{spec.name}`: {value!r} is not a finite number.")
        try:
            coerced = _adapter(hint).validate_python(value, strict=not isinstance(value, float))
        except ValidationError:
            raise ValueError(
                f"Invalid context field `{spec.name}`: expected {_type_name(hint)}, got {value!r}."
            ) from None
        low, high = spec.metadata.get("minimum"), spec.metadata.get("maximum")
        if isinstance(coerced, (int, float)) and not isinstance(coerced, bool):
            if (low is not None and coerced < low) or (high is not None and coerced > high):
                raise ValueError(
                    f"Invalid context field `{spec.name}`: {value!r} is out of range "
                    f"{'-inf' if low is None else f'{low:g}'}..{'inf' if high is None else f'{high:g}'}."
                )
        object.__setattr__(context, spec.name, coerced)


@dataclass(kw_only=True)
class Context:
    """Per-run settings. Studio renders these fields; SDK clients pass them as `context`."""

    model: str = env_field(
        "AGENT_MODEL", "openai:gpt-4o-mini", str,
        "Chat model as 'provider:model', e.g. 'openai:gpt-4o-mini', or 'openai:qwen2.5' against "
        "OPENAI_BASE_URL (vLLM, Ollama, llama.cpp). Default openai:gpt-4o-mini.",
    )
    temperature: float = env_field(
        "AGENT_TEMPERATURE", "0", float, "Sampling temperature (default 0).", minimum=0, maximum=2
    )
    max_steps: int = env_field(
        "AGENT_MAX_STEPS", "10", int,
        "Most model calls in one turn; reaching it ends the turn with an answer that says so (default 10).",
        minimum=1, maximum=100,
    )
    user_id: str = env_field(
        "AGENT_DEFAULT_USER_ID", "anonymous", str,
        "Whose memories and history the run may read and write. Set by the caller or the auth "
        "layer, never by the model (default 'anonymous').",
    )
    tools: list[str] | None = env_field(
        "AGENT_TOOLS", "", parse_list,
        "Names of the tools the agent may call; empty for every configured tool (env: comma-separated).",
    )
    system_prompt: str | None = field(
        default=None, metadata={"description": "Replaces the graph's system prompt when set."}
    )
    tool_timeout: float = env_field(
        "AGENT_TOOL_TIMEOUT", "60", float, "Seconds one tool call may take (default 60).",
        minimum=0.1, maximum=3600,
    )
    tool_retries: int = env_field(
        "AGENT_TOOL_RETRIES", "2", int,
        "Retries of a tool call that failed transiently (timeout, 5xx, 429), with exponential backoff (default 2).",
        minimum=0, maximum=10,
    )
    model_timeout: float = env_field(
        "AGENT_MODEL_TIMEOUT", "120", float,
        "Seconds one model call may take in all (streaming included) before it counts as failed "
        "and is retried (default 120).",
        minimum=1, maximum=3600,
    )
    model_retries: int = env_field(
        "AGENT_MODEL_RETRIES", "2", int,
        "Retries of a model call that failed transiently (connection, timeout, 429, 5xx) (default 2).",
        minimum=0, maximum=10,
    )
    context_window_tokens: int = env_field(
        "AGENT_CONTEXT_TOKENS", "24000", int,
        "Token budget of the conversation sent to the model; older turns are summarized past it (default 24000).",
        minimum=256, maximum=10_000_000,
    )
    remember: bool = env_field(
        "AGENT_REMEMBER", "true", parse_bool,
        "Record each turn in the user's chat history and extract long-term memories from it in "
        "the background (needs a store) (default true).",
    )

    def __post_init__(self) -> None:
        validate_fields(self)
        if not self.user_id.strip():
            raise ValueError("Invalid context field `user_id`: must not be empty.")
        try:
            check_model_spec(self.model)
        except ValueError as exc:
            raise ValueError(f"Invalid context field `model`: {exc}") from None
        if self.tools is not None:
            from tools.registry import check_tool_names

            try:
                check_tool_names(self.tools)
            except ValueError as exc:
                raise ValueError(f"Invalid context field `tools`: {exc}") from None


def context_fields(schema: type = Context) -> list[tuple[str, str]]:
    """(name, description) of every field of a context schema, for docs and tests."""
    return [(f.name, f.metadata.get("description", "")) for f in fields(schema)]

