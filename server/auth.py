"""Who may call the server and what they may see (`langgraph.json` `auth.path`).

Authentication: API keys from `AGENT_API_KEYS` (`user_id=key,user_id=key`), sent as
`Authorization: Bearer <key>` or `x-api-key: <key>` (what `get_client(api_key=...)` sends).
Bearer JWTs from an identity provider are accepted beside them when `AGENT_JWT_SECRET` or
`AGENT_JWT_JWKS_URL` is set (server/jwt_auth.py). Users listed in `AGENT_ADMIN_USERS` get the
`admin` permission. With no keys (and no JWT settings) configured,
`langgraph dev` is open (every request is an administrator, a warning is logged) and any other
server (LangGraph Platform) refuses every request but Studio's.

Authorization, for everyone but administrators and LangGraph Studio's user:
- threads and crons: stamped with `metadata.owner` on creation (threads a run creates too;
  naming another owner is refused with 403); every read, search, update, delete and run is
  filtered to the caller's own;
- assistants: anyone may read and search them; changes only to one's own;
- store: the caller's memories (`("memories", <user>, ...)`) in full; knowledge bases read-only,
  and only those the caller may read (their own and the shared ones, server/kb.py):
  `("kb", <name>)`, `("kb_docs", <name>)`, and `get` on `("kb_registry",)`; anything else is refused.
Inside runs, tools act for the authenticated user whatever the run's context says
(tools/identity.py).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from functools import lru_cache
from typing import Any

from langgraph_sdk import Auth

from server import kb as kb_service
from server.jwt_auth import JWTConfig, JWTRejected, jwt_config, looks_like_jwt, verify_jwt
from settings import check_settings, settings
from store import knowledge, memory
from tools.identity import ADMIN, acts_for_any_user
from tools.server_api import (
    internal_user,
    is_internal_request,
    request_headers,
    server_kind,
    store_namespace,
)

logger = logging.getLogger(__name__)

OPEN_USER = "anonymous"
STUDIO_USER = "langgraph-studio-user"
SERVER_USER = "agent-engine-server"  # the server's own in-process calls under Aegra
KB_ROOTS = (
    knowledge.CHUNK_NAMESPACE_ROOT,
    knowledge.DOCUMENT_NAMESPACE_ROOT,
    *knowledge.REGISTRY_NAMESPACE,
)
STORE_READS = ("get", "search", "list_namespaces")

auth = Auth()


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


@lru_cache(maxsize=4)
def _parse_keys(spec: str, admin_users: frozenset[str]) -> dict[bytes, tuple[str, bool]]:
    keys: dict[bytes, tuple[str, bool]] = {}
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        user_id, separator, key = entry.partition("=")
        user_id, key = user_id.strip(), key.strip()
        if not separator or not user_id or not key:
            # Never echo the entry: it holds a secret.
            raise ValueError("AGENT_API_KEYS must be comma-separated 'user_id=key' pairs")
        keys[_digest(key)] = (user_id, user_id in admin_users)
    return keys


def api_keys() -> dict[bytes, tuple[str, bool]]:
    """sha256(key) -> (user_id, is_admin), from AGENT_API_KEYS and AGENT_ADMIN_USERS."""
    config = settings()
    spec = config.AGENT_API_KEYS.get_secret_value() if config.AGENT_API_KEYS else ""
    return _parse_keys(spec, frozenset(config.AGENT_ADMIN_USERS))


def _presented_key(headers: dict[str, str]) -> str | None:
    if authorization := headers.get("authorization"):
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return _header(headers, "x-api-key") or None


def _header(headers: dict[str, str], name: str) -> str:
    return headers.get(name, "").strip()


def trust_studio_header() -> bool:
    """`AGENT_TRUST_STUDIO_HEADER`: on `langgraph dev` with keys configured, treat requests that
    carry Studio's `x-auth-scheme: langsmith` header as an administrator. Off by default: anyone
    who can reach the server can send that header."""
    return settings().AGENT_TRUST_STUDIO_HEADER


@lru_cache(maxsize=1)
def _warn_open() -> None:
    logger.warning(
        "AGENT_API_KEYS is not set: the server accepts every request as an administrator. "
        "Set it (and AGENT_ADMIN_USERS) before exposing the server."
    )


@auth.authenticate
async def authenticate(authorization: Any, headers: Any = None) -> Auth.types.MinimalUserDict:
    """Map the request's API key to its user; without configured keys, an open administrator.
    (`langgraph_api` passes `authorization` and bytes-keyed `headers`, Aegra one str-keyed headers
    dict: tools/server_api.py reads both.)"""
    headers = request_headers(authorization, headers)
    if server_kind() == "aegra" and is_internal_request(headers):  # the server's own in-process client
        if acting_for := internal_user(headers):
            return {"identity": acting_for, "permissions": []}
        return {"identity": SERVER_USER, "permissions": [ADMIN]}
    keys = api_keys()
    tokens = jwt_config()
    local_dev = settings().LANGSMITH_LANGGRAPH_API_VARIANT == "local_dev"
    configured = bool(keys) or tokens is not None
    if configured and local_dev and trust_studio_header() and _header(headers, "x-auth-scheme") == "langsmith":
        return {"identity": STUDIO_USER, "permissions": [ADMIN]}
    if not configured:
        if not local_dev:
            raise Auth.exceptions.HTTPException(
                status_code=401,
                detail="This server has no API keys configured (AGENT_API_KEYS): access refused.",
            )
        _warn_open()
        return {"identity": OPEN_USER, "permissions": [ADMIN]}
    presented = _presented_key(headers)
    if presented is None:
        raise Auth.exceptions.HTTPException(
            status_code=401,
            detail="Missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'.",
        )
    if tokens is not None and looks_like_jwt(presented):
        return await _jwt_user(presented, tokens)
    digest = _digest(presented)
    match = None
    for known, user in keys.items():
        if hmac.compare_digest(known, digest):
            match = user
    if match is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid API key.")
    user_id, admin = match
    return {"identity": user_id, "permissions": [ADMIN] if admin else []}


async def _jwt_user(token: str, config: JWTConfig) -> Auth.types.MinimalUserDict:
    """The user a verified bearer JWT names (server/jwt_auth.py); 401 with the reason otherwise.
    JWT users are regular users, administrators when listed in AGENT_ADMIN_USERS."""
    try:
        user_id = await verify_jwt(token, config)
    except JWTRejected as exc:
        raise Auth.exceptions.HTTPException(status_code=401, detail=f"Invalid bearer token: {exc}") from None
    admin = user_id in settings().AGENT_ADMIN_USERS
    return {"identity": user_id, "permissions": [ADMIN] if admin else []}


def _owner_filter(ctx: Auth.types.AuthContext) -> dict[str, str] | None:
    return None if acts_for_any_user(ctx.user) else {"owner": ctx.user.identity}


def _stamp_owner(ctx: Auth.types.AuthContext, value: dict) -> None:
    """Stamp the caller as owner. An administrator may name another owner (creating for a user);
    a regular user naming anyone but themselves is refused (403), never silently re-labelled."""
    metadata = value.get("metadata")
    if not isinstance(metadata, dict):
        metadata = value["metadata"] = {}
    if acts_for_any_user(ctx.user):
        metadata.setdefault("owner", ctx.user.identity)
        return
    _refuse_foreign_owner(ctx, metadata)
    metadata["owner"] = ctx.user.identity


def _refuse_foreign_owner(ctx: Auth.types.AuthContext, metadata: dict) -> None:
    if metadata.get("owner", ctx.user.identity) != ctx.user.identity:
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail="metadata.owner cannot name another user: only an administrator creates or hands over "
            "an item for someone else.",
        )


# One handler over several resources: `auth.on(resources=..., actions=...)`, the SDK's typed form
# (stacked `auth.on.<resource>.<action>` decorators register the same but do not type-check).
@auth.on(resources=["threads", "crons", "assistants"], actions="create")
async def on_create(ctx: Auth.types.AuthContext, value: dict) -> dict[str, str] | None:
    """Stamp the creator as owner; only an owner's existing item may be returned instead."""
    _stamp_owner(ctx, value)
    return _owner_filter(ctx)


