"""GET a JSON object from a web API the operator configured (search providers, Open-Meteo).

These endpoints are chosen by the operator, not by a user or a model, so the requests do not go
through the SSRF policy of tools.net. Timeouts, unreachable services, HTTP 408, 429 and 5xx raise
`TransientToolError` (the tool runner may retry); other failures raise `ToolError`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx

from tools.errors import ToolError, TransientToolError, is_transient_http_status

logger = logging.getLogger(__name__)

_REASON_FIELDS = ("reason", "error", "message", "detail")


def _reason(response: httpx.Response) -> str | None:
    """The explanation an API put in its JSON error body, if any."""
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    return next((str(body[f]) for f in _REASON_FIELDS if isinstance(body.get(f), str) and body[f]), None)


async def get_json(
    service: str,
    url: str,
    *,
    params: Mapping[str, Any],
    timeout: float,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """GET `url` with `params` and return the JSON object it answers.

    `service` names the API in error messages ("SearXNG search", "Open-Meteo forecast").
    """
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.get(url, params=params, headers=headers)
    except httpx.TimeoutException:
        raise TransientToolError(f"{service} timed out: no answer within {timeout:g} s.") from None
    except httpx.TransportError as exc:
        raise TransientToolError(f"{service} is unreachable: {exc or type(exc).__name__}.") from None
    status = response.status_code
    if status >= 400:
        message = f"{service} failed with HTTP {status} {response.reason_phrase}".rstrip() + "."
        reason = _reason(response)
        if reason:
            message += f" Reason: {reason}"
        if is_transient_http_status(status):
            raise TransientToolError(message)
        if status in (401, 403):  # the operator's to fix: logged, not told to the model or the user
            logger.warning(
                "%s refused the server's credentials: %s Check its API key or access settings.", service, message
            )
        raise ToolError(message)
    try:
        body = response.json()
    except ValueError:
        raise ToolError(f"{service} answered HTTP {status} with a body that is not JSON.") from None
    if not isinstance(body, dict):
        raise ToolError(f"{service} answered JSON that is not an object.")
    return body


async def unreachable(service: str, url: str, *, timeout: float) -> str | None:
    """Why the server of `url` cannot be reached (name lookup, refused or timed-out connection,
    proxy failure), or None when it can: any HTTP answer, whatever its status, and a connection
    that was made but answered slowly count as reachable. One HEAD request, nothing read: a
    cheap check before work that needs the service."""
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            await client.head(url)
    except httpx.ConnectTimeout:
        return f"{service} is unreachable: no connection within {timeout:g} s."
    except (httpx.ConnectError, httpx.ProxyError) as exc:
        return f"{service} is unreachable: {exc or type(exc).__name__}."
    except httpx.HTTPError:  # connected, then slow or cut off: reachable, the search itself will tell
        return None
    return None
