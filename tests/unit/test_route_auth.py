"""server/route_auth.py: the HTTP routes authenticate a request the server left unauthenticated
(Aegra), and leave alone one the server authenticated (`langgraph dev`'s route auth)."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI, Request
from starlette.routing import Route

from server import route_auth
from server.route_auth import AuthenticateRoute, RouteUser, protect_routes
from tools.identity import ADMIN, kb_reader


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("AGENT_API_KEYS", "alice=k-alice,ops=k-ops")
    monkeypatch.setenv("AGENT_ADMIN_USERS", "ops")
    monkeypatch.delenv("LANGSMITH_LANGGRAPH_API_VARIANT", raising=False)


def echo_app() -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/api/v1/whoami")
    async def whoami(request: Request) -> dict:
        user = request.scope.get("user")
        return {"identity": user.identity, "permissions": list(user.permissions), "reader": kb_reader(user)}

    class Plain:  # a plain ASGI route, as the MCP endpoint is
        async def __call__(self, scope, receive, send):
            user = scope.get("user")
            body = (user.identity if user is not None else "nobody").encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": body})

    app.router.routes.append(Route("/api/v1/mcp", Plain()))
    assert protect_routes(app) == 2
    return app


def client(app, headers: dict | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers or {})


async def test_a_request_without_a_key_is_refused_on_every_route(keys):
    app = echo_app()
    async with client(app) as anonymous:
        for path in ("/api/v1/whoami", "/api/v1/mcp"):
            refused = await anonymous.get(path)
            assert refused.status_code == 401 and "Missing API key" in refused.json()["detail"]
    async with client(app, {"authorization": "Bearer wrong"}) as wrong:
        assert (await wrong.get("/api/v1/mcp")).status_code == 401


async def test_a_key_names_its_user_on_every_route(keys):
    app = echo_app()
    async with client(app, {"x-api-key": "k-alice"}) as alice:
        assert (await alice.get("/api/v1/whoami")).json() == {"identity": "alice", "permissions": [], "reader": "alice"}
        assert (await alice.get("/api/v1/mcp")).text == "alice"
    async with client(app, {"authorization": "Bearer k-ops"}) as ops:
        assert (await ops.get("/api/v1/whoami")).json() == {"identity": "ops", "permissions": [ADMIN], "reader": None}


async def test_a_request_the_server_authenticated_is_not_authenticated_again(keys, monkeypatch):
    """`langgraph dev`: its auth middleware wraps each route outside ours and sets the user."""
    calls = []

    async def counting(headers):
        calls.append(headers)
        raise AssertionError("authenticated twice")

    monkeypatch.setattr(route_auth, "authenticate", counting)
    app = echo_app()

    class ServerAuth:  # what the LangGraph server's route-level auth middleware does
        def __init__(self, inner):
            self.inner = inner

        async def __call__(self, scope, receive, send):
            scope["user"] = RouteUser({"identity": "bob", "permissions": []})
            await self.inner(scope, receive, send)

    for route in app.router.routes:
        route.app = ServerAuth(route.app)
    async with client(app) as anyone:
        assert (await anyone.get("/api/v1/whoami")).json()["identity"] == "bob"
        assert (await anyone.get("/api/v1/mcp")).text == "bob"
    assert calls == []


def test_every_route_of_the_http_app_is_wrapped_the_mcp_endpoint_too():
    from server.http import app

    paths = {route.path: route.app for route in app.router.routes if hasattr(route, "app")}
    assert "/api/v1/mcp" in paths and "/api/v1/kb/{name}/search" in paths
    assert all(isinstance(inner, AuthenticateRoute) for inner in paths.values())
