"""`POST /ui/{graph_id}`: the generative-UI cards (ui/components.tsx) for chat clients, with the
card scripts inline, so that a stock agent-chat-ui shows them with only its documented settings.

The LangGraph server's own route answers with `<script src="/ui/<graph>/entrypoint.js">`. The
client inserts that HTML into its own page, so the browser asks the chat UI's origin for the
script, which has no such file (404, no cards) unless the chat UI forwards `/ui/*` to the
LangGraph server. This route, which the server matches before its own, answers with the script's
text instead (`<script>...bundle...</script>` and the same render call), and the stylesheets as
`<style>`: nothing more is fetched, whatever address the page has. agent-chat-ui inserts the HTML
with `createContextualFragment`, which runs inline scripts like external ones.

agent-chat-ui asks for the cards of its assistant id: an assistant's id (a UUID) is read as its
graph's (assistants are shared, `server.auth`), so a client set to an assistant shows the cards too.

The bundle files are read where the server's UI bundler writes them (`langgraph_api.js.ui`, the
one reach-in, checked by tests/unit/test_ui_cards.py) on every request, so a rebuilt bundle is
served at once. Errors are in the routes' shape: 404 UI_NOT_FOUND for a graph without cards (or
before the bundler has built them), 422 for a body without a card `name`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, Field, ValidationError

from server.errors import ApiError

MAX_BODY = 4_096
"""Bytes of a card request read at most (`{"name": ...}`)."""
_CLOSING_TAG = re.compile(r"</(script|style)", re.IGNORECASE)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class CardRequest(BaseModel):
    """What LangGraph's SDK (`LoadExternalComponent`) posts: the UI message's name."""

    name: str = Field(min_length=1, max_length=200, description="The card (UI message) name.")


def ui_dir() -> Path:
    """Where the server's UI bundler writes `schemas.json` and `public/<graph>/<asset>`."""
    from langgraph_api.js.ui import UI_ROOT_DIR  # the library's own location for the bundle

    return Path(UI_ROOT_DIR)


def _inline(text: str) -> str:
    """Script or stylesheet text safe inside its element: a `</script` in a string literal or a
    comment would end the element early (`<\\/script` means the same in both)."""
    return _CLOSING_TAG.sub(lambda m: "<\\/" + m.group(1), text)


def _schemas(root: Path) -> dict:
    schemas_file = root / "schemas.json"
    return json.loads(schemas_file.read_text()) if schemas_file.exists() else {}


def card_html(root: Path, graph_id: str, name: str) -> str:
    """The HTML that renders card `name` of `graph_id`'s bundle in the client's shadow root
    (`{{shadowRootId}}` is filled in by the client). ApiError UI_NOT_FOUND when there is none."""
    schemas = _schemas(root)
    if graph_id not in schemas:
        raise ApiError(
            "UI_NOT_FOUND",
            f"Graph {graph_id!r} has no chat-client cards"
            + ("" if schemas else " (the server's UI bundler has not built them: it needs Node.js)")
            + ".",
            {"graph_id": graph_id},
        )
    public = (root / "public" / graph_id).resolve()
    styles: list[str] = []
    scripts: list[str] = []
    for asset in schemas[graph_id].get("assets", []):
        path = (public / Path(asset).name).resolve()
        if path.parent != public or not path.is_file():
            continue
        if path.suffix == ".css":
            styles.append(f"<style>{_inline(path.read_text())}</style>")
        elif path.suffix == ".js":
            scripts.append(f"<script>{_inline(path.read_text())}</script>")
    if not scripts:
        raise ApiError("UI_NOT_FOUND", f"The cards of graph {graph_id!r} are not built yet.", {"graph_id": graph_id})
    global_name = "__LGUI_" + re.sub(r"[^a-zA-Z0-9]", "_", graph_id)
    # After the bundle, which defines the global. The client fills in the first `{{shadowRootId}}`
    # only: the bundle (ui/components.tsx) must not contain that text, which the tests check.
    render = f'<script>{global_name}.render({_inline(json.dumps(name))}, "{{{{shadowRootId}}}}")</script>'
    return "\n".join([*styles, *scripts, render])


async def assistant_graph(assistant_id: str) -> str | None:
    """The graph id of assistant `assistant_id`, or None when there is no such assistant."""
    from tools.server_api import server_client

    try:
        assistant = await server_client().assistants.get(assistant_id)
    except Exception:  # not found (or not readable): the card request answers 404
        return None
    return str(assistant.get("graph_id") or "") or None


async def _card_request(request: Request) -> CardRequest:
    """The body as JSON whatever its content type: agent-chat-ui's API passthrough forwards it
    without one (langgraph-nextjs-api-passthrough sends only the `x-*` headers)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise ApiError(
                "PAYLOAD_TOO_LARGE", f"A card request is at most {MAX_BODY:,} bytes.", {"limit_bytes": MAX_BODY}
            )
    try:
        return CardRequest.model_validate_json(body or b"{}")
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


async def ui_card(graph_id: str, request: Request) -> Response:
    """`POST /ui/{graph_id}`: the HTML of one generative-UI card, scripts inline (see the module
    docstring); `graph_id` may be an assistant's id. server/http.py adds the route."""
    body = await _card_request(request)
    from tools.server_api import server_kind

    if server_kind() == "aegra":  # no UI bundler there (and no langgraph_api settings to read)
        raise ApiError("UI_NOT_FOUND", "This server builds no chat-client cards.", {"graph_id": graph_id})
    root = ui_dir()
    if graph_id not in _schemas(root) and _UUID.fullmatch(graph_id):
        graph_id = await assistant_graph(graph_id) or graph_id
    return Response(card_html(root, graph_id, body.name), media_type="text/html")
