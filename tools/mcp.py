"""Tools served by MCP servers (stdio or streamable HTTP), loaded with langchain-mcp-adapters.

Configuration: `MCP_SERVERS` holds JSON, or `MCP_SERVERS_FILE` names a JSON file, mapping a server
name to a langchain-mcp-adapters connection, e.g.

    {"math": {"transport": "stdio", "command": "python", "args": ["server.py"]},
     "docs": {"transport": "streamable_http", "url": "http://127.0.0.1:8000/mcp"}}

Sessions: the adapter's tools are stateless. Listing tools opens one session, and every tool
call opens a fresh session (for stdio: spawns the server process again) and closes it after the
call. So nothing stays connected between calls, and server-side session state does not persist.

Secrets: connections carry URLs (tokens in query strings, userinfo), headers and environment
variables. Every value of a connection is registered with settings.redact when the configuration
is read, so error messages (the tool list's `unavailable`, tool errors) and log lines show `***`
in their place.

Names: an MCP tool keeps the name its server gives it, unless that name is also used by another
server's tool or is in `reserved_names` (the built-in tools); then every MCP tool with that name
becomes `<server>__<name>`.
"""

import asyncio
import json
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import httpx
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.interceptors import MCPToolCallRequest
from langchain_mcp_adapters.sessions import Connection
from mcp.shared.exceptions import McpError
from mcp.types import CONNECTION_CLOSED

from settings import settings
from settings.redact import install_log_redaction, redact, register_secrets, secrets_in
from tools.errors import ToolError, TransientToolError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MCPConfig:
    connect_timeout: float
    retry_after: float

    @classmethod
    def from_env(cls) -> "MCPConfig":
        config = settings()
        return cls(connect_timeout=config.MCP_CONNECT_TIMEOUT, retry_after=config.MCP_RETRY_AFTER)


@dataclass(frozen=True)
class _ServerLoad:
    tools: list[BaseTool] | None
    error: str | None
    attempted_at: float


# One entry per (server name, connection) for the process lifetime; failures are retried once
# they are `MCP_RETRY_AFTER` seconds old.
_loads: dict[str, _ServerLoad] = {}


def mcp_configured() -> bool:
    """Whether any MCP server is configured (`MCP_SERVERS` or `MCP_SERVERS_FILE` set); no I/O."""
    config = settings()
    return bool(config.MCP_SERVERS or config.MCP_SERVERS_FILE)


def mcp_servers_config() -> dict[str, dict]:
    """The configured MCP servers: `MCP_SERVERS` (JSON) if set, else the JSON file named by
    `MCP_SERVERS_FILE`, else none. Raises ValueError when the configuration is not a JSON object."""
    inline = (settings().MCP_SERVERS or "").strip()
    path = (settings().MCP_SERVERS_FILE or "").strip()
    if inline:
        source, text = "MCP_SERVERS", inline
    elif path:
        source = f"MCP_SERVERS_FILE ({path})"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{source} cannot be read: {exc}") from exc
    else:
        return {}
    try:
        servers = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not valid JSON: {redact(str(exc))}") from None
    if not isinstance(servers, dict) or not all(isinstance(c, dict) for c in servers.values()):
        raise ValueError(f"{source} must be a JSON object mapping server names to connections.")
    protect(servers)
    return servers


_protected: set[str] = set()


def protect(servers: dict[str, dict]) -> None:
    """Hide every value of these connections from error messages and logs (settings.redact)."""
    fingerprint = json.dumps(servers, sort_keys=True, default=str)
    if fingerprint in _protected:
        return
    register_secrets(secret for connection in servers.values() for secret in secrets_in(connection))
    install_log_redaction()
    _protected.add(fingerprint)


