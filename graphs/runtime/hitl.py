"""Human-in-the-loop requests in LangChain's standard shape, and reading the answers to them.

A graph that pauses for a person (plan approval, a clarifying question) interrupts with the
`HITLRequest` shape of LangChain's `HumanInTheLoopMiddleware`, which agent-chat-ui and Agent Inbox
render as buttons and forms:

    {"action_requests": [{"name", "args", "description"}],
     "review_configs": [{"action_name", "allowed_decisions": [...]}]}

and is resumed with `{"decisions": [{"type": "approve" | "edit" | "reject" | "respond", ...}]}`.
`{"type": "ignore"}` (Agent Inbox's "Ignore", and what the server makes of agent-chat-ui's "Mark as
Resolved": server/resolve.py) dismisses the request: the graph ends the pause without acting.
The graph's own fields (`plan`, `question`, `error`, ...) sit beside those two keys, so older
clients that read them keep working. `decision()` turns any resume value into one `Decision`
(older shapes included); `reply_kind()` reads a plain chat message sent while a run is paused.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, NamedTuple

DecisionType = Literal["approve", "edit", "reject", "respond", "ignore"]


class ReplyError(ValueError):
    """A resume value that cannot be used; the text says what to send instead."""


class Decision(NamedTuple):
    """One answer to a request: its type, the edited args (edit) and the message (reject, respond)."""

    type: DecisionType
    args: dict[str, Any] | None = None
    message: str = ""


def request(name: str, args: dict[str, Any], description: str, allowed: list[DecisionType], **extra: Any) -> dict:
    """An interrupt value in the standard shape, with the graph's own fields beside it."""
    return {
        "action_requests": [{"name": name, "args": args, "description": description}],
        "review_configs": [{"action_name": name, "allowed_decisions": list(allowed)}],
        **extra,
    }


def is_request(value: Any) -> bool:
    """Whether an interrupt value is in the standard shape."""
    return isinstance(value, dict) and bool(value.get("action_requests")) and bool(value.get("review_configs"))


def decision(answer: Any) -> Decision | None:
    """The first decision of a standard `{"decisions": [...]}` answer, None for any other shape.

    Raises ReplyError when `decisions` is there but unusable.
    """
    if not isinstance(answer, dict) or "decisions" not in answer:
        return None
    decisions = answer["decisions"]
    if not isinstance(decisions, list) or not decisions or not isinstance(decisions[0], dict):
        raise ReplyError("'decisions' must be a list with one decision, e.g. [{'type': 'approve'}]")
    first = decisions[0]
    kind = first.get("type")
    if kind in ("approve", "ignore"):
        return Decision(kind)
    if kind == "edit":
        action = first.get("edited_action")
        if not isinstance(action, dict) or not isinstance(action.get("args"), dict):
            raise ReplyError("an 'edit' decision needs 'edited_action': {'name': ..., 'args': {...}}")
        return Decision("edit", args=action["args"])
    if kind in ("reject", "respond"):
        message = first.get("message")
        return Decision(kind, message=message.strip() if isinstance(message, str) else "")
    raise ReplyError(f"unknown decision type {kind!r}: use 'approve', 'edit', 'reject', 'respond' or 'ignore'")


IGNORE = {"decisions": [{"type": "ignore"}]}
"""The resume value that dismisses a request."""

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~])")


def markdown_text(text: str) -> str:
    """`text` escaped for a client that renders a request's `description` as markdown
    (agent-chat-ui, Agent Inbox): `17*23` keeps its asterisk, `<b>` stays text."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def json_arg(value: Any, name: str) -> Any:
    """An edited argument as data: form clients send every field back as text, so a JSON string is parsed."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ReplyError(f"'{name}' is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    return value


_APPROVE = {"approve", "approved", "yes", "yep", "yeah", "sure", "go", "ahead", "run", "do", "proceed", "lgtm"}
_APPROVE |= {"looks", "sounds", "good", "fine", "great", "perfect", "ok", "okay"}
_REJECT = {"no", "nope", "reject", "rejected", "cancel", "stop", "abort", "don't", "dont", "do", "not", "run"}
_FILLER = {"please", "thanks", "thank", "you", "the", "plan", "it", "that", "this", "is", "i", "now"}


def reply_kind(text: str) -> Literal["approve", "reject", "other"]:
    """Read a short chat reply to a pending approval: approve ("yes", "ok, go ahead", "approve the
    plan"), reject ("no", "cancel it"), or anything else (a new request or changes)."""
    words = re.sub(r"[^\w' ]+", " ", text.lower()).split()
    if not words or len(words) > 6:
        return "other"
    core = {w for w in words if w not in _FILLER} or {"ok"}
    if core <= _REJECT and core & {
        "no",
        "nope",
        "reject",
        "rejected",
        "cancel",
        "stop",
        "abort",
        "don't",
        "dont",
        "not",
    }:
        return "reject"
    if core <= _APPROVE:
        return "approve"
    return "other"
