"""The HTTP routes authenticate their own requests when the server has not.

`langgraph dev` and LangGraph Platform authenticate the custom routes themselves
(`http.enable_custom_route_auth` in langgraph.json): their auth middleware wraps each route and
sets `scope["user"]` before the route runs. Aegra does that only for FastAPI routes and leaves
mounted apps (the MCP endpoint) open, so `protect_routes` wraps every route of the custom app:
a request that reaches a route without an authenticated user is authenticated here, with the
same handler as the server's (`server.auth.authenticate`), or refused with 401. Where the
server has already authenticated the request, the wrapper does nothing (one check per request).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from langgraph_sdk import Auth
from starlette.authentication import AuthCredentials, BaseUser
from starlette.types import ASGIApp, Receive, Scope, Send

from server.auth import authenticate


class RouteUser(BaseUser):
    """The user `authenticate` returned, shaped as the servers' own users (`identity`,
    `permissions`, and any further field the handler returned)."""

    def __init__(self, data: Auth.types.MinimalUserDict) -> None:
        self._data: dict[str, Any] = dict(data)

    @property
    def identity(self) -> str:
        return str(self._data["identity"])

    @property
    def permissions(self) -> Sequence[str]:
        return list(self._data.get("permissions") or ())

    @property
    def is_authenticated(self) -> bool:
        return bool(self._data.get("is_authenticated", True))

    @property
    def display_name(self) -> str:
        return str(self._data.get("display_name") or self.identity)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data


class AuthenticateRoute:
    """ASGI wrapper of one route: authenticate the request unless the server already has."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("user") is not None:
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope.get("headers") or ()}
        try:
            user = await authenticate(headers)
        except Auth.exceptions.HTTPException as exc:
            # The body the LangGraph server answers on these routes: one shape on every server.
            response = JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
            await response(scope, receive, send)
            return
        route_user = RouteUser(user)
        scope["user"] = route_user
        scope["auth"] = AuthCredentials(list(route_user.permissions))
        await self.app(scope, receive, send)


def protect_routes(app: FastAPI) -> int:
    """Wrap every route the custom app has declared so far (call it after the last one); the
    number of routes wrapped."""
    wrapped = 0
    for route in app.router.routes:
        inner = getattr(route, "app", None)
        if inner is None or isinstance(inner, AuthenticateRoute):
            continue
        route.app = AuthenticateRoute(inner)  # type: ignore[attr-defined]
        wrapped += 1
    return wrapped