@auth.on(resources=["threads", "crons", "assistants"], actions="update")
async def on_update(ctx: Auth.types.AuthContext, value: dict) -> dict[str, str] | None:
    """Changes only to one's own items, and never of their owner: a regular user who could
    re-label a thread as someone else's would plant messages (and queued runs) in their list.
    When an administrator hands a thread over, the runs still queued or running on it (its
    previous owner's) are cancelled: none of them runs on the new owner's thread."""
    metadata = value.get("metadata")
    if acts_for_any_user(ctx.user):
        if ctx.resource == "threads" and isinstance(metadata, dict) and "owner" in metadata:
            await _cancel_open_runs(str(value["thread_id"]))
        return None
    if isinstance(metadata, dict):
        _refuse_foreign_owner(ctx, metadata)
    return _owner_filter(ctx)


async def _cancel_open_runs(thread_id: str) -> None:
    from tools.server_api import server_client

    client = server_client()
    for run in await client.runs.list(thread_id, limit=1000):
        if run["status"] in ("pending", "running"):
            await client.runs.cancel(thread_id, run["run_id"], action="interrupt")


@auth.on(resources="threads", actions="create_run")  # typed for a plain dict value, like the others
async def on_run(ctx: Auth.types.AuthContext, value: dict) -> dict[str, str] | None:
    """Runs only on one's own threads (their input, context and config are checked before,
    server/api_checks.py). The run's metadata is stamped too: the server copies it onto a
    thread the run creates (stateless runs, `if_not_exists="create"`)."""
    if acts_for_any_user(ctx.user):
        # Not stamped: run metadata is also merged into an existing thread's, and an
        # administrator's run must not take a user's thread over.
        return None
    _stamp_owner(ctx, value)
    return _owner_filter(ctx)


