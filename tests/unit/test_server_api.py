"""tools/server_api.py: the package on both servers, `langgraph_api` (langgraph dev, Platform)
and Aegra, through one adapter: the in-process client, authenticate's arguments, store namespaces."""

from __future__ import annotations

import sys
from types import ModuleType

import pytest
from fastapi import FastAPI, HTTPException, Request
from langgraph_sdk import Auth

from server import auth as server_auth
from tests.unit.test_auth import ALICE, ctx
from tools import server_api
from tools.identity import ADMIN


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("AGENT_API_KEYS", "alice=k-alice, bob=k-bob")


@pytest.fixture
def aegra(monkeypatch):
    """This process as an Aegra server: its app module loaded, with one thread route that echoes
    what the in-process client sent."""
    app = FastAPI()

    @app.get("/threads/{thread_id}")
    async def get_thread(thread_id: str, request: Request) -> dict:
        user = await server_auth.authenticate(dict(request.headers))
        return {"thread_id": thread_id, "metadata": {"seen_as": user["identity"]}}

    module = ModuleType("aegra_api.main")
    module.app = app  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aegra_api.main", module)
    return app


async def test_aegra_passes_one_str_keyed_headers_dict(keys):
    # Aegra calls authenticate(headers) positionally; langgraph_api passes (authorization, headers).
    assert (await server_auth.authenticate({"authorization": "Bearer k-alice", "host": "x"}))["identity"] == "alice"
    assert (await server_auth.authenticate({"x-api-key": "k-bob"}))["identity"] == "bob"
    assert (await server_auth.authenticate(None, {b"x-api-key": b"k-bob"}))["identity"] == "bob"
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        await server_auth.authenticate({"authorization": "Bearer wrong"})
    assert refused.value.status_code == 401


def test_request_headers_reads_both_shapes():
    assert server_api.request_headers("Bearer a", {b"X-Api-Key": b"b"}) == {
        "x-api-key": "b",
        "authorization": "Bearer a",
    }
    assert server_api.request_headers({"Authorization": "Bearer a"}) == {"authorization": "Bearer a"}
    assert server_api.request_headers(None, None) == {}


@pytest.mark.parametrize("key", ["namespace", "namespace_prefix", "prefix"])
async def test_store_scope_reads_every_servers_namespace_key(key):
    # Aegra sends `namespace_prefix` (search) and `prefix` (list namespaces).
    assert await server_auth.store_scope(ctx(ALICE, "store", "search"), {key: ("memories", "alice")}) is None
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        await server_auth.store_scope(ctx(ALICE, "store", "search"), {key: ("memories", "bob")})
    assert refused.value.status_code == 403


def test_server_kind_follows_the_loaded_server(aegra, monkeypatch):
    assert server_api.server_kind() == "aegra"
    monkeypatch.delitem(sys.modules, "aegra_api.main")
    assert server_api.server_kind() == "langgraph"


async def test_aegra_in_process_client_calls_the_app_as_the_server(keys, aegra):
    thread = await server_api.server_client().threads.get("t-1")
    assert thread == {"thread_id": "t-1", "metadata": {"seen_as": server_auth.SERVER_USER}}
    assert (await server_auth.authenticate({server_api.INTERNAL_HEADER: server_api._INTERNAL_TOKEN}))[
        "permissions"
    ] == [ADMIN]


async def test_internal_token_is_refused_when_guessed_or_off_aegra(keys, aegra, monkeypatch):
    with pytest.raises(Auth.exceptions.HTTPException):
        await server_auth.authenticate({server_api.INTERNAL_HEADER: "guess"})
    monkeypatch.delitem(sys.modules, "aegra_api.main")  # langgraph_api has its own in-process client
    with pytest.raises(Auth.exceptions.HTTPException):
        await server_auth.authenticate({server_api.INTERNAL_HEADER: server_api._INTERNAL_TOKEN})


async def test_server_store_is_aegras_under_aegra(aegra, monkeypatch):
    store = object()
    database = ModuleType("aegra_api.core.database")
    database.db_manager = type("Manager", (), {"get_store": lambda self: store})()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aegra_api.core.database", database)
    assert await server_api.server_store() is store


async def test_aegra_in_process_client_acts_for_the_named_user(keys, aegra):
    # Aegra keeps threads per user: the server's calls for a user's run are made as that user.
    thread = await server_api.server_client(act_as="alice").threads.get("t-2")
    assert thread["metadata"] == {"seen_as": "alice"}
    with pytest.raises(Auth.exceptions.HTTPException):  # the act-as header alone is nobody
        await server_auth.authenticate({server_api.ACT_AS_HEADER: "alice"})


def test_server_pool_is_aegras_pool_under_aegra_and_none_elsewhere(aegra, monkeypatch):
    # server/http.py keeps this pool quick to reconnect (store/postgres.py keep_pool_fresh).
    pool = object()
    database = ModuleType("aegra_api.core.database")
    database.db_manager = type("Manager", (), {"lg_pool": pool})()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aegra_api.core.database", database)
    assert server_api.server_pool() is pool
    monkeypatch.delitem(sys.modules, "aegra_api.main")  # langgraph dev: our factories' pools reconnect themselves
    assert server_api.server_pool() is None


async def test_thread_run_asks_aegra_as_the_threads_user(keys, aegra):
    # Aegra keeps runs per user: router feedback checks a run of the caller's thread as the caller
    # (as the server itself, Aegra would find no such run and refuse the feedback).
    @aegra.get("/threads/{thread_id}/runs/{run_id}")
    async def get_run(thread_id: str, run_id: str, request: Request) -> dict:
        user = await server_auth.authenticate(dict(request.headers))
        if user["identity"] != "alice":
            raise HTTPException(404, "Run not found")
        return {"run_id": run_id, "thread_id": thread_id}

    run_id = "6f1c0b3e-2a8e-4f55-9d0f-0d4a7e3c1b2a"
    assert await server_api.thread_run("t-1", run_id, act_as="alice") == {"run_id": run_id, "thread_id": "t-1"}
    assert await server_api.thread_run("t-1", run_id) is None


def test_a_runs_key_is_what_its_subgraphs_inherit_on_either_server():
    # graphs/runtime/deadline.py keeps one clock per key: a sub-agent shares its router run's deadline.
    assert server_api.server_run_key({"langgraph_request_id": "req-1", "thread_id": "t"}) == "req-1"
    assert server_api.server_run_key({"run_id": "run-1", "thread_id": "t"}) == "run-1"  # Aegra
    assert server_api.server_run_key({"thread_id": "t"}) is None  # in-process
