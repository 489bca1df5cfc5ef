"""HTTP routes beside the graphs (`langgraph.json` `http.app`), behind the same auth
(`http.enable_custom_route_auth`): web search and read (seed 002), knowledge bases, the tool
list, and the MCP endpoint of server/mcp_tools.py. docs/http.md describes every route; they
appear in the server's OpenAPI document (`/docs`).

Errors are `{"error": CODE, "message", "details"}` (server/errors.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from typing import Annotated, Any

from fastapi import Body, FastAPI, File, Form, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from langchain_core.messages import convert_to_messages
from pydantic import BaseModel, Field

from graphs.utilities.spaces import agent_for_auto, title_and_space, title_space_agent
from graphs.utilities.tasks import conversation_title, daily_tip, related_questions
from server import clear, ingest_jobs, tool_calls, utilities, web
from server import kb as kb_service
from server.api_checks import ApiChecksMiddleware
from server.dev_persistence import DurableWritesMiddleware, durable_attempts
from server.errors import ApiError, DatabaseUnavailableMiddleware, api_error_handler, validation_error_handler
from server.limits import BodyLimitMiddleware
from server.logs import quiet_duplicate_run_errors
from server.mcp_tools import mcp
from server.request_credentials import RequestCredentialsMiddleware
from server.route_auth import protect_routes
from server.run_recovery import install_aegra_recovery
from server.ui_cards import ui_card
from settings import settings
from settings.redact import install_log_redaction
from store import knowledge
from store.budget import PoolSizes, check, postgres_limit
from store.embeddings import preload_embeddings
from store.knowledge.config import KB_NAME
from store.postgres import (
    StoreIndexMismatch,
    StoreLocationError,
    close_server_backends,
    keep_pool_fresh,
    prepare_server_store,
)
from tools.identity import kb_reader
from tools.quota import QuotaExceeded, charge
from tools.server_api import server_kind, server_pool, server_pool_sizes

KB_NAME_PATTERN = f"^{KB_NAME.pattern}$"
logger = logging.getLogger(__name__)


async def _load_embeddings() -> None:
    """Load the embeddings model in the background, so that no run or search waits for it."""
    started = time.monotonic()
    try:
        model = await preload_embeddings()
    except Exception as exc:  # a bad configuration: each search by meaning reports it to its caller
        logger.error(
            "Embeddings model not loaded at start-up: %s. Searches by meaning (memory recall, knowledge-base "
            "dense, hybrid and graph search, the store API's search by query) and writes to the store's index "
            "fail with this error until it loads.",
            exc,
        )
        return
    logger.info("Embeddings model %s ready (loaded in %.1f s)", model, time.monotonic() - started)


async def _import_model_client() -> None:
    """Import the chat-model client of the configured model once the server is up (`openai:*`:
    langchain_openai, graphs/runtime/openai_compatible.py), so that neither the start-up nor the
    first run waits for it."""
    if settings().AGENT_MODEL.startswith("openai:"):
        await asyncio.to_thread(importlib.import_module, "graphs.runtime.openai_compatible")


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI):
    """Keep configured secrets out of the log from the start (settings/redact.py) and one log
    record per failed run, load the embeddings model and the model client in the background,
    and run the MCP endpoint's session manager while the server runs; under Aegra, keep its
    Postgres pool quick to reconnect, let runs resume after a Postgres outage and make the
    package's tables ready beside its store."""
    install_log_redaction()
    quiet_duplicate_run_errors()
    durable_attempts()  # `langgraph dev`: a run's attempt on disk before it runs (server/dev_persistence.py)
    loading = asyncio.create_task(_load_embeddings())
    # Aegra's own Postgres pool: quick to serve again after a Postgres restart.
    pool = server_pool()
    fresh = asyncio.create_task(keep_pool_fresh(pool)) if pool is not None else None
    if server_kind() == "aegra":
        install_aegra_recovery()  # runs resume after a Postgres crash (server/run_recovery.py)
    if pool is not None:
        # The package's tables beside Aegra's store, migrated before the first request needs them.
        await _prepare_server_store()
        await _check_connection_budget(pool)
    async with mcp.session_manager.run():
        importing = asyncio.create_task(_import_model_client())
        yield
    await ingest_jobs.RUNNER.close()
    loading.cancel()
    importing.cancel()
    if fresh is not None:
        fresh.cancel()
    await close_server_backends()


