"""The tool registry: built-in and MCP tools side by side, with schemas, usable by the react graph."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from graphs.react.graph import graph
from graphs.runtime.context import Context
from graphs.runtime.models import register_model_provider
from tests.fakes import ScriptedChatModel
from tools.errors import ToolInputError
from tools.mcp import reset_mcp_cache
from tools.registry import available_tools, builtin_tools, select_tools, tool_catalogue

MCP_SERVER = Path(__file__).resolve().parents[1] / "mcp_server.py"
BUILTINS = {
    "calculator",
    "current_time",
    "weather",
    "web_search",
    "web_read",
    "knowledge_base_search",
    "list_knowledge_bases",
    "search_episodic_memory",
    "search_semantic_memory",
    "keyword_search",
    "time_filter",
    "get_user_profile",
    "get_recent_activity",
    "search_chat_history",
    "save_memory",
    "delete_memory",
}


@pytest.fixture(autouse=True)
def mcp_config(monkeypatch):
    reset_mcp_cache()
    monkeypatch.setenv(
        "MCP_SERVERS",
        json.dumps(
            {
                "testtools": {"transport": "stdio", "command": sys.executable, "args": [str(MCP_SERVER)]},
                "down": {"transport": "streamable_http", "url": "http://127.0.0.1:9/mcp"},
            }
        ),
    )
    yield
    reset_mcp_cache()


def test_builtin_tools_have_model_facing_schemas():
    tools = builtin_tools()
    assert set(tools) == BUILTINS
    schema = tools["web_read"].tool_call_schema.model_json_schema()
    assert {"urls", "css_selector", "bypass_cache"} <= set(schema["properties"])
    assert "runtime" not in schema["properties"]


async def test_mcp_tools_appear_beside_builtins_and_a_down_server_is_skipped():
    tools, problems = await available_tools()
    assert BUILTINS | {"add", "echo"} <= set(tools)
    assert [p["server"] for p in problems] == ["down"]
    catalogue = await tool_catalogue()
    by_name = {entry["function"]["name"]: entry["function"] for entry in catalogue}
    assert set(by_name) == set(tools)
    assert by_name["add"]["parameters"]["properties"].keys() == {"a", "b"}
    assert "expression" in by_name["calculator"]["parameters"]["properties"]
    assert by_name["calculator"]["description"]


async def test_unknown_tool_names_are_refused_with_the_available_ones():
    with pytest.raises(ToolInputError, match=r"Unknown tool\(s\) nope; available: add, calculator"):
        await select_tools(["calculator", "nope"])


async def test_react_calls_an_mcp_tool_like_any_other():
    model = ScriptedChatModel(
        responses=[
            {"tool_calls": [{"name": "add", "args": {"a": 20, "b": 22}, "id": "m1"}]},
            "20 + 22 = 42",
        ]
    )
    register_model_provider("scripted", lambda name, **kw: model)
    result = await graph.ainvoke(
        {"messages": [HumanMessage("add 20 and 22")]},
        context=Context(model="scripted:x", tools=["add", "calculator"]),
    )
    tool_message = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert tool_message.status == "success" and "42" in str(tool_message.content)
    assert model.calls[0].tool_names == ["add", "calculator"]
    assert result["execution_log"][0]["tool"] == "add"
