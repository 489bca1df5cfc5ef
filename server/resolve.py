""" "Mark as Resolved" from agent-chat-ui ends a paused run's question (applied to run requests by
server/api_checks.py).

agent-chat-ui's "Mark as Resolved" on a question (plan approval, clarifying question) starts a
run on the thread with `{"command": {"goto": "__end__"}}` and no resume value. LangGraph drops a
`goto` to the end from a run's input ("wrote to unknown channel branch:to:__end__") and runs the
paused node again, which asks the same question: the thread stays paused. This turns that
command, on the thread-run routes, into the resume value that dismisses a request
(graphs/runtime/hitl.py `IGNORE`, also Agent Inbox's "Ignore"): each graph then ends the pause
without acting (plan_execute ends the turn without running the plan; deep_research researches the
request as it was asked). On a thread that is not paused the resume does nothing, as before.
Every other request passes untouched.
"""

from __future__ import annotations

import json
import re

from graphs.runtime.hitl import IGNORE

RUN_PATH = re.compile(r"^/threads/[^/]+/runs(/stream|/wait)?/?$")
END = "__end__"


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
