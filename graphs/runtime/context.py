"""The context schema every graph shares (LangGraph `context_schema`, read through `Runtime`).

A value set on the assistant or the run always wins; the environment only fills what the caller
left unset (each field's default is read from its environment variable when the run starts).
docs/configuration.md lists every field and variable.

Every value is checked when the run's context is built, before the run writes anything to the
thread: a wrong type or a value out of its range is one `ValueError` naming the field and what it
accepts. Graphs add their own fields by subclassing `Context` with `env_field("VARIABLE")`
fields; the variable (type, default, bounds, description) is declared once in settings/.
"""

from __future__ import annotations

import ipaddress
import math
import types
import typing
from dataclasses import dataclass, field, fields, replace
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from pydantic import TypeAdapter, ValidationError

from graphs.runtime.models import check_model_spec, report_ignored
from settings import bounds, describe, settings


def env_field(variable: str) -> Any:
    """A context field whose default is the setting `variable` (settings/), read when the run
    starts; its bounds and description come from the same setting, so Studio shows them."""
    low, high = bounds(variable)
    shown = ""
    if low is not None or high is not None:
        shown = f" Range {'-inf' if low is None else f'{low:g}'}..{'inf' if high is None else f'{high:g}'}."
    return field(
        default_factory=lambda: getattr(settings(), variable),
        metadata={
            "description": f"{describe(variable)}{shown} Env: {variable}.",
            "minimum": low,
            "maximum": high,
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
    cls: type = type(context)  # annotated: mypy does not see `type[Any]` as Hashable for @cache
    hints = _hints(cls)
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
        numeric = isinstance(coerced, (int, float)) and not isinstance(coerced, bool)
        if numeric and ((low is not None and coerced < low) or (high is not None and coerced > high)):
            raise ValueError(
                f"Invalid context field `{spec.name}`: {value!r} is out of range "
                f"{'-inf' if low is None else f'{low:g}'}..{'inf' if high is None else f'{high:g}'}."
            )
        object.__setattr__(context, spec.name, coerced)


DEFAULT_MODEL_TIMEOUT = 120.0
TOOL_CHOICES = ("auto", "none", "required")
"""`tool_choice` values besides a tool's name."""
CALCULATION_MODES = ("after", "before", "off")
"""When a numeric word problem's calculation is asked for (graphs/runtime/calculation.py)."""
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


def default_model_timeout(model: str) -> float:
    """Seconds per model call when the run and AGENT_MODEL_TIMEOUT leave it unset: 120, or
    AGENT_LOCAL_MODEL_TIMEOUT for an `openai:*` model served on this machine (`OPENAI_BASE_URL`
    on a loopback host), whose first call on a CPU reads a long prompt for minutes."""
    config = settings()
    if model.startswith("openai:") and is_loopback_url(config.OPENAI_BASE_URL):
        return float(config.AGENT_LOCAL_MODEL_TIMEOUT)
    return DEFAULT_MODEL_TIMEOUT


def is_loopback_url(url: str | None) -> bool:
    """True when `url`'s host is this machine (localhost, 127.0.0.0/8, ::1)."""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(kw_only=True)
class Context:
    """Per-run settings. Studio renders these fields; SDK clients pass them as `context`."""

    model: str = env_field("AGENT_MODEL")
    temperature: float = env_field("AGENT_TEMPERATURE")
    top_p: float | None = env_field("AGENT_TOP_P")
    max_tokens: int | None = env_field("AGENT_MAX_TOKENS")
    tool_choice: str | None = env_field("AGENT_TOOL_CHOICE")
    reasoning_effort: str | None = env_field("AGENT_REASONING_EFFORT")
    max_steps: int = env_field("AGENT_MAX_STEPS")
    user_id: str = env_field("AGENT_DEFAULT_USER_ID")
    tools: list[str] | None = env_field("AGENT_TOOLS")
    system_prompt: str | None = field(
        default=None, metadata={"description": "Replaces the graph's system prompt when set."}
    )
    tool_timeout: float = env_field("AGENT_TOOL_TIMEOUT")
    tool_retries: int = env_field("AGENT_TOOL_RETRIES")
    model_timeout: float | None = env_field("AGENT_MODEL_TIMEOUT")
    model_retries: int = env_field("AGENT_MODEL_RETRIES")
    context_window_tokens: int = env_field("AGENT_CONTEXT_TOKENS")
    remember: bool = env_field("AGENT_REMEMBER")
    recall_top_k: int = env_field("AGENT_RECALL_TOP_K")
    recall_max_tokens: int = env_field("AGENT_RECALL_MAX_TOKENS")
    recall_answer_similarity: float = env_field("AGENT_RECALL_ANSWER_SIMILARITY")
    recover_tool_calls: bool = env_field("AGENT_RECOVER_TOOL_CALLS")
    calculation: str = env_field("AGENT_CALCULATION")
    run_timeout: float = env_field("AGENT_RUN_TIMEOUT")

    def sampling(self) -> dict[str, Any]:
        """The model parameters of the run's answers to the user (`load_chat_model` keywords):
        temperature, top_p, max_tokens, reasoning_effort. The graphs' structured calls take the
        temperature only."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
        }

    def tool_choice_for(self, first_call: bool) -> str | None:
        """The `tool_choice` of a model call offering tools: `none` on every call of the turn;
        `required` or a tool's name on the turn's first call only (later calls decide, so the
        turn can end with an answer); None (the provider's default, `auto`) otherwise."""
        if self.tool_choice in (None, "auto"):
            return None
        if self.tool_choice == "none" or first_call:
            return self.tool_choice
        return None

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.model_timeout is None:  # unset: what fits the model's endpoint
            object.__setattr__(self, "model_timeout", default_model_timeout(self.model))
        if self.reasoning_effort is not None and self.reasoning_effort not in REASONING_EFFORTS:
            raise ValueError(
                f"Invalid context field `reasoning_effort`: {self.reasoning_effort!r} is not one of "
                f"{', '.join(REASONING_EFFORTS)}."
            )
        if self.calculation not in CALCULATION_MODES:
            raise ValueError(
                f"Invalid context field `calculation`: {self.calculation!r} is not one of {', '.join(CALCULATION_MODES)}."
            )
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
        self._check_tool_choice()

    def restricted_to(self, tools: list[str]) -> Context:
        """This context with only `tools` offered (a sub-agent with fewer tools). A `tool_choice`
        naming a tool outside them is dropped, and a `model_parameter_ignored` event says so."""
        choice = self.tool_choice
        if choice is not None and choice not in TOOL_CHOICES and choice not in tools:
            report_ignored(
                "tool_choice", choice, self.model, f"this agent offers only {', '.join(tools) or 'no tools'}"
            )
            choice = None
        return replace(self, tools=tools, tool_choice=choice)

    def _check_tool_choice(self) -> None:
        choice = self.tool_choice
        if choice is None or choice in TOOL_CHOICES:
            return
        from tools.registry import check_tool_names

        try:
            check_tool_names([choice])
        except ValueError:
            raise ValueError(
                f"Invalid context field `tool_choice`: {choice!r} is neither one of "
                f"{', '.join(TOOL_CHOICES)} nor a tool's name."
            ) from None
        if self.tools is not None and choice not in self.tools:
            raise ValueError(
                f"Invalid context field `tool_choice`: {choice!r} is not one of the run's `tools` ({', '.join(self.tools)})."
            )


def context_fields(schema: type = Context) -> list[tuple[str, str]]:
    """(name, description) of every field of a context schema, for docs and tests."""
    return [(f.name, f.metadata.get("description", "")) for f in fields(schema)]
