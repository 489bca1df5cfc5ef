"""Options shared by every test folder: `--server aegra` runs the integration tests that use the
session server (the `dev_server` fixture) on the production stack instead of `langgraph dev`
(scripts/prod: two Aegra replicas on Postgres + Redis, tests/integration/conftest.py); the other
tests are deselected, and those marked `not_on_aegra` are skipped with the reason."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--server",
        choices=("dev", "aegra"),
        default="dev",
        help="server of the integration tests: `langgraph dev` (default) or the Aegra stack (scripts/prod)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "not_on_aegra(reason): the test needs what Aegra does not offer; skipped with the reason under --server aegra",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--server") != "aegra":
        return
    on_server = [item for item in items if "dev_server" in getattr(item, "fixturenames", ())]
    others = [item for item in items if item not in on_server]
    if others:
        config.hook.pytest_deselected(items=others)
        items[:] = on_server
    for item in on_server:
        if marker := item.get_closest_marker("not_on_aegra"):
            item.add_marker(pytest.mark.skip(reason=f"not on Aegra: {marker.args[0]}"))
