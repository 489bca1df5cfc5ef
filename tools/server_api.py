"""The LangGraph server's own API, for code that runs inside one of its runs.

`langgraph_sdk.get_client()` without a URL is the server's in-process client: it calls the
server's routes in the same process, as the server itself (no credentials, no auth filters).
Graphs and tools reach the server only through this module: scheduling background runs
(graphs/runtime/memory_schedule.py), checking a thread's owner (tools/identity.py), checking
that a run belongs to a thread (graphs/router/feedback.py), cancelling runs (server/auth.py).
Only meaningful inside a server run (`runtime.server_info` is set) or a server request handler.
"""

from __future__ import annotations

import uuid
from typing import Any


def server_client() -> Any:
    """The server's in-process `langgraph_sdk` client."""
    from langgraph_sdk import get_client

    return get_client()


async def thread_run(thread_id: str, run_id: str) -> dict | None:
    """The server's record of run `run_id` of thread `thread_id`; None when that thread has no
    such run (whatever other thread may have one)."""
    from langgraph_sdk.errors import NotFoundError

    try:
        uuid.UUID(str(run_id))  # the server's run ids; anything else names no run
    except ValueError:
        return None
    try:
        run = await server_client().runs.get(thread_id, run_id)
    except NotFoundError:
        return None
    return run if str(run.get("thread_id")) == str(thread_id) else None