async def _check_connection_budget(pool: Any) -> None:
    """Under Aegra: stop the replica (ConnectionBudgetError, in its log) when REPLICAS replicas'
    pools can open more connections than Postgres accepts (store/budget.py); with Postgres down
    the check is skipped, with a warning."""
    sizes = PoolSizes(**server_pool_sizes(), POSTGRES_POOL_SIZE=settings().POSTGRES_POOL_SIZE)
    try:
        async with pool.connection() as conn:
            limit = await postgres_limit(conn)
    except Exception as exc:
        logger.warning("The Postgres connection budget was not checked (Postgres unreachable): %s", exc)
        return
    replicas, reserved = settings().REPLICAS, settings().POSTGRES_RESERVED_CONNECTIONS
    check(limit, replicas, reserved, sizes)
    logger.info(
        "Postgres connections: %d replica(s) x (%s = %d) + %d reserved = %d of %d",
        replicas,
        sizes.formula(),
        sizes.per_replica(),
        reserved,
        replicas * sizes.per_replica() + reserved,
        limit,
    )


async def _prepare_server_store() -> None:
    """Open and migrate the package's tables beside the server's own store (store/server_store.py
    `prepare_server_store`); with Postgres down, the first request that needs them does it."""
    try:
        await prepare_server_store(await kb_service.server_store())
    except (StoreLocationError, StoreIndexMismatch):
        raise  # a misconfiguration: the replica does not start, its log says why
    except Exception as exc:
        logger.warning(
            "The package's tables and the store's vector index beside the server's store are not ready yet "
            "(the first request that needs them prepares them; until then a search by meaning answers an "
            "error): %s",
            exc,
        )


app = FastAPI(
    title="agent-engine HTTP API",
    version="0.1.0",
    lifespan=lifespan,
    # The LangGraph server serves /docs and /openapi.json with these routes merged in.
    docs_url=None,
    redoc_url=None,
    openapi_url=None,
)
durable_attempts()  # before the server's workers take the runs left by a crash
app.add_exception_handler(ApiError, api_error_handler)
app.add_exception_handler(RequestValidationError, validation_error_handler)
# Request body limits (server/limits.py): 413 PAYLOAD_TOO_LARGE, 400 JSON_TOO_DEEP.
app.add_middleware(BodyLimitMiddleware)
# `langgraph dev`: thread, run and assistant records on disk when written (server/dev_persistence.py).
app.add_middleware(DurableWritesMiddleware)
# Per-request model and search keys taken off every request, held for the run (server/request_credentials.py).
app.add_middleware(RequestCredentialsMiddleware)
# The LangGraph server's own routes: runs completed ("Mark as Resolved", cancelled when the client
# leaves) and checked, bad crons, store searches and compressed bodies refused with a 4xx before
# anything is written (server/api_checks.py).
app.add_middleware(ApiChecksMiddleware)
# Postgres down: 503 DATABASE_UNAVAILABLE on every route of the server, the LangGraph ones too.
app.add_middleware(DatabaseUnavailableMiddleware)
# The chat-client cards with their scripts inline: no /ui/* pass-through needed (server/ui_cards.py).
app.add_api_route("/ui/{graph_id}", ui_card, methods=["POST"], include_in_schema=False)

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": description}
    for status, description in (
        (400, "Bad request: `{error, message, details}`"),
        (401, "Missing or invalid credentials"),
        (404, "A named item (knowledge base, tool, ...) does not exist"),
        (413, "PAYLOAD_TOO_LARGE: the body is over the route's limit"),
        (422, "VALIDATION_ERROR naming the field"),
        (429, "QUOTA_EXCEEDED or INGEST_BUSY with details.retry_after"),
        (503, "DATABASE_UNAVAILABLE with details.retry_after: Postgres cannot be reached"),
    )
}


