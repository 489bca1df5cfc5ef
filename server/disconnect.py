"""A run whose client goes away is cancelled: ASGI middleware on the LangGraph server's own run
routes (the custom app's middleware sees every route of the server, `langgraph.json` `http`).

A chat client's Stop button closes the stream of the run it started. The LangGraph server keeps
such a run going unless the request said `"on_disconnect": "cancel"`, and agent-chat-ui (like
every client of langgraph-sdk's `useStream` with resumable streams) asks for `"continue"`: the
run went on to the end, its answer appeared on reload and the next message waited behind it.
With `HTTP_STREAM_ON_DISCONNECT=cancel` (the default) this sets `on_disconnect` to `cancel` in
the body of every run created by a streaming or waiting request (`POST /threads/{id}/runs/stream`,
`/threads/{id}/runs/wait`, `/runs/stream`, `/runs/wait`), so the server cancels the run
(`action="interrupt"`: the thread keeps what the run committed and the next message runs at
once) when its client leaves. With `client` the request's own value stands. Background runs
(`POST /threads/{id}/runs`) are never touched.
"""

from __future__ import annotations

import json
import re
from typing import Any

from settings import settings

RUN_ROUTE = re.compile(r"(?:^|/)(?:threads/[^/]+/)?runs/(?:stream|wait)/?$")

Scope = dict[str, Any]
Message = dict[str, Any]


def cancelling_body(body: bytes) -> bytes | None:
    """`body` (a run request's JSON) asking to cancel the run when its client leaves, or None
    when it is not a JSON object (the server then answers the request as it is) or asks it already."""
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    if not isinstance(payload, dict) or payload.get("on_disconnect") == "cancel":
        return None
    payload["on_disconnect"] = "cancel"
    return json.dumps(payload).encode()


class CancelOnDisconnectMiddleware:
    """Set `on_disconnect: "cancel"` on streamed and awaited runs (module doc)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or not RUN_ROUTE.search(scope["path"])
            or settings().HTTP_STREAM_ON_DISCONNECT != "cancel"
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left while sending
                await self.app(scope, _replay(message, receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        changed = cancelling_body(body)
        if changed is not None:
            body = changed
            headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
            scope = {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
        await self.app(scope, _replay({"type": "http.request", "body": body, "more_body": False}, receive), send)


def _replay(first: Message, receive: Any) -> Any:
    """A `receive` giving `first`, then the client's own messages (its disconnect included, which
    is how the server sees it leave)."""
    pending = [first]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed
