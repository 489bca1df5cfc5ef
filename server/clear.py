"""`POST /api/v1/clear` (seed 003): empty a conversation's messages, its long-term memories untouched.

A conversation is a thread of the `router` graph (seed 003's `session_id`); clearing it is the
router's own `{"clear": true}` input, run on the thread through the server's in-process client,
so the thread's history keeps a checkpoint of what was there. Only the thread's owner (or an
administrator) may clear it; another user's thread answers 404 as an unknown one does.
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk.errors import ConflictError, NotFoundError
from pydantic import BaseModel, Field, model_validator

from server.errors import ApiError
from tools.identity import acts_for_any_user
from tools.server_api import server_client

ROUTER = "router"


class ClearRequest(BaseModel):
    thread_id: str | None = Field(None, min_length=1, max_length=200, description="The conversation's thread.")
    session_id: str | None = Field(None, min_length=1, max_length=200, description="Seed 003's name of `thread_id`.")

    @model_validator(mode="after")
    def _one_thread(self) -> ClearRequest:
        if not (self.thread_id or self.session_id):
            raise ValueError("send `thread_id` (or seed 003's `session_id`): the conversation to clear")
        return self

    @property
    def thread(self) -> str:
        return str(self.thread_id or self.session_id)


def _messages(thread: dict) -> list:
    return list((thread.get("values") or {}).get("messages") or [])


async def clear_thread(user: Any, thread_id: str) -> dict:
    """Clear `thread_id` for `user`: `{"status", "thread_id", "removed_messages", "remaining_messages"}`."""
    identity = str(getattr(user, "identity", None) or "") or None
    client = server_client(act_as=identity)
    missing = ApiError("CHAT_NOT_FOUND", f"No conversation {thread_id!r} of yours.", {"thread_id": thread_id})
    try:
        thread = await client.threads.get(thread_id)
    except NotFoundError:
        raise missing from None
    metadata = thread.get("metadata") or {}
    if user is not None and not acts_for_any_user(user) and metadata.get("owner") != identity:
        raise missing
    graph = metadata.get("graph_id")
    if graph not in (None, ROUTER):
        raise ApiError(
            "INVALID_REQUEST",
            f"Thread {thread_id!r} is a {graph} conversation: /api/v1/clear clears router conversations "
            "(start a new thread to start over with another graph).",
            {"thread_id": thread_id, "graph": graph},
        )
    before = len(_messages(thread))
    try:
        await client.runs.wait(thread_id, ROUTER, input={"clear": True})
    except ConflictError:
        raise ApiError(
            "THREAD_BUSY",
            "The conversation has a run in progress: clear it once the run ends (or cancel the run).",
            {"thread_id": thread_id, "retry_after": 2},
        ) from None
    remaining = len(_messages(await client.threads.get(thread_id)))
    return {
        "status": "ok",
        "thread_id": thread_id,
        "removed_messages": before - remaining,
        "remaining_messages": remaining,
    }
