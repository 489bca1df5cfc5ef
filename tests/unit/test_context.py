"""The shared context schema: caller values win, the environment fills the rest, all documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs.runtime.context import Context, context_fields

DOC = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()


def test_environment_fills_only_unset_fields(monkeypatch):
    monkeypatch.setenv("AGENT_MODEL", "openai:qwen2.5")
    monkeypatch.setenv("AGENT_MAX_STEPS", "4")
    monkeypatch.setenv("AGENT_TOOLS", "calculator, weather")
    monkeypatch.setenv("AGENT_REMEMBER", "false")
    monkeypatch.setenv("AGENT_TEMPERATURE", "0.7")
    context = Context(max_steps=7, temperature=0.0)
    assert context.model == "openai:qwen2.5"
    assert context.max_steps == 7  # the caller's value wins
    assert context.temperature == 0.0  # even when it equals the built-in default
    assert context.tools == ["calculator", "weather"]
    assert context.remember is False


def test_built_in_defaults(monkeypatch):
    for name in ("AGENT_MODEL", "AGENT_MAX_STEPS", "AGENT_TOOLS", "AGENT_REMEMBER", "AGENT_DEFAULT_USER_ID"):
        monkeypatch.delenv(name, raising=False)
    context = Context()
    assert (context.model, context.max_steps, context.tools, context.remember, context.user_id) == (
        "openai:gpt-4o-mini",
        10,
        None,
        True,
        "anonymous",
    )


@pytest.mark.parametrize("bad", [{"max_steps": 0}, {"user_id": "  "}, {"tools": "calculator"}])
def test_invalid_values_are_refused(bad):
    with pytest.raises(ValueError):
        Context(**bad)


def test_every_field_is_described_and_documented():
    for name, description in context_fields():
        assert description, name
        assert f"| `{name}` |" in DOC, f"{name} missing from docs/configuration.md"
