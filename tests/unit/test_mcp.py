"""MCP tools loaded from real FastMCP servers (tests/mcp_server.py) over stdio and streamable HTTP."""

import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from scripts.free_port import free_port
from tools.errors import ToolError, TransientToolError
from tools.mcp import load_mcp_tools, mcp_servers_config, reset_mcp_cache

SERVER_SCRIPT = Path(__file__).resolve().parent.parent / "mcp_server.py"
STDIO_SERVER = {"transport": "stdio", "command": sys.executable, "args": [str(SERVER_SCRIPT)]}


@pytest.fixture(scope="module")
def http_server_url(tmp_path_factory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("mcp") / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(SERVER_SCRIPT), "--http", str(port)], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"MCP test server did not start:\n{log_path.read_text()}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def http_server(http_server_url):
    return {"transport": "streamable_http", "url": http_server_url}


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    for name in ("MCP_SERVERS", "MCP_SERVERS_FILE", "MCP_CONNECT_TIMEOUT", "MCP_RETRY_AFTER"):
        monkeypatch.delenv(name, raising=False)
    reset_mcp_cache()
    yield
    reset_mcp_cache()


def stdio_script(path: Path, body: str) -> dict:
    """A stdio connection running a shell script, so a test can change what the command does."""
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return {"transport": "stdio", "command": str(path), "args": []}


def text_of(content) -> str:
    return "".join(block["text"] for block in content if block["type"] == "text")


async def test_stdio_server_tools_load_and_run():
    tools, problems = await load_mcp_tools({"local": STDIO_SERVER})

    assert problems == []
    by_name = {tool.name: tool for tool in tools}
    assert set(by_name) == {"add", "echo"}
    assert "Add two integers" in by_name["add"].description
    assert text_of(await by_name["add"].ainvoke({"a": 2, "b": 40})) == "42"


async def test_streamable_http_tools_load_and_run(http_server):
    tools, problems = await load_mcp_tools({"remote": http_server})

    assert problems == []
    by_name = {tool.name: tool for tool in tools}
    assert set(by_name) == {"add", "echo"}
    assert text_of(await by_name["echo"].ainvoke({"text": "héllo, world"})) == "héllo, world"
    message = await by_name["add"].ainvoke(
        {"type": "tool_call", "id": "call-1", "name": "add", "args": {"a": -3, "b": 10}}
    )
    assert isinstance(message, ToolMessage)
    assert text_of(message.content) == "7"
    assert message.artifact == {"structured_content": {"result": 7}}


async def test_tool_reported_error_comes_back_as_error_message(http_server):
    tools, _ = await load_mcp_tools({"remote": http_server})
    add = next(tool for tool in tools if tool.name == "add")

    message = await add.ainvoke({"type": "tool_call", "id": "call-2", "name": "add", "args": {"a": "x", "b": 1}})

    assert message.status == "error"
    assert "valid integer" in text_of(message.content)


