"""A run whose client goes away is cancelled: `on_disconnect` set on the LangGraph server's own
run routes (applied to run requests by server/api_checks.py, whose middleware sees every route).

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

RUN_ROUTE = re.compile(r"(?:^|/)(?:threads/[^/]+/)?runs/(?:stream|wait)/?$")


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
