"""Request body limits of the `/api/v1/` routes (server/http.py), as ASGI middleware.

A body larger than `HTTP_MAX_BODY_BYTES` (`HTTP_UPLOAD_MAX_BYTES` for document uploads) is
answered 413 PAYLOAD_TOO_LARGE in the routes' error shape: at once when its `Content-Length`
says so, else as soon as the bytes read pass the limit (the rest is never read). A JSON body
nested deeper than `MAX_JSON_DEPTH` is answered 400 JSON_TOO_DEEP before any route parses it.
The LangGraph server's own routes (threads, runs, store) are not touched.
"""

from __future__ import annotations

import re
from typing import Any

from server.errors import ApiError, error_response
from settings import settings

PREFIX = "/api/v1/"
UPLOAD_PATH = re.compile(r"^/api/v1/kb/[^/]+/documents/?$")
MAX_JSON_DEPTH = 100

Scope = dict[str, Any]
Message = dict[str, Any]


class _TooLarge(Exception):
    pass


def body_limit(path: str) -> int:
    """The largest body (bytes) accepted on `path`."""
    config = settings()
    return config.HTTP_UPLOAD_MAX_BYTES if UPLOAD_PATH.match(path) else config.HTTP_MAX_BODY_BYTES


def too_large(limit: int) -> ApiError:
    return ApiError(
        "PAYLOAD_TOO_LARGE",
        f"The request body is larger than {limit:,} bytes, the most this route accepts.",
        {"limit_bytes": limit},
    )


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_AS_PARENS = bytes.maketrans(b"[]{}", b"()()")


def json_depth_exceeded(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether `body` nests arrays/objects deeper than `max_depth` (brackets inside strings do
    not count). Bodies with fewer brackets than that are passed over without a scan; otherwise
    the brackets alone are kept and innermost pairs removed, one level per pass (fast C
    operations, at most `max_depth` passes)."""
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return False
    brackets = _STRING.sub(b"", body).translate(_AS_PARENS, _NOT_BRACKETS)
    for _ in range(max_depth):
        if not brackets:
            return False
        brackets = brackets.replace(b"()", b"")
    return b"(" in brackets


class BodyLimitMiddleware:
    """ASGI middleware applying the limits above to requests under `/api/v1/`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        limit = body_limit(scope["path"])
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        try:
            declared = int(headers.get("content-length", ""))
        except ValueError:
            declared = None
        if declared is not None and declared > limit:
            await error_response(too_large(limit))(scope, receive, send)
            return
        content_type = headers.get("content-type", "").lower()
        if "json" in content_type or not content_type:  # FastAPI parses a body without a type as JSON
            await self._json(scope, receive, send, limit)
        else:
            await self._streamed(scope, receive, send, limit)

    async def _json(self, scope: Scope, receive: Any, send: Any, limit: int) -> None:
        """Read the whole (bounded) JSON body, check its depth, then replay it to the app."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, replay([message]), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await error_response(too_large(limit))(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if json_depth_exceeded(body):
            error = ApiError(
                "JSON_TOO_DEEP",
                f"The JSON body nests arrays or objects more than {MAX_JSON_DEPTH} levels deep.",
                {"max_depth": MAX_JSON_DEPTH},
            )
            await error_response(error)(scope, receive, send)
            return
        await self.app(scope, replay([{"type": "http.request", "body": body, "more_body": False}], receive), send)

    async def _streamed(self, scope: Scope, receive: Any, send: Any, limit: int) -> None:
        """Pass the body through while counting it; past the limit, the app sees the client
        leave and the caller gets 413 instead of whatever the app answers."""
        state = {"size": 0, "exceeded": False, "started": False}

        async def counted() -> Message:
            if state["exceeded"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["size"] += len(message.get("body", b""))
                if state["size"] > limit:
                    state["exceeded"] = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if state["exceeded"]:
                return  # the 413 below replaces the app's answer
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, counted, guarded_send)
        except Exception:
            if not state["exceeded"]:
                raise
        if state["exceeded"] and not state["started"]:
            await error_response(too_large(limit))(scope, receive, send)


def replay(messages: list[Message], then: Any = None) -> Any:
    """A `receive` giving `messages` first, then `then`'s (or a disconnect)."""
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}

    return receive
