"""One settings module: every variable declared once, documented, checked at start-up, and the
only reader of the environment; the package's layers import downward only."""

from __future__ import annotations

import ast
import re
import typing
from dataclasses import fields
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from graphs.router.context import RouterContext
from graphs.runtime.context import default_model_timeout
from settings import Settings, SettingsError, check_settings, settings
from settings.reference import markdown_reference

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"settings": set(), "store": {"settings"}, "tools": {"settings", "store"}}
LAYERS["graphs"] = {"settings", "store", "tools"}
LAYERS["server"] = {"settings", "store", "tools", "graphs"}


def test_the_configuration_doc_holds_the_generated_reference():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    block = re.search(r"<!-- settings:begin -->\n(.*)<!-- settings:end -->", doc, re.S)
    assert block, "docs/configuration.md lost its settings block"
    assert block.group(1) == markdown_reference(), "run `python -m settings` and paste its output"


def test_a_bad_value_names_the_variable_and_secrets_are_never_shown(monkeypatch):
    monkeypatch.setenv("AGENT_MAX_STEPS", "abc")
    with pytest.raises(SettingsError, match="AGENT_MAX_STEPS='abc'"):
        check_settings()  # what the server runs at start-up
    with pytest.raises(SettingsError, match="AGENT_MAX_STEPS='abc'"):
        settings().AGENT_MAX_STEPS  # noqa: B018 - reading a bad value raises too
    assert settings().AGENT_MODEL  # other variables stay readable
    monkeypatch.setenv("AGENT_MAX_STEPS", "5")
    monkeypatch.setenv("AGENT_REMEMBER", "maybe")
    with pytest.raises(SettingsError, match="AGENT_REMEMBER"):
        check_settings()
    monkeypatch.setenv("AGENT_REMEMBER", "off")
    monkeypatch.setenv("POSTGRES_POOL_TIMEOUT", "-1")
    with pytest.raises(SettingsError, match="POSTGRES_POOL_TIMEOUT='-1'"):
        settings().POSTGRES_POOL_TIMEOUT  # noqa: B018
    monkeypatch.delenv("POSTGRES_POOL_TIMEOUT")
    assert settings().AGENT_MAX_STEPS == 5 and settings().AGENT_REMEMBER is False
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("AGENT_API_KEYS", "alice=also-secret")
    assert settings().OPENAI_API_KEY.get_secret_value() == "sk-very-secret"
    shown = repr(check_settings()) + str(check_settings().model_dump())
    assert "sk-very-secret" not in shown and "also-secret" not in shown


def test_lists_flags_and_empty_values(monkeypatch):
    monkeypatch.setenv("AGENT_TOOLS", " calculator, weather ,")
    monkeypatch.setenv("AGENT_TRUST_STUDIO_HEADER", "YES")
    monkeypatch.setenv("POSTGRES_SCHEMA", "")
    current = settings()
    assert current.AGENT_TOOLS == ["calculator", "weather"]
    assert current.AGENT_TRUST_STUDIO_HEADER is True
    assert current.POSTGRES_SCHEMA == "agent_engine"  # empty counts as unset


def test_every_context_field_with_a_variable_has_the_variables_type_and_default():
    hints = typing.get_type_hints(RouterContext)
    context = RouterContext()
    checked = 0
    for spec in fields(RouterContext):
        variable = spec.metadata.get("env")
        if variable is None:
            continue
        assert variable in Settings.model_fields, variable
        value = getattr(settings(), variable)
        assert TypeAdapter(hints[spec.name]).validate_python(value) == value, spec.name
        if spec.name == "model_timeout" and value is None:  # unset: what fits the model's endpoint
            value = default_model_timeout(context.model)
        assert getattr(context, spec.name) == value
        checked += 1
    assert checked >= 30


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layers_import_downward_only(layer):
    ours = set(LAYERS) | {"evals", "bench", "tests", "scripts"}
    for path in (ROOT / layer).rglob("*.py"):
        upward = (_imports(path) & ours) - LAYERS[layer] - {layer}
        assert not upward, f"{path.relative_to(ROOT)} imports {sorted(upward)}"


@pytest.mark.parametrize("layer", ["graphs", "tools", "store", "server"])
def test_only_the_settings_module_reads_the_environment(layer):
    for path in (ROOT / layer).rglob("*.py"):
        text = path.read_text()
        reads = re.findall(r"os\.environ(?:\.get)?\(|os\.environ\[|os\.getenv\(", text)
        assert not reads, f"{path.relative_to(ROOT)} reads the environment itself; add the variable to settings/"
