"""Requests to the LangGraph server's own routes, completed and checked before anything is written.

The LangGraph server creates a run first and reads its context when the run starts, so a bad
context ends a run that already wrote the user's message to the thread; a missing field of a
store search, a cron or a UI request reaches its handler as a `KeyError` (a plain-text 500). This
middleware refuses such requests with a 4xx in the routes' error shape
(`{"error", "message", "details"}`, server/errors.py) before the server sees them:

- runs (`/runs`, `/threads/{id}/runs`, `/stream`, `/wait`, `/batch`, crons): input messages
  that keep the thread valid (graphs/runtime/state.py), the `context` built with the graph's
  context schema (every field's type and range, tool names, the model), and
  `config.recursion_limit` at least `MIN_RECURSION_LIMIT`; crons need `assistant_id` and
  `schedule`;
- `/store/items/search` needs `namespace_prefix`, `/ui/{graph}` a component `name`;
- a compressed body (`Content-Encoding` other than identity) on any route: 415;
- a run over its user's run quotas (server/run_quota.py): 429.

Run requests are completed first, in the same pass over the body: agent-chat-ui's "Mark as
Resolved" becomes the resume that dismisses the question (server/resolve.py), and a streamed or
awaited run asks to be cancelled when its client leaves (server/disconnect.py).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

from graphs.deep_research.context import ResearchContext
from graphs.plan_execute.context import PlanExecuteContext
from graphs.router.context import RouterContext
from graphs.runtime.context import Context
from graphs.runtime.state import check_input_messages
from server.disconnect import RUN_ROUTE as DISCONNECT_ROUTE
from server.disconnect import cancelling_body
from server.errors import ApiError, error_response
from server.limits import replay
from server.resolve import RUN_PATH as RESOLVE_PATH
from server.resolve import resolved
from server.run_quota import check_run_quota
from settings import settings
from tools.credentials import REF_HEADER

CONTEXTS: dict[str, type[Context]] = {
    "router": RouterContext,
    "react": Context,
    "memory_writer": Context,
    "plan_execute": PlanExecuteContext,
    "deep_research": ResearchContext,
}
"""Each graph's context schema by graph id (langgraph.json; a test checks both agree). Runs of an
assistant created by id are checked against the fields every graph shares."""

MIN_RECURSION_LIMIT = 5
"""Fewer supersteps cannot finish a turn that calls one tool (model, tools, model) with the
graphs' own bookkeeping: such a run would stop with the request unanswered."""

RUNS = re.compile(r"^(/threads/[^/]+)?/runs(/stream|/wait|/batch)?/?$")
CRONS = re.compile(r"^(/threads/[^/]+)?/runs/crons/?$")
STORE_SEARCH = re.compile(r"^/store/items/search/?$")
UI = re.compile(r"^/ui/[^/]+/?$")


def _invalid(message: str, field: str) -> ApiError:
    return ApiError("VALIDATION_ERROR", message, {"field": field})


def check_context(assistant_id: Any, context: Any) -> None:
    """ApiError when `context` is not a valid run context of the assistant's graph."""
    if context is None:
        return
    if not isinstance(context, dict):
        raise _invalid("`context` must be an object of context fields.", "context")
    schema = CONTEXTS.get(assistant_id) if isinstance(assistant_id, str) else None
    schema = schema or Context
    known = {spec.name for spec in dataclasses.fields(schema)}
    try:
        schema(**{name: value for name, value in context.items() if name in known})
    except (TypeError, ValueError) as exc:
        message = str(exc)
        field = re.search(r"field `(\w+)`", message)
        raise _invalid(message, f"context.{field.group(1)}" if field else "context") from None


def check_recursion_limit(config: Any) -> None:
    if not isinstance(config, dict) or "recursion_limit" not in config:
        return
    limit = config["recursion_limit"]
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < MIN_RECURSION_LIMIT:
        raise _invalid(
            f"`config.recursion_limit` must be a whole number of at least {MIN_RECURSION_LIMIT} (got {limit!r}): "
            "fewer steps cannot finish a turn that calls a tool.",
            "config.recursion_limit",
        )


def check_no_credentials_reference(payload: dict) -> None:
    """A run names held request credentials only through server/request_credentials.py."""
    config = payload.get("config")
    for where, fields in (("context", payload.get("context")), ("config.configurable", _configurable(config))):
        if isinstance(fields, dict) and REF_HEADER in fields:
            raise _invalid(f"`{where}` must not set `{REF_HEADER}`: the server sets it.", f"{where}.{REF_HEADER}")


