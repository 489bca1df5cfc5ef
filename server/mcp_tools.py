"""The web tools and knowledge-base search offered to outside MCP clients, at `/api/v1/mcp` on
the LangGraph server itself (streamable HTTP, stateless, JSON answers, so any server process can
answer any request). server/http.py mounts it behind the same auth as the graphs: MCP clients
send `Authorization: Bearer <key or JWT>` like any client, and each call acts for, and counts
against the quota of, that user; it lists and searches the knowledge bases that user may read.
"""

from __future__ import annotations

from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError as McpToolError
from mcp.server.transport_security import TransportSecuritySettings

from server import web
from server.errors import ApiError
from server.kb import server_store
from store import knowledge
from tools.identity import kb_reader

MCP_PATH = "/api/v1/mcp"

mcp = FastMCP(
    "agent-engine",
    instructions="Web search, web reading and knowledge-base search of the agent-engine server.",
    streamable_http_path=MCP_PATH,
    stateless_http=True,
    json_response=True,
    # The server's auth stands in front; Host checks would refuse every non-loopback name.
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
)


def _caller(ctx: Context) -> tuple[Any, Any]:
    """(store, user) of the HTTP request carrying this MCP call."""
    request = ctx.request_context.request
    user = request.scope.get("user") if request is not None else None
    return server_store, user


def _fail(error: ApiError) -> McpToolError:
    retry = error.details.get("retry_after")
    return McpToolError(f"{error.code}: {error.message}" + (f" (retry after {retry} s)" if retry else ""))


@mcp.tool()
async def web_search(query: str, ctx: Context, max_results: int = 5, search_engine: str | None = None) -> dict:
    """Search the web; returns {"query", "results": [{"rank", "title", "url", "snippet", "domain"}],
    "search_engine", "total_results", "search_time"}. search_engine: tavily, searxng, jina or
    duckduckgo (unset: the server's configured provider)."""
    get_store, user = _caller(ctx)
    try:
        request = web.WebSearchRequest(query=query, max_results=max_results, search_engine=search_engine)
        return await web.search(await get_store(), user, request)
    except ApiError as exc:
        raise _fail(exc) from None
    except ValueError as exc:  # pydantic validation
        raise McpToolError(f"INVALID_REQUEST: {exc}") from None


@mcp.tool()
async def web_read(
    urls: list[str],
    ctx: Context,
    timeout: float = 30,
    css_selector: str | None = None,
    exclude_selector: str | None = None,
    bypass_cache: bool = False,
) -> dict:
    """Read up to 10 public web pages as markdown; returns {"results": [one per URL: {"url",
    "status": "success", "title", "content", "word_count", ...} or {"url", "status": "error",
    "error", "error_code"}], "total_urls", "successful", "failed", "processing_time"}."""
    get_store, user = _caller(ctx)
    try:
        request = web.WebReadRequest(
            urls=urls,
            timeout=timeout,
            css_selector=css_selector,
            exclude_selector=exclude_selector,
            bypass_cache=bypass_cache,
        )
        return await web.read(await get_store(), user, request)
    except ApiError as exc:
        raise _fail(exc) from None
    except ValueError as exc:
        raise McpToolError(f"INVALID_REQUEST: {exc}") from None


@mcp.tool()
async def knowledge_base_search(kb: str, query: str, ctx: Context, strategy: str = "hybrid", top_k: int = 5) -> dict:
    """Search a knowledge base; strategy "hybrid" (default), "dense", "keyword", "graph" (entities
    and relations across documents, for multi-hop questions) or "fusion" (hybrid and graph). Returns
    {"kb", "query", "strategy", "context", "retrieval_results": [...], "reference": [...]}."""
    get_store, user = _caller(ctx)
    try:
        store = await get_store()
        return await knowledge.retrieve(store, kb, query, strategy=strategy, top_k=top_k, reader=kb_reader(user))
    except ValueError as exc:  # unknown knowledge base (listing the readable ones), bad arguments
        raise McpToolError(str(exc)) from None


@mcp.tool()
async def list_knowledge_bases(ctx: Context) -> list[dict]:
    """The knowledge bases knowledge_base_search can search: {"name", "description", "documents",
    "chunks", "updated_at"}."""
    get_store, user = _caller(ctx)
    return [
        {key: kb.get(key) for key in ("name", "description", "documents", "chunks", "updated_at")}
        for kb in await knowledge.list_kbs(await get_store(), reader=kb_reader(user))
    ]
