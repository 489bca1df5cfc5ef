"""server/api_checks.py: what is refused on the LangGraph server's own routes, and that its
table of context schemas matches the graphs of langgraph.json."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from server.api_checks import CONTEXTS, MIN_RECURSION_LIMIT, check_request
from server.errors import ApiError

ROOT = Path(__file__).resolve().parents[2]


def test_every_graph_of_langgraph_json_has_its_context_schema():
    graphs = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    assert set(CONTEXTS) == set(graphs)
    for graph_id, target in graphs.items():
        path, _, name = target.partition(":")
        spec = importlib.util.spec_from_file_location(f"_check_{graph_id}", ROOT / path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert getattr(module, name).builder.context_schema is CONTEXTS[graph_id], graph_id


def refused(path: str, payload) -> ApiError:
    with pytest.raises(ApiError) as error:
        check_request(path, payload)
    return error.value


@pytest.mark.parametrize("path", ["/threads/t1/runs", "/threads/t1/runs/stream", "/runs/wait", "/runs"])
def test_a_run_with_a_bad_context_or_a_tiny_recursion_limit_is_refused(path):
    error = refused(path, {"assistant_id": "react", "context": {"tools": ["rm"]}})
    assert error.status == 422 and error.details == {"field": "context.tools"} and "rm" in error.message
    error = refused(path, {"assistant_id": "plan_execute", "context": {"max_plan_steps": 5000}})
    assert error.details == {"field": "context.max_plan_steps"} and "out of range" in error.message
    error = refused(path, {"assistant_id": "react", "config": {"recursion_limit": 1}})
    assert error.details == {"field": "config.recursion_limit"} and str(MIN_RECURSION_LIMIT) in error.message
    assert refused(path, {"assistant_id": "react", "context": "tools=rm"}).details == {"field": "context"}
    error = refused(path, {"assistant_id": "react", "input": {"messages": [{"role": "hacker", "content": "x"}]}})
    assert error.details == {"field": "input.messages"} and "hacker" in error.message
    # Valid ones pass, and so do fields the graph does not know (the server ignores them too).
    check_request(
        path, {"assistant_id": "react", "context": {"max_steps": 3, "bogus": 1}, "config": {"recursion_limit": 25}}
    )
    check_request(path, {"assistant_id": "plan_execute", "context": {"approve_plan": True, "max_plan_steps": 5}})


def test_an_assistant_by_id_is_checked_on_the_fields_every_graph_shares():
    assistant = "7b0f7c38-64a3-4f52-8d8e-3c4f0d3b6a0e"
    assert refused("/runs", {"assistant_id": assistant, "context": {"max_steps": "abc"}}).details == {
        "field": "context.max_steps"
    }
    check_request("/runs", {"assistant_id": assistant, "context": {"max_plan_steps": 3, "approve_plan": True}})


def test_batches_and_crons_are_checked_run_by_run():
    batch = [{"assistant_id": "react"}, {"assistant_id": "react", "config": {"recursion_limit": 0}}]
    assert refused("/runs/batch", batch).details == {"field": "config.recursion_limit"}
    assert refused("/runs/crons", {}).details == {"field": "assistant_id"}
    assert refused("/threads/t1/runs/crons", {"assistant_id": "react"}).details == {"field": "schedule"}
    check_request("/runs/crons", {"assistant_id": "react", "schedule": "0 9 * * 1"})


def test_store_searches_and_ui_requests_need_their_fields():
    assert refused("/store/items/search", {"query": "a"}).details == {"field": "namespace_prefix"}
    assert refused("/store/items/search", {"namespace_prefix": "memories"}).status == 422
    check_request("/store/items/search", {"namespace_prefix": ["memories", "alice"], "query": "a"})
    assert refused("/ui/react", {}).details == {"field": "name"}
    check_request("/ui/react", {"name": "plan"})
    check_request("/threads/t1/history", {})  # not a checked route