async def test_down_servers_are_reported_and_healthy_server_still_loads(http_server, caplog):
    servers = {
        "healthy": http_server,
        "closed_port": {"transport": "streamable_http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
        "missing_command": {"transport": "stdio", "command": "/nonexistent/mcp-server", "args": []},
        "no_transport": {"url": "http://127.0.0.1:1/mcp"},
    }

    with caplog.at_level(logging.WARNING, logger="tools.mcp"):
        tools, problems = await load_mcp_tools(servers)

    assert sorted(tool.name for tool in tools) == ["add", "echo"]
    errors = {problem["server"]: problem["error"] for problem in problems}
    assert set(errors) == {"closed_port", "missing_command", "no_transport"}
    assert "ConnectError" in errors["closed_port"]
    assert "FileNotFoundError" in errors["missing_command"]
    assert "transport" in errors["no_transport"]
    warned = " ".join(record.getMessage() for record in caplog.records)
    assert all(name in warned for name in errors)


async def test_server_that_never_answers_times_out(http_server, monkeypatch):
    monkeypatch.setenv("MCP_CONNECT_TIMEOUT", "0.5")
    silent = {"transport": "stdio", "command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}

    tools, problems = await load_mcp_tools({"silent": silent, "healthy": http_server})

    assert problems == [{"server": "silent", "error": "no answer within 0.5 s"}]
    assert sorted(tool.name for tool in tools) == ["add", "echo"]


async def test_clashing_names_get_server_prefix(http_server):
    tools, problems = await load_mcp_tools({"one": http_server, "two.b": http_server})

    assert problems == []
    by_name = {tool.name: tool for tool in tools}
    assert set(by_name) == {"one__add", "one__echo", "two_b__add", "two_b__echo"}
    assert text_of(await by_name["two_b__add"].ainvoke({"a": 1, "b": 1})) == "2"


async def test_reserved_names_get_server_prefix_and_others_keep_theirs(http_server):
    tools, _ = await load_mcp_tools({"remote": http_server}, reserved_names={"echo", "weather"})

    by_name = {tool.name: tool for tool in tools}
    assert set(by_name) == {"add", "remote__echo"}
    assert text_of(await by_name["remote__echo"].ainvoke({"text": "hi"})) == "hi"

    again, _ = await load_mcp_tools({"remote": http_server})
    assert sorted(tool.name for tool in again) == ["add", "echo"]


async def test_loaded_tools_are_cached_per_configuration(http_server):
    first, _ = await load_mcp_tools({"remote": http_server})
    second, _ = await load_mcp_tools({"remote": http_server})
    other_name, _ = await load_mcp_tools({"elsewhere": http_server})

    assert [id(tool) for tool in first] == [id(tool) for tool in second]
    assert not {id(tool) for tool in first} & {id(tool) for tool in other_name}


async def test_failed_server_is_retried_only_after_retry_interval(tmp_path, monkeypatch):
    script = tmp_path / "server.sh"
    connection = {"transport": "stdio", "command": str(script), "args": []}

    _, problems = await load_mcp_tools({"late": connection})
    assert [problem["server"] for problem in problems] == ["late"]

    stdio_script(script, f'exec "{sys.executable}" "{SERVER_SCRIPT}"')
    monkeypatch.setenv("MCP_RETRY_AFTER", "3600")
    tools, problems = await load_mcp_tools({"late": connection})
    assert tools == [] and [problem["server"] for problem in problems] == ["late"]

    monkeypatch.setenv("MCP_RETRY_AFTER", "0")
    tools, problems = await load_mcp_tools({"late": connection})
    assert problems == []
    assert sorted(tool.name for tool in tools) == ["add", "echo"]


async def test_call_to_server_gone_away_raises_tool_errors(tmp_path):
    script = tmp_path / "server.sh"
    tools, _ = await load_mcp_tools({"flaky": stdio_script(script, f'exec "{sys.executable}" "{SERVER_SCRIPT}"')})
    add = next(tool for tool in tools if tool.name == "add")

    stdio_script(script, "exit 1")
    with pytest.raises(TransientToolError, match="'flaky' failed to run 'add'"):
        await add.ainvoke({"a": 1, "b": 2})

    os.unlink(script)
    with pytest.raises(ToolError, match="FileNotFoundError") as raised:
        await add.ainvoke({"a": 1, "b": 2})
    assert not isinstance(raised.value, TransientToolError)


async def test_configuration_from_environment(http_server, tmp_path, monkeypatch):
    servers_file = tmp_path / "servers.json"
    servers_file.write_text(json.dumps({"from_file": http_server}))
    monkeypatch.setenv("MCP_SERVERS_FILE", str(servers_file))
    assert mcp_servers_config() == {"from_file": http_server}

    monkeypatch.setenv("MCP_SERVERS", json.dumps({"from_env": http_server}))
    assert mcp_servers_config() == {"from_env": http_server}
    tools, problems = await load_mcp_tools(reserved_names={"add"})
    assert problems == []
    assert sorted(tool.name for tool in tools) == ["echo", "from_env__add"]


def test_no_configuration_means_no_servers():
    assert mcp_servers_config() == {}


@pytest.mark.parametrize(
    ("variable", "value", "match"),
    [
        ("MCP_SERVERS", "{not json", "not valid JSON"),
        ("MCP_SERVERS", '["a list"]', "JSON object"),
        ("MCP_SERVERS", '{"x": "not a connection"}', "JSON object"),
        ("MCP_SERVERS_FILE", "/nonexistent/servers.json", "cannot be read"),
    ],
)
def test_malformed_configuration_is_rejected(monkeypatch, variable, value, match):
    monkeypatch.setenv(variable, value)

    with pytest.raises(ValueError, match=match):
        mcp_servers_config()
