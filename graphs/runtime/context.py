"""The context schema every graph shares (LangGraph `context_schema`, read through `Runtime`).

A value set on the assistant or the run always wins; the environment only fills what the caller
left unset (each field's default is read from its environment variable when the run starts).
docs/configuration.md lists every field and variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields


@dataclass(kw_only=True)
class Context:
    """Per-run settings. Studio renders these fields; SDK clients pass them as `context`."""

    model: str = field(
        default_factory=lambda: os.environ.get("AGENT_MODEL") or "openai:gpt-4o-mini",
        metadata={
            "description": "Chat model as 'provider:model', e.g. 'openai:gpt-4o-mini' or "
            "'openai:qwen2.5' against OPENAI_BASE_URL (vLLM, Ollama, llama.cpp). Env: AGENT_MODEL."
        },
    )
    temperature: float = field(
        default_factory=lambda: float(os.environ.get("AGENT_TEMPERATURE") or 0.0),
        metadata={"description": "Sampling temperature. Env: AGENT_TEMPERATURE (default 0)."},
    )
    max_steps: int = field(
        default_factory=lambda: int(os.environ.get("AGENT_MAX_STEPS") or 10),
        metadata={
            "description": "Most model calls in one run; reaching it ends the run with an "
            "answer that says so. Env: AGENT_MAX_STEPS (default 10)."
        },
    )
    user_id: str = field(
        default_factory=lambda: os.environ.get("AGENT_DEFAULT_USER_ID") or "anonymous",
        metadata={
            "description": "Whose memories and history the run may read and write. Set by the "
            "caller or the auth layer, never by the model. Env: AGENT_DEFAULT_USER_ID."
        },
    )
    tools: list[str] | None = field(
        default_factory=lambda: _split(os.environ.get("AGENT_TOOLS")),
        metadata={
            "description": "Names of the tools the agent may call; empty for every configured "
            "tool. Env: AGENT_TOOLS (comma-separated)."
        },
    )
    system_prompt: str | None = field(
        default=None,
        metadata={"description": "Replaces the graph's system prompt when set."},
    )
    tool_timeout: float = field(
        default_factory=lambda: float(os.environ.get("AGENT_TOOL_TIMEOUT") or 60.0),
        metadata={"description": "Seconds one tool call may take. Env: AGENT_TOOL_TIMEOUT."},
    )
    tool_retries: int = field(
        default_factory=lambda: int(os.environ.get("AGENT_TOOL_RETRIES") or 2),
        metadata={
            "description": "Retries of a tool call that failed transiently (timeout, 5xx, 429), "
            "with exponential backoff. Env: AGENT_TOOL_RETRIES (default 2)."
        },
    )
    model_retries: int = field(
        default_factory=lambda: int(os.environ.get("AGENT_MODEL_RETRIES") or 2),
        metadata={
            "description": "Retries of a model call that failed transiently (connection, 429, "
            "5xx). Env: AGENT_MODEL_RETRIES (default 2)."
        },
    )
    context_window_tokens: int = field(
        default_factory=lambda: int(os.environ.get("AGENT_CONTEXT_TOKENS") or 24000),
        metadata={
            "description": "Token budget of the conversation sent to the model; older turns are "
            "summarized past it. Env: AGENT_CONTEXT_TOKENS (default 24000)."
        },
    )

    remember: bool = field(
        default_factory=lambda: (os.environ.get("AGENT_REMEMBER") or "true").lower() in ("1", "true", "yes"),
        metadata={
            "description": "Record each turn in the user's chat history and extract long-term "
            "memories from it in the background (needs a store). Env: AGENT_REMEMBER (default true)."
        },
    )

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if not self.user_id.strip():
            raise ValueError("user_id must not be empty")
        if self.tools is not None and not isinstance(self.tools, list):
            raise ValueError("tools must be a list of tool names")


def _split(raw: str | None) -> list[str] | None:
    items = [item.strip() for item in (raw or "").split(",") if item.strip()]
    return items or None


def context_fields() -> list[tuple[str, str]]:
    """(name, description) of every context field, for docs and tests."""
    return [(f.name, f.metadata.get("description", "")) for f in fields(Context)]
