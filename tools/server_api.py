"""The LangGraph server's own API, for code that runs inside one of its runs.

`langgraph_sdk.get_client()` without a URL is the server's in-process client: it calls the
server's routes in the same process, as the server itself (no credentials, no auth filters).
Graphs and tools reach the server only through this module: scheduling background runs
(graphs/runtime/memory_schedule.py), checking a thread's owner (tools/identity.py), checking
that a run belongs to a thread (graphs/router/feedback.py), cancelling runs (server/auth.py).
Only meaningful inside a server run (`runtime.server_info` is set) or a server request handler.

The package is served by `langgraph dev` / LangGraph Platform (the `langgraph_api` server) or by
Aegra (self-hosted, several replicas). This module owns where they differ:
- the in-process client: `langgraph_api` has one (`get_client()` without a URL); Aegra has none,
  so its FastAPI app is called in-process through an ASGI transport, carrying a token that only
  this process knows (`is_internal_request` lets server/auth.py accept it as the server itself);
- the authenticate handler's arguments: `langgraph_api` passes `authorization` and `headers`
  (bytes keys) by name, Aegra passes one headers dict (str keys) positionally (`request_headers`);
- the server's store (`server_store`), which `langgraph_api` and Aegra keep in different modules;
- store auth values: `namespace` for get/put/delete, `namespace_prefix` (search) and `prefix`
  (list namespaces) under Aegra (`store_namespace`);
- what tells a run apart in the `configurable` its subgraphs inherit: `langgraph_api`'s request
  id, Aegra's `run_id` (`server_run_key`);
- delayed runs: `langgraph_api` honours `after_seconds` and `multitask_strategy`, Aegra neither
  (`server_delays_runs`; graphs/runtime/memory_schedule.py debounces without them);
- the server's own Postgres pool: Aegra's (checkpoints and store) is reached as `server_pool`,
  for server/http.py to keep it quick to reconnect (store/pool.py `keep_pool_fresh`), and its
  pools' sizes as `server_pool_sizes`, for the connection budget (store/budget.py);
  `langgraph dev` serves on our factories' pools, which reconnect by themselves.
"""

from __future__ import annotations

import hmac
import secrets
import sys
import uuid
from collections.abc import Mapping
from typing import Any, Literal

ServerKind = Literal["langgraph", "aegra"]

INTERNAL_HEADER = "x-agent-engine-internal"
ACT_AS_HEADER = "x-agent-engine-act-as"
_INTERNAL_TOKEN = secrets.token_urlsafe(32)  # never leaves this process: sent only over the ASGI transport


def server_kind() -> ServerKind:
    """Which server runs this process: Aegra when its app module is loaded, else `langgraph_api`."""
    return "aegra" if "aegra_api.main" in sys.modules else "langgraph"


def server_delays_runs() -> bool:
    """Whether the server honours a run's `after_seconds` and `multitask_strategy="rollback"`
    (`langgraph_api` does; Aegra accepts and ignores them)."""
    return server_kind() == "langgraph"


def server_client(act_as: str | None = None) -> Any:
    """The server's in-process `langgraph_sdk` client. `act_as` names the user a call is made
    for: Aegra keeps threads and runs per user, so its calls are made as that user (on
    `langgraph_api` the in-process client sees every thread anyway)."""
    if server_kind() == "aegra":
        return _aegra_client(act_as)
    from langgraph_sdk import get_client

    return get_client()


def _aegra_client(act_as: str | None) -> Any:
    import httpx
    from langgraph_sdk.client import LangGraphClient

    app = sys.modules["aegra_api.main"].app
    http = httpx.AsyncClient(
        base_url="http://aegra.internal",
        transport=httpx.ASGITransport(app=app),
        headers={INTERNAL_HEADER: _INTERNAL_TOKEN, **({ACT_AS_HEADER: act_as} if act_as else {})},
        timeout=httpx.Timeout(connect=5, read=300, write=300, pool=5),
    )
    return LangGraphClient(http)


