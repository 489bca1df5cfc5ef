"""Errors of the HTTP routes in seed 002's shape: `{"error": CODE, "message", "details"}`."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from store.postgres import (
    DATABASE_BUSY_MESSAGE,
    DATABASE_UNAVAILABLE_MESSAGE,
    NoVectorIndex,
    exception_chain,
    is_database_busy,
    is_database_unavailable,
)

# code -> HTTP status (seed 002's table, plus the knowledge-base and validation codes)
STATUS = {
    "CHAT_NOT_FOUND": 404,
    "MODEL_NOT_AVAILABLE": 400,
    "MODEL_ERROR": 502,
    "WEB_SEARCH_FAILED": 502,
    "WEB_SEARCH_UNAVAILABLE": 503,
    "WEB_READ_FAILED": 500,
    "URL_NOT_ACCESSIBLE": 400,
    "QUOTA_EXCEEDED": 429,
    "INVALID_URL_FORMAT": 400,
    "TIMEOUT_ERROR": 408,
    "INVALID_REQUEST": 400,
    "VALIDATION_ERROR": 422,
    "KB_NOT_FOUND": 404,
    "KB_EXISTS": 409,
    "KB_FORBIDDEN": 403,
    "SOURCE_NOT_FOUND": 404,
    "UNSUPPORTED_FILE_TYPE": 415,
    "PAYLOAD_TOO_LARGE": 413,
    "JSON_TOO_DEEP": 400,
    "UNSUPPORTED_CONTENT_ENCODING": 415,
    "DATABASE_UNAVAILABLE": 503,
    "DATABASE_BUSY": 503,
    "QUEUE_UNAVAILABLE": 503,
    "SEMANTIC_SEARCH_UNAVAILABLE": 503,
    "INGEST_BUSY": 429,
    "INGEST_FAILED": 503,
    "UI_NOT_FOUND": 404,
    "REQUEST_CREDENTIALS_DISABLED": 403,
    "BASE_URL_NOT_ALLOWED": 400,
    "NOT_SUPPORTED_ON_THIS_SERVER": 400,
    "TOOL_NOT_FOUND": 404,
    "TOOL_FAILED": 502,
    "THREAD_BUSY": 409,
}

# Seconds a client is told to wait (Retry-After) while the database is unavailable.
DATABASE_RETRY_AFTER_S = 2
QUEUE_UNAVAILABLE_MESSAGE = (
    "The run queue is unavailable (no connection to Redis). A run being created may have been "
    "recorded: it starts once Redis is back (list the thread's runs before creating it again). "
    "The server reconnects by itself: retry shortly."
)
# redis-py's errors that mean Redis cannot be reached (matched by name: redis is a dependency of
# the self-hosted server only, not of this package).
_REDIS_CONNECTION_ERRORS = {"ConnectionError", "TimeoutError", "BusyLoadingError"}


class ApiError(Exception):
    """An error answered as `{"error": code, "message": message, "details": details}`."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}
        self.status = STATUS[code]


def error_response(error: ApiError) -> JSONResponse:
    """The JSON response of an ApiError (with `Retry-After` when details carry `retry_after`)."""
    headers = {}
    if "retry_after" in error.details:
        headers["Retry-After"] = str(error.details["retry_after"])
    body = {"error": error.code, "message": error.message, "details": error.details}
    return JSONResponse(body, status_code=error.status, headers=headers)


async def api_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI exception handler of ApiError."""
    assert isinstance(exc, ApiError)
    return error_response(exc)


def _field(location: tuple | list) -> str:
    parts = list(location)
    if len(parts) > 1 and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:]  # where the field was sent; the rest names it
    return ".".join(str(part) for part in parts)


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """A request that does not match its schema: 422 VALIDATION_ERROR naming each field."""
    assert isinstance(exc, RequestValidationError)
    problems = [
        {"field": _field(error.get("loc", ())) or "body", "message": error.get("msg", "invalid")}
        for error in exc.errors()
    ]
    message = "; ".join(f"{p['field']}: {p['message']}" for p in problems) or "Invalid request."
    return error_response(ApiError("VALIDATION_ERROR", message, {"errors": problems}))


def is_queue_unavailable(exc: BaseException) -> bool:
    """Whether `exc` (or an exception it wraps or groups) says Redis cannot be reached: the
    self-hosted server (Aegra) queues runs and streams their events through Redis."""
    return any(
        cls.__module__.split(".")[0] == "redis" and cls.__name__ in _REDIS_CONNECTION_ERRORS
        for error in exception_chain(exc)
        for cls in type(error).__mro__
    )


def unavailable_error(exc: BaseException) -> ApiError | None:
    """The 503 answering `exc` when it says a backend cannot be reached (or the store has no
    vector index for a search by meaning), else None."""
    if is_database_busy(exc):
        return ApiError("DATABASE_BUSY", DATABASE_BUSY_MESSAGE, {"retry_after": DATABASE_RETRY_AFTER_S})
    if is_database_unavailable(exc):
        return ApiError("DATABASE_UNAVAILABLE", DATABASE_UNAVAILABLE_MESSAGE, {"retry_after": DATABASE_RETRY_AFTER_S})
    if is_queue_unavailable(exc):
        return ApiError("QUEUE_UNAVAILABLE", QUEUE_UNAVAILABLE_MESSAGE, {"retry_after": DATABASE_RETRY_AFTER_S})
    for error in exception_chain(exc):
        if isinstance(error, NoVectorIndex):
            return ApiError("SEMANTIC_SEARCH_UNAVAILABLE", str(error))
    return None


class DatabaseUnavailableMiddleware:
    """Answer 503 DATABASE_UNAVAILABLE whenever Postgres cannot be reached, on every route
    (and 503 QUEUE_UNAVAILABLE when the self-hosted server's Redis cannot be).

    Added to the custom app (server/http.py), which the LangGraph server runs outside its own
    routes too (`/threads`, `/runs`, `/store`, ...), so this is the one place that turns a lost
    database into an answer. Without it the error escapes as a plain-text 500 and the server
    closes the connection. A response already streaming (a run's events) cannot change its
    status: the run itself waits for Postgres (store/recovery.py) and, when it does not come
    back in time, ends with a `DatabaseUnavailable` error event.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            error = None if started else unavailable_error(exc)
            if error is None:
                raise
            await error_response(error)(scope, receive, send)