@auth.on(resources=["threads", "crons"])
async def owner_only(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    """Threads (and their runs) and crons: only the owner's."""
    return _owner_filter(ctx)


@auth.on(resources="assistants", actions=["read", "search"])
async def assistants_are_shared(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Every user may read and search assistants (the graphs' own ones carry no owner)."""
    return None


@auth.on.assistants
async def assistant_changes(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    """Updating or deleting an assistant: only one's own."""
    return _owner_filter(ctx)


@auth.on.store()
async def store_scope(ctx: Auth.types.AuthContext, value: dict) -> None:
    """Own memories in full, knowledge bases one may read read-only, nothing else."""
    if acts_for_any_user(ctx.user):
        return None
    namespace = store_namespace(value)
    if namespace[:2] == memory.user_prefix(ctx.user.identity):
        return None
    if namespace[:1] and namespace[0] in KB_ROOTS:
        if ctx.action not in STORE_READS:
            raise Auth.exceptions.HTTPException(status_code=403, detail="Knowledge bases are read-only for this user.")
        await _check_kb_read(ctx.user.identity, ctx.action, namespace, value.get("key"))
        return None
    raise Auth.exceptions.HTTPException(
        status_code=403,
        detail=(
            f"Namespace {list(namespace)} is not yours: use "
            f"{list(memory.user_prefix(ctx.user.identity))} (your memories) or "
            f"['{knowledge.CHUNK_NAMESPACE_ROOT}', <name>] (knowledge bases, read-only)."
        ),
    )


async def _check_kb_read(user_id: str, action: str, namespace: tuple, key: Any) -> None:
    """A regular user reads one knowledge base at a time, and only one they may read (their own
    and the shared ones): its chunks `("kb", <name>)`, its documents `("kb_docs", <name>)`, its
    registry entry (`get` on `("kb_registry",)`). Listing the registry goes through
    `GET /api/v1/kb`, which lists only those."""
    if namespace[0] == knowledge.REGISTRY_NAMESPACE[0]:
        if action != "get" or len(namespace) != 1:
            raise Auth.exceptions.HTTPException(
                status_code=403,
                detail="List knowledge bases with GET /api/v1/kb; the store API reads one entry "
                "(get on ['kb_registry'] with its name).",
            )
        name = key
    elif len(namespace) < 2:
        raise Auth.exceptions.HTTPException(
            status_code=403, detail=f"Name one knowledge base: ['{namespace[0]}', <name>]."
        )
    else:
        name = namespace[1]
    try:
        await knowledge.get_kb(await kb_service.server_store(), str(name), reader=user_id)
    except ValueError as exc:  # unknown, not readable by this user, or an invalid name
        raise Auth.exceptions.HTTPException(status_code=403, detail=str(exc)) from None


def warn_if_closed() -> bool:
    """At start-up: log a warning when no server but `langgraph dev` can serve anybody, that is
    when neither API keys nor JWT users are configured (every request would get 401). Returns
    whether it warned."""
    if api_keys() or jwt_config() is not None or settings().LANGSMITH_LANGGRAPH_API_VARIANT == "local_dev":
        return False
    logger.warning(
        "No API keys or JWT users are configured (AGENT_API_KEYS, AGENT_JWT_SECRET or "
        "AGENT_JWT_JWKS_URL): this server refuses every request with 401 until one is set."
    )
    return True


# A bad environment variable (a malformed AGENT_API_KEYS among them) stops the server at start-up
# with the variable's name, rather than failing every request.
check_settings()
api_keys()
warn_if_closed()