async def server_store() -> Any:
    """The server's own store (the one its runs get): `langgraph_api.store.get_store()`, or under
    Aegra its database manager's store (Aegra builds its own store from `aegra.json`)."""
    if server_kind() == "aegra":
        from aegra_api.core.database import db_manager

        return db_manager.get_store()
    from langgraph_api.store import get_store

    return await get_store()


def server_pool() -> Any:
    """Aegra's psycopg pool of checkpoints and store (`db_manager.lg_pool`, open once Aegra's
    start-up has run); None on another server or before it is open."""
    if server_kind() != "aegra":
        return None
    from aegra_api.core.database import db_manager

    return db_manager.lg_pool


def server_pool_sizes() -> dict[str, int]:
    """The most connections each of Aegra's pools opens (its settings, from the environment):
    `SQLALCHEMY_POOL_SIZE`, `SQLALCHEMY_MAX_OVERFLOW`, `LANGGRAPH_MAX_POOL_SIZE`; empty on another
    server."""
    if server_kind() != "aegra":
        return {}
    from aegra_api.settings import settings as aegra_settings

    pool = aegra_settings.pool
    return {
        "SQLALCHEMY_POOL_SIZE": pool.SQLALCHEMY_POOL_SIZE,
        "SQLALCHEMY_MAX_OVERFLOW": pool.SQLALCHEMY_MAX_OVERFLOW,
        "LANGGRAPH_MAX_POOL_SIZE": pool.LANGGRAPH_MAX_POOL_SIZE,
    }


def request_headers(authorization: Any, headers: Any = None) -> dict[str, str]:
    """The request's headers as a lower-case str dict, whichever way the server called the
    authenticate handler: `(authorization, headers)` with bytes keys (`langgraph_api`) or one
    str-keyed headers dict passed positionally (Aegra)."""
    if isinstance(authorization, Mapping) and headers is None:
        headers, authorization = authorization, None
    out: dict[str, str] = {}
    for key, value in (headers or {}).items():
        name = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
        out[name.lower()] = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    if isinstance(authorization, str) and authorization and "authorization" not in out:
        out["authorization"] = authorization
    return out


def is_internal_request(headers: Mapping[str, str]) -> bool:
    """The request is this process's own in-process client (Aegra): it acts as the server."""
    presented = headers.get(INTERNAL_HEADER) or ""
    return bool(presented) and hmac.compare_digest(presented.encode(), _INTERNAL_TOKEN.encode())


def internal_user(headers: Mapping[str, str]) -> str | None:
    """The user an internal request acts for (`server_client(act_as=...)`); None for the server."""
    return headers.get(ACT_AS_HEADER) or None if is_internal_request(headers) else None


def store_namespace(value: Mapping[str, Any]) -> tuple[str, ...]:
    """The namespace a store request acts on: `namespace` (get, put, delete, and search on
    `langgraph_api`), or Aegra's `namespace_prefix` (search) and `prefix` (list namespaces)."""
    for key in ("namespace", "namespace_prefix", "prefix"):
        if value.get(key):
            return tuple(value[key])
    return ()


def server_run_key(configurable: Mapping[str, Any]) -> str | None:
    """The server run a graph step belongs to, from the `configurable` every subgraph of the run
    inherits: `langgraph_request_id` (`langgraph_api`) or `run_id` (Aegra); None outside a server."""
    key = configurable.get("langgraph_request_id") or configurable.get("run_id")
    return str(key) if key else None


async def thread_run(thread_id: str, run_id: str, act_as: str | None = None) -> dict | None:
    """The server's record of run `run_id` of thread `thread_id`; None when that thread has no
    such run (whatever other thread may have one). `act_as`: the user whose thread it is (Aegra
    keeps threads and runs per user, `server_client`)."""
    from langgraph_sdk.errors import NotFoundError

    try:
        uuid.UUID(str(run_id))  # the server's run ids; anything else names no run
    except ValueError:
        return None
    try:
        run = await server_client(act_as=act_as).runs.get(thread_id, run_id)
    except NotFoundError:
        return None
    return run if str(run.get("thread_id")) == str(thread_id) else None
