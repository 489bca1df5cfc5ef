"""Every tool the agents can call, by name, with its JSON schema.

Built-in tools are plain functions turned into LangChain tools here; MCP tools come from the
servers configured in `MCP_SERVERS` / `MCP_SERVERS_FILE` (tools/mcp.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from tools.calculator import calculator
from tools.clock import current_time
from tools.errors import ToolInputError
from tools.knowledge import KNOWLEDGE_TOOLS
from tools.mcp import load_mcp_tools, mcp_configured
from tools.memory import MEMORY_TOOLS
from tools.weather import weather
from tools.web_read import web_read
from tools.web_search import web_search_tool

BUILTIN_FUNCTIONS: tuple[Callable, ...] = (
    calculator,
    current_time,
    weather,
    web_search_tool,
    web_read,
    *KNOWLEDGE_TOOLS,
    *MEMORY_TOOLS,
)


@lru_cache(maxsize=1)
def builtin_tools() -> dict[str, BaseTool]:
    """The built-in tools, name -> LangChain tool (argument schema from the type hints)."""
    built = {}
    for function in BUILTIN_FUNCTIONS:
        # Tool errors propagate to the tool runner, which retries transient ones and reports the rest.
        built_tool = tool(function, parse_docstring=True, error_on_invalid_docstring=False)
        built[built_tool.name] = built_tool
    return built


def check_tool_names(names: list[str]) -> None:
    """ValueError naming unknown tools, checked without I/O: every name must be a built-in
    tool unless MCP servers are configured (their tools are known only once listed, and
    `select_tools` checks them when the run starts)."""
    unknown = [name for name in names if name not in builtin_tools()]
    if unknown and not mcp_configured():
        raise ValueError(f"unknown tool(s) {', '.join(unknown)}; available: {', '.join(sorted(builtin_tools()))}")


async def available_tools() -> tuple[dict[str, BaseTool], list[dict]]:
    """All tools: built-in plus MCP, and the MCP servers that could not be reached."""
    tools = dict(builtin_tools())
    # MCP tools whose names clash with a built-in come back renamed `<server>__<name>`.
    mcp_tools, problems = await load_mcp_tools(reserved_names=tools.keys())
    tools.update((mcp_tool.name, mcp_tool) for mcp_tool in mcp_tools)
    return tools, problems


async def select_tools(names: list[str] | None) -> list[BaseTool]:
    """The tools a run may call: `names` (every available tool when None or empty).

    Raises ToolInputError naming the unknown tools and the available ones.
    """
    tools, _problems = await available_tools()
    if not names:
        return list(tools.values())
    unknown = [name for name in names if name not in tools]
    if unknown:
        raise ToolInputError(f"Unknown tool(s) {', '.join(unknown)}; available: {', '.join(sorted(tools))}")
    return [tools[name] for name in names]


async def tool_catalogue() -> list[dict]:
    """Every available tool as an OpenAI-style function schema, for clients and the API."""
    tools, _problems = await available_tools()
    return [convert_to_openai_tool(t) for t in tools.values()]
