"""The context schema every graph shares (LangGraph `context_schema`, read through `Runtime`).

A value set on the assistant or the run always wins; the environment only fills what the caller
left unset (each field's default is read from its environment variable when the run starts).
docs/configuration.md lists every field and variable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any


def _split(raw: str) -> list[str] | None:
    return [item.strip() for item in raw.split(",") if item.strip()] or None


def _truthy(raw: str) -> bool:
    return raw.strip().lower() in ("1", "true", "yes", "on")


def env_field(variable: str, default: str, parse: Callable[[str], Any], description: str) -> Any:
    """A field whose default is `parse($variable)`, or `parse(default)` when the variable is unset."""
    return field(
        default_factory=lambda: parse(os.environ.get(variable) or default),
        metadata={"description": f"{description} Env: {variable}."},
    )


@dataclass(kw_only=True)
class Context:
    """Per-run settings. Studio renders these fields; SDK clients pass them as `context`."""

    model: str = env_field(
        "AGENT_MODEL", "openai:gpt-4o-mini", str,
        "Chat model as 'provider:model', e.g. 'openai:gpt-4o-mini', or 'openai:qwen2.5' against "
        "OPENAI_BASE_URL (vLLM, Ollama, llama.cpp). Default openai:gpt-4o-mini.",
    )
    temperature: float = env_field("AGENT_TEMPERATURE", "0", float, "Sampling temperature (default 0).")
    max_steps: int = env_field(
        "AGENT_MAX_STEPS", "10", int,
        "Most model calls in one turn; reaching it ends the turn with an answer that says so (default 10).",
    )
    user_id: str = env_field(
        "AGENT_DEFAULT_USER_ID", "anonymous", str,
        "Whose memories and history the run may read and write. Set by the caller or the auth "
        "layer, never by the model (default 'anonymous').",
    )
    tools: list[str] | None = env_field(
        "AGENT_TOOLS", "", _split,
        "Names of the tools the agent may call; empty for every configured tool (env: comma-separated).",
    )
    system_prompt: str | None = field(
        default=None, metadata={"description": "Replaces the graph's system prompt when set."}
    )
    tool_timeout: float = env_field("AGENT_TOOL_TIMEOUT", "60", float, "Seconds one tool call may take (default 60).")
    tool_retries: int = env_field(
        "AGENT_TOOL_RETRIES", "2", int,
        "Retries of a tool call that failed transiently (timeout, 5xx, 429), with exponential backoff (default 2).",
    )
    model_retries: int = env_field(
        "AGENT_MODEL_RETRIES", "2", int,
        "Retries of a model call that failed transiently (connection, 429, 5xx) (default 2).",
    )
    context_window_tokens: int = env_field(
        "AGENT_CONTEXT_TOKENS", "24000", int,
        "Token budget of the conversation sent to the model; older turns are summarized past it (default 24000).",
    )
    remember: bool = env_field(
        "AGENT_REMEMBER", "true", _truthy,
        "Record each turn in the user's chat history and extract long-term memories from it in "
        "the background (needs a store) (default true).",
    )

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if not self.user_id.strip():
            raise ValueError("user_id must not be empty")
        if self.tools is not None and not isinstance(self.tools, list):
            raise ValueError("tools must be a list of tool names")


def context_fields() -> list[tuple[str, str]]:
    """(name, description) of every context field, for docs and tests."""
    return [(f.name, f.metadata.get("description", "")) for f in fields(Context)]
