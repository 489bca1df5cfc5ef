"""Whose data a run may touch: the authenticated user, or the context's `user_id` when trusted.

On a LangGraph server with the auth handler of `server/auth.py`, every run carries the user the
request was authenticated as (`runtime.server_info.user`). A regular user's runs act for that
user only, whatever `user_id` the caller put in the run's context: that field cannot be used to
read or write someone else's memories. Administrators (permission `ADMIN`), LangGraph Studio's
own user, and runs without an authenticated user (no auth configured, the server's in-process
calls such as the scheduled `memory_writer` runs, tests) act for the context's `user_id`.

Knowledge bases: a regular user's runs read their own and the shared ones (`kb_reader`), and
offer the model and auto-routing only those of the user the run acts for and the shared ones
(`store.knowledge.list_kbs(reader=run_user_id(runtime))`), administrators' runs included.
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk.auth import is_studio_user

ADMIN = "admin"


def acts_for_any_user(user: Any) -> bool:
    """True for users that may act for any `user_id`: administrators and Studio's user."""
    if is_studio_user(user) or getattr(user, "kind", None) == "StudioUser":
        return True
    return ADMIN in (getattr(user, "permissions", None) or ())


def kb_reader(user: Any) -> str | None:
    """Whose view of the knowledge bases a caller reads by name (`store.knowledge.readable_by`):
    a regular user reads their own and the shared ones; administrators, Studio's user and
    callers without an authenticated user (None) read every one."""
    if user is None or acts_for_any_user(user) or not getattr(user, "identity", None):
        return None
    return str(user.identity)


def run_kb_reader(runtime: Any) -> str | None:
    """`kb_reader` of the user who started the run (a node's `Runtime` or a tool's `ToolRuntime`)."""
    server_info = getattr(runtime, "server_info", None)
    return kb_reader(server_info.user if server_info is not None else None)


def run_user_id(runtime: Any) -> str:
    """The user id a run (a node's `Runtime` or a tool's `ToolRuntime`) acts for."""
    server_info = getattr(runtime, "server_info", None)
    user = server_info.user if server_info is not None else None
    if user is not None and user.identity and not acts_for_any_user(user):
        return user.identity
    return getattr(runtime.context, "user_id", None) or ""


def run_user_name(runtime: Any) -> str:
    """Who the run's user is in their own words, for the memories they write (`speaker`): the
    authenticated user's display name, else the user id the run acts for (`run_user_id`)."""
    server_info = getattr(runtime, "server_info", None)
    user = server_info.user if server_info is not None else None
    if user is not None and user.identity and not acts_for_any_user(user):
        name = getattr(user, "display_name", None)
        return str(name).strip() if isinstance(name, str) and name.strip() else user.identity
    return run_user_id(runtime)


class ThreadOwnerMismatch(RuntimeError):
    """A run acts for a user who does not own the thread it runs on (the thread changed hands
    after the run was queued). A RuntimeError so the server shows its message to the client."""


async def check_thread_owner(config: Any) -> None:
    """Refuse to go on when a regular user's run runs on a thread someone else now owns.

    A run carries the user who created it; an administrator may hand a thread to another user
    while that run waits in the queue. Every model call and tool batch checks the thread's
    current owner (an in-process call to the server), so such a run never reads the new
    owner's messages or acts on them. Runs without an authenticated regular user are not checked.
    """
    configurable = (config or {}).get("configurable") or {}
    user = configurable.get("langgraph_auth_user")
    thread_id = configurable.get("thread_id")
    if user is None or not thread_id or acts_for_any_user(user):
        return
    from tools.server_api import server_client

    thread = await server_client(act_as=user.identity).threads.get(thread_id)
    owner = (thread.get("metadata") or {}).get("owner")
    if owner is not None and owner != user.identity:
        raise ThreadOwnerMismatch(
            f"Run refused: thread {thread_id} now belongs to another user; runs queued by its "
            "previous owner do not run on it."
        )
