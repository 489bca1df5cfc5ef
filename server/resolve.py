""" "Mark as Resolved" from agent-chat-ui ends a paused run's question, as ASGI middleware.

agent-chat-ui's "Mark as Resolved" on a question (plan approval, clarifying question) starts a
run on the thread with `{"command": {"goto": "__end__"}}` and no resume value. LangGraph drops a
`goto` to the end from a run's input ("wrote to unknown channel branch:to:__end__") and runs the
paused node again, which asks the same question: the thread stays paused. This middleware turns
that command, on the thread-run routes, into the resume value that dismisses a request
(graphs/runtime/hitl.py `IGNORE`, also Agent Inbox's "Ignore"): each graph then ends the pause
without acting (plan_execute ends the turn without running the plan; deep_research researches the
request as it was asked). On a thread that is not paused the resume does nothing, as before.
Every other request passes untouched.
"""

from __future__ import annotations

import json
import re
from typing import Any

from graphs.runtime.hitl import IGNORE

RUN_PATH = re.compile(r"^/threads/[^/]+/runs(/stream|/wait)?/?$")
END = "__end__"
MAX_BODY = 1_000_000
"""Bodies read at most to look for the command (a goto-only command is a few hundred bytes)."""

Scope = dict[str, Any]


def resolved(body: bytes) -> bytes | None:
    """`body` with a goto-to-the-end command (and no resume) made the dismissing resume, or None
    when it has no such command."""
    if END.encode() not in body:
        return None
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    command = payload.get("command") if isinstance(payload, dict) else None
    if not isinstance(command, dict) or command.get("resume") is not None:
        return None
    goto = command.get("goto")
    if goto not in (END, [END]):
        return None
    rest = {key: value for key, value in command.items() if key not in ("goto", "resume")}
    payload["command"] = {**rest, "resume": IGNORE}
    return json.dumps(payload).encode()


class ResolveMiddleware:
    """ASGI middleware applying `resolved` to POST /threads/{id}/runs[/stream|/wait]."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not RUN_PATH.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left: pass it on
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > MAX_BODY and more:
                first = {"type": "http.request", "body": b"".join(chunks), "more_body": True}
                await self.app(scope, _replay([first], receive), send)
                return
        body = b"".join(chunks)
        changed = resolved(body)
        if changed is not None:
            body = changed
            headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
            scope = {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
        await self.app(scope, _replay([{"type": "http.request", "body": body, "more_body": False}], receive), send)


def _replay(messages: list[dict], then: Any) -> Any:
    """A `receive` that gives `messages` first, then reads on from `then` (a streamed response
    waits there for the client to disconnect)."""
    pending = list(messages)

    async def receive() -> dict:
        if pending:
            return pending.pop(0)
        return await then()

    return receive