def _user(request: Request) -> Any:
    """The authenticated user (None when the server has no auth configured)."""
    return request.scope.get("user")


def _reader(request: Request) -> str | None:
    """Whose knowledge bases the caller reads (tools.identity.kb_reader)."""
    return kb_reader(_user(request))


# --- web ----------------------------------------------------------------------------------------


@app.post("/api/v1/web/search", tags=["web"], responses=ERRORS)
async def web_search(body: web.WebSearchRequest, request: Request) -> dict:
    """Search the web (the `web_search` tool's code, cache and quota)."""
    return await web.search(await kb_service.server_store(), _user(request), body)


@app.post("/api/v1/web/read", tags=["web"], responses=ERRORS)
async def web_read(body: web.WebReadRequest, request: Request) -> dict:
    """Read web pages as markdown, one result per URL (the `web_read` tool's code, cache and quota)."""
    return await web.read(await kb_service.server_store(), _user(request), body)


# --- model utilities (seed 000) -------------------------------------------------------------------


async def _charge_utility(request: Request) -> None:
    """One call of a model utility route against the user's quota (UTILITY_QUOTA_*)."""
    try:
        await charge(await kb_service.server_store(), _user(request), "utility")
    except QuotaExceeded as exc:
        raise web.quota_error(exc) from None


@app.post("/api/v1/title", tags=["utilities"], responses=ERRORS)
async def title(body: utilities.TitleRequest, request: Request) -> dict:
    """A short title for a conversation."""
    await _charge_utility(request)
    async with utilities.model_errors(body.model) as context:
        messages = convert_to_messages([m.model_dump() for m in body.messages])
        return {"title": await conversation_title(messages, context)}


@app.post("/api/v1/related-questions", tags=["utilities"], responses=ERRORS)
async def related(body: utilities.RelatedRequest, request: Request) -> dict:
    """Follow-up questions a user is likely to ask after an answer."""
    await _charge_utility(request)
    async with utilities.model_errors(body.model) as context:
        return {"questions": await related_questions(body.question, body.answer, context, body.count)}


@app.post("/api/v1/title-and-space", tags=["utilities"], responses=ERRORS)
async def title_space(body: utilities.TitleAndSpaceRequest, request: Request) -> dict:
    """A title for a conversation's first message and the space (one of `spaces`) it belongs in."""
    await _charge_utility(request)
    async with utilities.model_errors(body.model) as context:
        spaces = [space.model_dump(exclude_none=True) for space in body.spaces]
        return await title_and_space(body.message, spaces, context)


@app.post("/api/v1/title-space-agent", tags=["utilities"], responses=ERRORS)
async def title_space_and_agent(body: utilities.TitleSpaceAgentRequest, request: Request) -> dict:
    """A title, the space and that space's agent for a conversation's first message."""
    await _charge_utility(request)
    async with utilities.model_errors(body.model) as context:
        spaces = [space.model_dump(exclude_none=True) for space in body.spacesWithAgents]
        return await title_space_agent(body.message, spaces, context)


@app.post("/api/v1/agent-for-auto", tags=["utilities"], responses=ERRORS)
async def auto_agent(body: utilities.AgentForAutoRequest, request: Request) -> dict:
    """The agent of the current space best suited to answer a message (the client's auto mode)."""
    await _charge_utility(request)
    async with utilities.model_errors(body.model) as context:
        return await agent_for_auto(body.message, body.currentSpace.model_dump(exclude_none=True), context)


@app.get("/api/v1/daily-tip", tags=["utilities"], responses=ERRORS)
async def tip(
    request: Request,
    topic: Annotated[str | None, Query(max_length=200)] = None,
    model: Annotated[str | None, Query(description="'provider:model'; default AGENT_MODEL.")] = None,
) -> dict:
    """One practical tip for today (optionally on a topic)."""
    await _charge_utility(request)
    async with utilities.model_errors(model) as context:
        return await daily_tip(context, topic)