async def load_mcp_tools(
    servers: dict[str, dict] | None = None, *, reserved_names: Iterable[str] = ()
) -> tuple[list[BaseTool], list[dict]]:
    """Load the tools of every configured MCP server.

    Args:
        servers: server name -> langchain-mcp-adapters connection; None reads the environment
            (see `mcp_servers_config`).
        reserved_names: names already taken by other tools; MCP tools with these names get
            the `<server>__` prefix.

    Returns:
        (tools, problems). Each server is loaded on its own, with a `MCP_CONNECT_TIMEOUT`
        timeout; a server that fails is left out, logged as a warning and reported in problems
        as {"server": name, "error": description}. Loaded tools are cached for the process;
        a failed server is tried again on a call at least `MCP_RETRY_AFTER` seconds later.
        Calling a tool raises TransientToolError when its server is unreachable and ToolError
        for other failures; an error the tool itself reports comes back as an error result.
    """
    if servers is None:
        if not mcp_configured():
            return [], []  # the common case, checked on every agent step: no thread hop
        # Off the event loop: MCP_SERVERS_FILE is a file read (the server flags blocking I/O).
        servers = await asyncio.to_thread(mcp_servers_config)
    else:
        protect(servers)
    config = MCPConfig.from_env()
    loads = await asyncio.gather(*(_load_server(name, connection, config) for name, connection in servers.items()))
    tools_by_server: dict[str, list[BaseTool]] = {}
    problems: list[dict] = []
    for name, load in zip(servers, loads, strict=False):
        if load.tools is None:
            problems.append({"server": name, "error": load.error})
        else:
            tools_by_server[name] = load.tools
    return _resolve_name_clashes(tools_by_server, set(reserved_names)), problems


def reset_mcp_cache() -> None:
    """Forget loaded and failed servers, so the next `load_mcp_tools` contacts every server."""
    _loads.clear()


async def _load_server(name: str, connection: dict, config: MCPConfig) -> _ServerLoad:
    key = json.dumps([name, connection], sort_keys=True, default=str)
    cached = _loads.get(key)
    if cached and (cached.tools is not None or time.monotonic() - cached.attempted_at < config.retry_after):
        return cached
    # `connection` is one server's entry of the MCP config, checked when the config was read.
    client = MultiServerMCPClient({name: cast(Connection, connection)}, tool_interceptors=[_raise_tool_errors])
    try:
        async with asyncio.timeout(config.connect_timeout):
            load = _ServerLoad(await client.get_tools(server_name=name), None, time.monotonic())
    except TimeoutError:
        load = _ServerLoad(None, f"no answer within {config.connect_timeout:g} s", time.monotonic())
    except Exception as exc:  # any failure of one server must not stop the others
        load = _ServerLoad(None, _describe(exc), time.monotonic())
    if load.error:
        logger.warning("MCP server %r skipped: %s", name, load.error)
    _loads[key] = load
    return load


def _resolve_name_clashes(tools_by_server: dict[str, list[BaseTool]], reserved: set[str]) -> list[BaseTool]:
    counts: dict[str, int] = {}
    for tools in tools_by_server.values():
        for tool in tools:
            counts[tool.name] = counts.get(tool.name, 0) + 1
    resolved = []
    for server, tools in tools_by_server.items():
        for tool in tools:
            if counts[tool.name] > 1 or tool.name in reserved:
                tool = tool.model_copy(update={"name": f"{_safe_name(server)}__{tool.name}"})
            resolved.append(tool)
    return resolved


def _safe_name(server: str) -> str:
    # Model APIs accept tool names matching [a-zA-Z0-9_-]+.
    return re.sub(r"[^A-Za-z0-9_-]", "_", server)


async def _raise_tool_errors(request: MCPToolCallRequest, handler: Any) -> Any:
    """Tool-call interceptor: turns connection and session failures into the tool error types."""
    try:
        return await handler(request)
    except ToolError:
        raise
    except Exception as exc:
        message = f"MCP server {request.server_name!r} failed to run {request.name!r}: {_describe(exc)}"
        if any(_is_transient(leaf) for leaf in _leaves(exc)):
            raise TransientToolError(message) from exc
        raise ToolError(message) from exc


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    if isinstance(exc, McpError):
        return exc.error.code == CONNECTION_CLOSED
    return isinstance(
        exc,
        httpx.TransportError | ConnectionError | TimeoutError | anyio.ClosedResourceError | anyio.BrokenResourceError,
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _describe(exc: BaseException) -> str:
    """What went wrong, for users and logs: configured secrets replaced by `***`."""
    text = "; ".join(f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__ for leaf in _leaves(exc))
    return redact(text)
