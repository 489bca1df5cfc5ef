"""Per-request provider credentials: the headers `x-model-api-key`, `x-model-base-url` and
`x-search-api-key` taken off every request before the LangGraph server sees it.

On a request that creates a run (`/runs`, `/threads/{id}/runs`, `/stream`, `/wait`, `/batch`)
they are checked and held in this process's memory (tools/credentials.py); the request goes on
with the header `x-agent-credentials: <reference>` instead, which langgraph.json's
`http.configurable_headers` copies into the run's `config.configurable`. The values never reach
the server's records: not the run record, the thread, its checkpoints or their metadata. On any
other request (a client that sends the headers with every call) they are dropped unread.

Refused before anything is written, in the error shape of server/errors.py:

- 403 REQUEST_CREDENTIALS_DISABLED: AGENT_REQUEST_CREDENTIALS is off;
- 400 BASE_URL_NOT_ALLOWED: `x-model-base-url` not http(s), with credentials in it, not listed
  in AGENT_REQUEST_BASE_URLS, or (admitted by `*`) its host resolving to a loopback, private,
  link-local or otherwise non-public address;
- 400 INVALID_REQUEST: an empty header, a search key where the server's search provider takes
  none, or credentials on a cron (a scheduled run outlives the request);
- 400 NOT_SUPPORTED_ON_THIS_SERVER: on a server whose runs may execute in another process than
  the one receiving the request (any but `langgraph dev`: Aegra, LangGraph Platform), or whose
  configuration does not copy `x-agent-credentials` into runs (`reference_reaches_runs`).

A `x-agent-credentials` header sent by a client is dropped: only this middleware sets it.
"""

from __future__ import annotations

import re
from typing import Any

from server.dev_persistence import runs_in_this_process
from server.errors import ApiError, error_response
from settings import settings
from tools import credentials
from tools.net import FetchError, check_public_host
from tools.web_search import request_key_provider

RUN_CREATING = re.compile(r"^(/threads/[^/]+)?/runs(/stream|/wait|/batch)?/?$")
CRONS = re.compile(r"^(/threads/[^/]+)?/runs/crons/?$")
_HEADERS = {header.encode(): field for field, header in credentials.HEADERS.items()}
_REF = credentials.REF_HEADER.encode()


def reference_reaches_runs() -> bool:
    """Whether the server copies the `x-agent-credentials` header into a run's configurable
    (langgraph.json `http.configurable_headers` includes it): without it, held credentials would
    never reach the run, which would silently use the server's keys."""
    try:
        from langgraph_api.utils.headers import should_include_header
    except ImportError:
        return False
    return bool(should_include_header(credentials.REF_HEADER))


async def read_credentials(path: str, sent: dict[str, str]) -> credentials.RequestCredentials:
    """The credentials of a run request (headers by field), checked; ApiError when refused."""
    config = settings()
    if not config.AGENT_REQUEST_CREDENTIALS:
        raise ApiError(
            "REQUEST_CREDENTIALS_DISABLED",
            "This server does not accept model or search keys with a request (x-model-api-key, "
            "x-model-base-url, x-search-api-key): send the request without them.",
            {"headers": sorted(credentials.HEADERS[field] for field in sent)},
        )
    for field, value in sent.items():
        if not value.strip():
            raise ApiError("INVALID_REQUEST", f"The header {credentials.HEADERS[field]} is empty.")
    if CRONS.match(path):
        raise ApiError(
            "INVALID_REQUEST",
            "A cron cannot carry x-model-api-key, x-model-base-url or x-search-api-key: they are held "
            "for the run of one request only.",
        )
    if not runs_in_this_process() or not reference_reaches_runs():
        raise ApiError(
            "NOT_SUPPORTED_ON_THIS_SERVER",
            "This server cannot take model or search keys with a request (x-model-api-key, "
            "x-model-base-url, x-search-api-key): it runs requests in other processes, or its "
            "configuration does not pass `x-agent-credentials` to runs (http.configurable_headers).",
        )
    if "search_api_key" in sent:
        from tools.web_search import search_config

        if request_key_provider(search_config().provider) is None:
            raise ApiError(
                "INVALID_REQUEST",
                "This server's web search provider takes no key: send the request without x-search-api-key.",
            )
    listed = False
    if base_url := sent.get("model_base_url", "").strip():
        listed = await check_base_url(base_url)
    return credentials.RequestCredentials(
        model_api_key=sent.get("model_api_key", "").strip() or None,
        model_base_url=base_url or None,
        search_api_key=sent.get("search_api_key", "").strip() or None,
        base_url_listed=listed,
    )


async def check_base_url(url: str) -> bool:
    """Whether the operator listed `url` (else its host's addresses are public); ApiError
    BASE_URL_NOT_ALLOWED saying why not."""
    try:
        listed = credentials.check_base_url(url)
    except ValueError as exc:
        raise ApiError("BASE_URL_NOT_ALLOWED", str(exc), {"header": "x-model-base-url"}) from None
    if listed:
        return True
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        await check_public_host(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
    except FetchError as exc:
        raise ApiError(
            "BASE_URL_NOT_ALLOWED",
            f"x-model-base-url is refused: {str(exc).removeprefix('Refused to fetch ')} Only public addresses "
            "are allowed unless the server's operator lists the URL.",
            {"header": "x-model-base-url"},
        ) from None
    return False


class RequestCredentialsMiddleware:
    """ASGI middleware: the credential headers off every request; on a run request held and
    replaced by their reference (module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent: dict[str, str] = {}
        kept: list[tuple[bytes, bytes]] = []
        for name, value in scope.get("headers", []):
            lowered = name.lower()
            if lowered in _HEADERS:
                sent[_HEADERS[lowered]] = value.decode("latin-1")
            elif lowered != _REF:
                kept.append((name, value))
        if len(kept) == len(scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        if sent and scope["method"] == "POST" and (RUN_CREATING.match(scope["path"]) or CRONS.match(scope["path"])):
            try:
                held = await read_credentials(scope["path"], sent)
            except ApiError as error:
                await error_response(error)(scope, receive, send)
                return
            kept.append((_REF, credentials.hold(held).encode()))
        await self.app({**scope, "headers": kept}, receive, send)