# --- conversations (seed 003) ---------------------------------------------------------------------


@app.post("/api/v1/clear", tags=["conversations"], responses=ERRORS)
async def clear_conversation(body: clear.ClearRequest, request: Request) -> dict:
    """Empty a router conversation's messages and summary (the caller's own thread; long-term
    memories untouched): `{"status": "ok", "thread_id", "removed_messages", "remaining_messages"}`."""
    return await clear.clear_thread(_user(request), body.thread)


# --- tools --------------------------------------------------------------------------------------


@app.get("/api/v1/tools", tags=["tools"])
@app.get("/api/v1/tools/list", tags=["tools"], include_in_schema=False)
async def list_tools() -> dict:
    """Every tool the agents can call (built-in and MCP) as an OpenAI-style function schema,
    their `count`, and the configured MCP servers that could not be reached."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from tools.registry import available_tools

    tools, problems = await available_tools()
    schemas = [convert_to_openai_tool(tool) for tool in tools.values()]
    return {"tools": schemas, "count": len(schemas), "unavailable": problems}


@app.post("/api/v1/tools/{name}", tags=["tools"], responses=ERRORS)
async def call_tool(
    name: str,
    request: Request,
    args: Annotated[dict[str, Any], Body(description="The tool's arguments (its JSON schema in GET /api/v1/tools).")],
) -> dict:
    """Run one tool for the caller, as the agents run it (server/tool_calls.py): the same
    argument checks, timeout, retries and per-user quotas; memory tools act on the caller's own
    memories. The tool's `result` with `duration_ms`, `attempts`, `started_at`, `finished_at`;
    404 TOOL_NOT_FOUND, 422 VALIDATION_ERROR for arguments the tool refuses, 429 QUOTA_EXCEEDED,
    502 TOOL_FAILED."""
    return await tool_calls.call_tool(await kb_service.server_store(), _user(request), name, args)


# --- knowledge bases ------------------------------------------------------------------------------


class KBCreate(BaseModel):
    name: str = Field(..., pattern=KB_NAME_PATTERN, description="Lowercase a-z, 0-9, '_' and '-', 1-64 characters.")
    description: str = Field("", max_length=2000)


class KBUpdate(BaseModel):
    shared: bool = Field(..., description="True: every user may read it and be routed to it. Administrators only.")


class KBSearch(BaseModel):
    query: str = Field(..., min_length=1, max_length=4000)
    strategy: str = Field(
        "hybrid",
        pattern=f"^({'|'.join(knowledge.STRATEGIES)})$",
        description="hybrid (meaning and exact words), dense (meaning), keyword (BM25), graph (the knowledge "
        "graph's entities and relations, for questions that link facts across documents) or fusion (all of them).",
    )
    top_k: int = Field(5, ge=1, le=knowledge.MAX_TOP_K)


class KBUrls(BaseModel):
    urls: list[str] = Field(
        ..., min_length=1, max_length=20, description="Public http(s) URLs (HTML, markdown, text, PDF)."
    )
    date: str | None = Field(None, description="When the pages were written (ISO 8601), optional.")


@contextlib.contextmanager
def _kb_errors():
    try:
        yield
    except knowledge.KBUnknownError as exc:
        raise ApiError("KB_NOT_FOUND", str(exc), {"kb": exc.name, "existing": exc.existing}) from None
    except knowledge.KBExistsError as exc:
        raise ApiError("KB_EXISTS", str(exc)) from None
    except kb_service.KBForbidden as exc:
        raise ApiError("KB_FORBIDDEN", str(exc)) from None
    except kb_service.SourceUnknown as exc:
        raise ApiError("SOURCE_NOT_FOUND", str(exc)) from None
    except QuotaExceeded as exc:
        raise web.quota_error(exc) from None
    except ingest_jobs.IngestBusy as exc:
        raise ApiError("INGEST_BUSY", str(exc), {"scope": exc.scope, "retry_after": exc.retry_after}) from None
    except ingest_jobs.IngestFailed as exc:
        raise ApiError("INGEST_FAILED", str(exc)) from None
    except ValueError as exc:
        raise ApiError("INVALID_REQUEST", str(exc)) from None


def _kb_path(name: str) -> str:
    with _kb_errors():
        return knowledge.validate_kb_name(name)


@app.get("/api/v1/kb", tags=["knowledge bases"])
async def list_kbs(request: Request) -> dict:
    """The knowledge bases the caller may read (their own and the shared ones; administrators:
    every one) with counts, owner and `shared`."""
    return {"items": await knowledge.list_kbs(await kb_service.server_store(), reader=_reader(request))}


@app.post("/api/v1/kb", tags=["knowledge bases"], status_code=201, responses=ERRORS)
async def create_kb(body: KBCreate, request: Request) -> dict:
    """Create a knowledge base; a regular user becomes its owner (409 KB_EXISTS if taken)."""
    with _kb_errors():
        return await kb_service.create_owned_kb(
            await kb_service.server_store(), _user(request), body.name, body.description
        )


@app.get("/api/v1/kb/{name}", tags=["knowledge bases"], responses=ERRORS)
async def get_kb(name: str, request: Request) -> dict:
    """One knowledge base (404 KB_NOT_FOUND listing the ones the caller may read)."""
    with _kb_errors():
        return await knowledge.get_kb(await kb_service.server_store(), _kb_path(name), reader=_reader(request))


@app.patch("/api/v1/kb/{name}", tags=["knowledge bases"], responses=ERRORS)
async def update_kb(name: str, body: KBUpdate, request: Request) -> dict:
    """Share a knowledge base with every user, or stop sharing it (administrators only)."""
    with _kb_errors():
        return await kb_service.share_kb(await kb_service.server_store(), _user(request), _kb_path(name), body.shared)


@app.delete("/api/v1/kb/{name}", tags=["knowledge bases"], responses=ERRORS)
async def delete_kb(name: str, request: Request) -> dict:
    """Delete a knowledge base and everything in it (its owner or an administrator)."""
    store = await kb_service.server_store()
    with _kb_errors():
        await kb_service.writable_kb(store, _user(request), _kb_path(name))
        return await knowledge.delete_kb(store, name)


@app.post("/api/v1/kb/{name}/documents", tags=["knowledge bases"], responses=ERRORS)
async def upload_documents(
    name: str,
    request: Request,
    files: Annotated[list[UploadFile], File(description="Files to ingest: .txt, .md, .html, .pdf")],
    date: Annotated[str | None, Form(description="When the documents were written (ISO 8601), optional")] = None,
) -> dict:
    """Ingest uploaded files (multipart field `files`, one or more; optional field `date`: when
    they were written, so hybrid search can favour them for queries naming that time);
    re-uploading a file name replaces that document. All or none: an unsupported file, a file
    too big or a request over an ingest quota (bytes, or chunks: the work) is refused before any
    file is written. The answer comes when the documents are in, with `work` (chunks embedded,
    entities, CPU seconds); the work runs in a low-priority worker, one ingest per user at a time
    (429 INGEST_BUSY while one is in progress, see `GET /api/v1/ingests`)."""
    store = await kb_service.server_store()
    with _kb_errors():
        await kb_service.writable_kb(store, _user(request), _kb_path(name))
        uploads = []
        for upload in files:
            filename = upload.filename or "upload"
            if knowledge.format_for(filename) is None and knowledge.format_for(media_type=upload.content_type) is None:
                raise ApiError(
                    "UNSUPPORTED_FILE_TYPE", f"{filename}: upload .txt, .md, .html or .pdf files.", {"file": filename}
                )
            uploads.append((filename, await upload.read(), upload.content_type))
        result = await kb_service.ingest_uploads(store, name, uploads, date=date, user=_user(request))
        return {"kb": await knowledge.get_kb(store, name), **result}


@app.post("/api/v1/kb/{name}/urls", tags=["knowledge bases"], responses=ERRORS)
async def ingest_urls(name: str, body: KBUrls, request: Request) -> dict:
    """Fetch public URLs through the SSRF-safe reader and ingest them, as one ingest of the user
    (429 INGEST_BUSY while they have one in progress). Each URL counts as one web read of the
    user's web quota, its bytes against the ingest quota and its chunks against the work quota.
    URLs that fail are listed in `failed`; when all fail, 400 URL_NOT_ACCESSIBLE (429
    QUOTA_EXCEEDED when a quota stopped the first one)."""
    store = await kb_service.server_store()
    user = _user(request)
    with _kb_errors():
        await kb_service.writable_kb(store, user, _kb_path(name))
        async with ingest_jobs.RUNNER.slot(user, name, body.urls) as slot:
            documents, failed, work = await _ingest_each_url(store, name, body, user, slot)
    if failed and not documents:
        raise ApiError("URL_NOT_ACCESSIBLE", failed[0]["error"], {"failed": failed})
    return {"kb": await knowledge.get_kb(store, name), "documents": documents, "failed": failed, "work": work}


async def _ingest_each_url(
    store: Any, name: str, body: KBUrls, user: Any, slot: ingest_jobs.Slot
) -> tuple[list[dict], list[dict], dict]:
    """The URLs of one request in turn: (documents, failed, work summed); QuotaExceeded when a
    quota stops the first URL, later ones are listed as failed."""
    documents: list[dict] = []
    failed: list[dict] = []
    work = {"chunks": 0, "entities": 0, "cpu_seconds": 0.0}
    for position, url in enumerate(body.urls):
        try:
            await charge(store, user, "web_read")
            result = await kb_service.ingest_url(store, name, url, date=body.date, user=user, slot=slot)
        except QuotaExceeded as exc:
            if not documents and not failed:
                raise
            failed.extend(
                {"url": left, "error": str(exc), "error_code": "QUOTA_EXCEEDED"} for left in body.urls[position:]
            )
            break
        except ValueError as exc:
            failed.append({"url": url, "error": str(exc)})
            continue
        documents += result["documents"]
        work = {key: work[key] + result["work"].get(key, 0) for key in work}
    return documents, failed, work


@app.get("/api/v1/ingests", tags=["knowledge bases"], responses=ERRORS)
async def list_ingests(request: Request) -> dict:
    """The caller's ingests in progress (administrators: everyone's, with `user`): `id`, `kb`,
    `sources`, `state` ("waiting" for a worker or "running") and `started_at`."""
    return {"items": ingest_jobs.RUNNER.in_progress(_user(request))}


@app.get("/api/v1/kb/{name}/sources", tags=["knowledge bases"], responses=ERRORS)
async def list_sources(name: str, request: Request) -> dict:
    """The documents of a knowledge base."""
    store = await kb_service.server_store()
    with _kb_errors():
        return {"items": await kb_service.list_sources(store, _kb_path(name), reader=_reader(request))}


@app.delete("/api/v1/kb/{name}/sources", tags=["knowledge bases"], responses=ERRORS)
async def delete_source(
    name: str,
    request: Request,
    source: Annotated[str, Query(min_length=1, description="The document's source (file name or URL).")],
) -> dict:
    """Delete one document of a knowledge base (its owner or an administrator)."""
    store = await kb_service.server_store()
    with _kb_errors():
        await kb_service.writable_kb(store, _user(request), _kb_path(name))
        return await kb_service.delete_source(store, name, source)


@app.post("/api/v1/kb/{name}/search", tags=["knowledge bases"], responses=ERRORS)
async def search_kb(name: str, body: KBSearch, request: Request) -> dict:
    """Search a knowledge base with a strategy (the `knowledge_base_search` tool's answer)."""
    with _kb_errors():
        return await knowledge.retrieve(
            await kb_service.server_store(),
            _kb_path(name),
            body.query,
            strategy=body.strategy,
            top_k=body.top_k,
            reader=_reader(request),
        )


# MCP (server/mcp_tools.py): its route joins the app's, so the server's auth wraps it too.
app.router.routes.extend(mcp.streamable_http_app().routes)
# Every route above authenticates its request where the server has not (Aegra: server/route_auth.py).
protect_routes(app)