def _configurable(config: Any) -> Any:
    return config.get("configurable") if isinstance(config, dict) else None


def check_run(payload: Any) -> None:
    if not isinstance(payload, dict):
        return  # the server's own validation answers
    submitted = payload.get("input")
    if isinstance(submitted, dict):
        try:
            check_input_messages(submitted.get("messages"))
        except ValueError as exc:
            raise _invalid(str(exc), "input.messages") from None
    check_recursion_limit(payload.get("config"))
    check_no_credentials_reference(payload)
    check_context(payload.get("assistant_id"), payload.get("context"))


def _require_string(payload: dict, field: str, what: str) -> None:
    if not isinstance(payload.get(field), str) or not payload[field].strip():
        raise _invalid(f"`{field}` is required: {what}.", field)


def check_request(path: str, payload: Any) -> None:
    """ApiError when the JSON body of `POST path` must be refused."""
    if RUNS.match(path):
        for run in payload if isinstance(payload, list) else [payload]:
            check_run(run)
    elif CRONS.match(path) and isinstance(payload, dict):
        _require_string(payload, "assistant_id", "the graph or assistant the cron runs")
        _require_string(payload, "schedule", 'a cron expression such as "0 9 * * 1"')
        check_run(payload)
    elif STORE_SEARCH.match(path) and isinstance(payload, dict):
        prefix = payload.get("namespace_prefix")
        if not isinstance(prefix, list) or not all(isinstance(part, str) for part in prefix):
            raise _invalid(
                '`namespace_prefix` is required: a list of strings, e.g. ["memories", "alice"].', "namespace_prefix"
            )
    elif UI.match(path) and isinstance(payload, dict):
        _require_string(payload, "name", "the name of the UI component to load")


def _rewrites(path: str) -> list[Callable[[bytes], bytes | None]]:
    """What completes a run request on `path` before it is checked: "Mark as Resolved" made the
    resume that dismisses a question (server/resolve.py), and a streamed or awaited run cancelled
    when its client leaves (server/disconnect.py, `HTTP_STREAM_ON_DISCONNECT`)."""
    rewrites: list[Callable[[bytes], bytes | None]] = []
    if RESOLVE_PATH.match(path):
        rewrites.append(resolved)
    if DISCONNECT_ROUTE.search(path) and settings().HTTP_STREAM_ON_DISCONNECT == "cancel":
        rewrites.append(cancelling_body)
    return rewrites


def _internal(scope: dict) -> bool:
    """The server's own in-process client (`langgraph_sdk.get_client()` without a URL), which
    the LangGraph server serves under the root path `/noauth` without authentication."""
    root = str(scope.get("root_path") or "")
    return root == "/noauth" or root.startswith("/noauth/")


def _checked(path: str) -> bool:
    return bool(RUNS.match(path) or CRONS.match(path) or STORE_SEARCH.match(path) or UI.match(path))


class ApiChecksMiddleware:
    """ASGI middleware: POST bodies of the routes above completed (`_rewrites`) and checked
    (`check_request`), read once; compressed bodies refused."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            error = ApiError(
                "UNSUPPORTED_CONTENT_ENCODING",
                f"Request bodies are read as sent: send it uncompressed (Content-Encoding {encoding!r} is not accepted).",
                {"content_encoding": encoding},
            )
            await error_response(error)(scope, receive, send)
            return
        if scope["method"] != "POST" or not _checked(scope["path"]):
            await self.app(scope, receive, send)
            return
        messages, chunks = [], []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        if messages[-1]["type"] != "http.request":  # the client left while sending: nothing to check
            await self.app(scope, replay(messages, receive), send)
            return
        body = b"".join(chunks)
        rewritten = False
        for rewrite in _rewrites(scope["path"]):
            if (changed := rewrite(body)) is not None:
                body, rewritten = changed, True
        try:
            payload = json.loads(body or b"null")
        except (ValueError, UnicodeDecodeError):
            payload = None  # not JSON: the server's own validation answers
        try:
            check_request(scope["path"], payload)
            if RUNS.match(scope["path"]) and not _internal(scope):
                await check_run_quota(headers, len(payload) if isinstance(payload, list) else 1)
        except ApiError as error:
            await error_response(error)(scope, replay(messages, receive), send)
            return
        if rewritten:
            kept = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
            scope = {**scope, "headers": [*kept, (b"content-length", str(len(body)).encode())]}
            messages = [{"type": "http.request", "body": body, "more_body": False}]
        await self.app(scope, replay(messages, receive), send)
