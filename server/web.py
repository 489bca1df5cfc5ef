"""Web search and web read for callers outside runs (HTTP routes, MCP): seed 002's request and
response bodies around the same functions the `web_search` / `web_read` tools run, with the
same per-user quota (tools/quota.py) and the same caches, kept per user (a shared cache would
tell one user what another searched for or read)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from server.errors import ApiError
from settings.redact import redact
from tools import web_read as web_read_module
from tools import web_search as web_search_module
from tools.errors import ToolError, ToolInputError, TransientToolError
from tools.quota import QuotaExceeded, charge


class WebSearchRequest(BaseModel):
    """POST /api/v1/web/search."""

    query: str = Field(..., min_length=1, max_length=2000, description="What to search for.")
    max_results: int = Field(5, ge=1, le=web_search_module.MAX_RESULTS_LIMIT, description="Results to return (1-20).")
    search_engine: Literal["tavily", "searxng", "jina", "duckduckgo"] | None = Field(
        None,
        description="Provider to use (it must be set up on the server); unset: WEB_SEARCH_PROVIDER, else the "
        "first configured, else DuckDuckGo.",
    )
    timeout: float = Field(30, gt=0, le=120, description="Seconds the whole search may take.")
    locale: str | None = Field(
        None,
        max_length=35,
        description="Accepted for seed 002 compatibility; providers pick the language from the query.",
    )


class WebReadRequest(BaseModel):
    """POST /api/v1/web/read."""

    urls: str | list[str] = Field(..., description="One URL or a list of up to 10 http(s) URLs.")
    timeout: float = Field(30, gt=0, le=web_read_module.MAX_TIMEOUT_SECONDS, description="Seconds per URL.")
    css_selector: str | None = Field(None, description="Extract only the elements matching this CSS selector.")
    wait_for_selector: None = Field(
        None, description="Not supported (pages are not rendered with JavaScript); must be null."
    )
    exclude_selector: str | None = Field(None, description="Remove the elements matching this CSS selector first.")
    bypass_cache: bool = Field(False, description="Fetch fresh copies instead of cached ones.")
    locale: str | None = Field(
        None, max_length=35, description="Accepted for seed 002 compatibility; not sent to sites."
    )
    max_concurrent: int = Field(3, ge=1, le=web_read_module.MAX_URLS_PER_CALL, description="URLs fetched at once.")


def cache_scope(user: Any) -> str:
    """The web caches' key part for a route's caller (see tools.cache.cache_scope)."""
    return str(getattr(user, "identity", None) or "")


def quota_error(exc: QuotaExceeded) -> ApiError:
    """429 QUOTA_EXCEEDED with `retry_after` in seconds."""
    return ApiError(
        "QUOTA_EXCEEDED",
        str(exc),
        {"kind": exc.kind, "limit": exc.limit, "window_seconds": exc.window, "retry_after": exc.retry_after},
    )


async def search(store: Any, user: Any, request: WebSearchRequest) -> dict:
    """Run a web search for `user`: seed 002's response body, or ApiError."""
    started = time.perf_counter()
    config = web_search_module.search_config()
    provider: str | None = request.search_engine
    try:
        provider = web_search_module.choose_provider(request.search_engine, config)
        await charge(store, user, "web_search")
        results = await asyncio.wait_for(
            web_search_module.web_search(request.query, request.max_results, provider, scope=cache_scope(user)),
            request.timeout,
        )
    except QuotaExceeded as exc:
        raise quota_error(exc) from None
    except TimeoutError:
        raise ApiError(
            "TIMEOUT_ERROR", f"The search took longer than {request.timeout:g} seconds.", {"timeout": request.timeout}
        ) from None
    except ToolInputError as exc:
        raise ApiError("INVALID_REQUEST", str(exc)) from None
    except TransientToolError as exc:  # unreachable, timed out, rate limited, 5xx
        raise ApiError(
            "WEB_SEARCH_UNAVAILABLE",
            f"The search provider could not be reached or is busy; try again later. ({redact(str(exc))})",
            {"search_engine": provider, "retry_after": 30},
        ) from None
    except ToolError as exc:
        raise ApiError("WEB_SEARCH_FAILED", redact(str(exc)), {"search_engine": request.search_engine}) from None
    return {
        "query": request.query,
        "results": results,
        "search_engine": provider,
        "total_results": len(results),
        "search_time": round(time.perf_counter() - started, 3),
    }


# per-URL error code -> the route's error when every URL failed with it
READ_ERRORS = {
    "INVALID_URL_FORMAT": "INVALID_URL_FORMAT",
    "URL_NOT_ALLOWED": "URL_NOT_ACCESSIBLE",
    "URL_NOT_ACCESSIBLE": "URL_NOT_ACCESSIBLE",
    "UNSUPPORTED_CONTENT_TYPE": "URL_NOT_ACCESSIBLE",
    "TOO_MANY_REDIRECTS": "URL_NOT_ACCESSIBLE",
    "TIMEOUT": "TIMEOUT_ERROR",
}


async def read(store: Any, user: Any, request: WebReadRequest) -> dict:
    """Read web pages for `user`: seed 002's response body, or ApiError. One failing URL among
    others is reported in its result (200); when every URL fails, the route answers with the
    error (INVALID_URL_FORMAT, URL_NOT_ACCESSIBLE, TIMEOUT_ERROR, else WEB_READ_FAILED)."""
    started = time.perf_counter()
    try:
        await charge(store, user, "web_read")
        results = await web_read_module.read_pages(
            request.urls,
            timeout=request.timeout,
            css_selector=request.css_selector,
            exclude_selector=request.exclude_selector,
            bypass_cache=request.bypass_cache,
            max_concurrent=request.max_concurrent,
            scope=cache_scope(user),
        )
    except QuotaExceeded as exc:
        raise quota_error(exc) from None
    except ToolInputError as exc:
        raise ApiError("INVALID_REQUEST", str(exc)) from None
    except ToolError as exc:
        raise ApiError("WEB_READ_FAILED", str(exc)) from None
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for result in results:
        if result["status"] == "success":
            result["extracted_at"] = now
    failed = [r for r in results if r["status"] != "success"]
    body = {
        "results": results,
        "total_urls": len(results),
        "successful": len(results) - len(failed),
        "failed": len(failed),
        "processing_time": round(time.perf_counter() - started, 3),
    }
    if failed and len(failed) == len(results):
        codes = {READ_ERRORS.get(r["error_code"], "WEB_READ_FAILED") for r in failed}
        code = codes.pop() if len(codes) == 1 else "WEB_READ_FAILED"
        raise ApiError(code, failed[0]["error"] if len(failed) == 1 else "None of the URLs could be read.", body)
    return body
