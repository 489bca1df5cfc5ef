"""What goes over the wire between the graphs and the model server, recorded call by call.

`RecordingProxy` is a loopback HTTP proxy in front of any OpenAI-compatible endpoint: the graphs
run in-process with `OPENAI_BASE_URL` pointed at it, and every `/chat/completions` request is
forwarded unchanged (streamed or not) while a `Call` record keeps what the graph offered (tool
schemas, tool_choice, response_format) and what came back (content, tool calls, usage and, from
llama.cpp, `timings`). A client that hangs up (a model timeout in the graph) closes the upstream
request too, so the server stops working on it as it would without the proxy.

The pure functions below turn raw responses into figures; tests/unit/test_evals_realmodel.py
checks them on scripted data:

- `usage_of`: prompt, completion and cached prompt tokens (`usage.prompt_tokens_details.
  cached_tokens`, else llama.cpp's `timings.cache_n`);
- `assemble_stream`: a streamed answer (SSE chunks) as one chat.completion body;
- `text_tool_calls`: tool calls a model wrote as text in `content` (fenced or bare JSON
  `{"name", "arguments"}`, `{{...}}}`, `<tool_call>...</tool_call>`, `<tools><function .../>`);
- `check_call`: a tool call's name among the offered tools and its arguments valid against the
  offered JSON schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
import jsonschema

# --- pure functions -----------------------------------------------------------------------------


def usage_of(body: dict) -> dict:
    """Token counts of one chat.completion body: prompt, completion, cached prompt tokens and
    where the cached figure came from (`prompt_tokens_details`, `timings.cache_n`, or None)."""
    usage = body.get("usage") or {}
    timings = body.get("timings") or {}
    details = usage.get("prompt_tokens_details") or {}
    cached, source = None, None
    if isinstance(details.get("cached_tokens"), int):
        cached, source = details["cached_tokens"], "prompt_tokens_details"
    elif isinstance(timings.get("cache_n"), int):
        cached, source = timings["cache_n"], "timings.cache_n"
    prompt = usage.get("prompt_tokens")
    if prompt is None and isinstance(timings.get("prompt_n"), int):
        prompt = timings["prompt_n"] + (timings.get("cache_n") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.get("completion_tokens", timings.get("predicted_n")),
        "cached_tokens": cached,
        "cached_source": source,
    }


def parse_sse(raw: bytes) -> list[dict]:
    """The JSON events of a server-sent-events body (`data: {...}` lines; `[DONE]` skipped)."""
    events = []
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if not data or data == "[DONE]":
            continue
        with contextlib.suppress(ValueError):
            events.append(json.loads(data))
    return events


def assemble_stream(events: list[dict]) -> dict:
    """Streamed chunks as one chat.completion body: content and tool-call deltas joined (by
    tool-call index), the last finish_reason, usage and timings."""
    content: list[str] = []
    calls: dict[int, dict] = {}
    body: dict[str, Any] = {}
    finish = None
    for event in events:
        for key in ("usage", "timings"):
            if event.get(key):
                body[key] = event[key]
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(delta["content"])
            for piece in delta.get("tool_calls") or []:
                call = calls.setdefault(piece.get("index", len(calls)), {"id": None, "name": "", "arguments": ""})
                call["id"] = piece.get("id") or call["id"]
                function = piece.get("function") or {}
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ]
    body["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
    return body


_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)
_TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function\b([^>]*?)/?>", re.DOTALL)
_ATTRIBUTE = re.compile(r"""(\w+)\s*=\s*(?:'([^']*)'|"([^"]*)")""", re.DOTALL)


def _json_objects(text: str) -> list[Any]:
    """Every top-level JSON value decodable at a `{`, extra wrapping braces (`{{...}}}`) peeled."""
    decoder = json.JSONDecoder()
    found, index = [], 0
    while (start := text.find("{", index)) != -1:
        value, end = None, start + 1
        for offset in range(0, 3):  # `{{"name": ...}}}`: skip up to two extra opening braces
            try:
                value, end = decoder.raw_decode(text, start + offset)
                break
            except ValueError:
                if text[start + offset + 1 : start + offset + 2] != "{":
                    break
        if value is None:
            index = start + 1
            continue
        found.append(value)
        index = end
    return found


def _as_call(value: Any) -> dict | None:
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):  # {"type": "function", "function": {...}}
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return None
    for key in ("arguments", "parameters", "args"):
        if key in value:
            return {"name": name, "arguments": value[key]}
    return None


def text_tool_calls(content: str | None) -> list[dict]:
    """Tool calls written as text in a model's `content`: [{"name", "arguments"}] in order of
    appearance (arguments as given: an object, or a string holding JSON)."""
    if not content:
        return []
    calls: list[dict] = []
    for match in _FUNCTION_TAG.finditer(content):
        attributes = {
            m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
            for m in _ATTRIBUTE.finditer(match.group(1))
        }
        if attributes.get("name"):
            calls.append({"name": attributes["name"], "arguments": attributes.get("arguments", "{}")})
    if calls:
        return calls
    pieces = _TOOL_CALL_TAG.findall(content) or _FENCE.findall(content) or [content]
    for piece in pieces:
        for value in _json_objects(piece):
            for item in value if isinstance(value, list) else [value]:
                if (call := _as_call(item)) is not None:
                    calls.append(call)
    return calls


def offered_tools(request: dict) -> dict[str, dict]:
    """name -> JSON schema of the parameters of every function tool in a request."""
    tools = {}
    for tool in request.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name"):
            tools[function["name"]] = function.get("parameters") or {"type": "object"}
    return tools


def check_call(name: str, arguments: Any, offered: dict[str, dict]) -> str | None:
    """Why a tool call is invalid against the offered tools (None when it is valid): the name
    must be offered, the arguments a JSON object (or a string holding one) valid against the
    tool's parameter schema."""
    if name not in offered:
        return f"tool {name!r} was not offered ({', '.join(sorted(offered)) or 'none'})"
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            return f"{name}: arguments are not JSON ({exc})"
    if not isinstance(arguments, dict):
        return f"{name}: arguments are not an object"
    try:
        jsonschema.validate(arguments, offered[name])
    except jsonschema.ValidationError as exc:
        return f"{name}: {exc.message}"
    except jsonschema.SchemaError as exc:  # an offered schema the validator cannot read
        return f"{name}: unreadable schema ({exc.message})"
    return None


def forced_tool(request: dict) -> str | None:
    """The one tool a request makes the model call: `tool_choice` naming a function (or
    "required" with a single tool offered); None otherwise."""
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        return (choice.get("function") or {}).get("name") or None
    offered = offered_tools(request)
    return next(iter(offered)) if choice == "required" and len(offered) == 1 else None


def bare_arguments(content: str | None) -> dict | None:
    """The first JSON object in `content` (fenced or bare) when it is not a `{"name", ...}` call:
    a forced tool's arguments written as text."""
    if not content:
        return None
    for piece in _FENCE.findall(content) or [content]:
        for value in _json_objects(piece):
            if isinstance(value, dict) and _as_call(value) is None:
                return value
    return None


def call_tool_checks(request: dict, body: dict) -> dict:
    """The tool calls of one answer checked against the request's offered tools: calls returned
    structured (`tool_calls`), calls written as text instead (only counted when tools were offered
    and none came back structured; for a forced tool, its bare arguments as a JSON object count
    too), and the problems of each invalid one."""
    offered = offered_tools(request)
    message = ((body.get("choices") or [{}])[0] or {}).get("message") or {}
    returned = [
        ((c.get("function") or {}).get("name") or "", (c.get("function") or {}).get("arguments") or "")
        for c in message.get("tool_calls") or []
    ]
    written: list[tuple[str, Any]] = []
    if offered and not returned:
        written = [(c["name"], c["arguments"]) for c in text_tool_calls(message.get("content"))]
        forced = forced_tool(request)
        if not written and forced and (arguments := bare_arguments(message.get("content"))) is not None:
            written = [(forced, arguments)]
    problems = [p for name, args in returned if (p := check_call(name, args, offered))]
    text_problems = [p for name, args in written if (p := check_call(name, args, offered))]
    return {
        "offered": sorted(offered),
        "structured": len(returned),
        "structured_valid": len(returned) - len(problems),
        "text": len(written),
        "text_valid": len(written) - len(text_problems),
        "text_names": [name for name, _ in written],
        "problems": problems + [f"(as text) {p}" for p in text_problems],
    }


def recheck(call: dict) -> dict:
    """`call_tool_checks` again for a recorded call (a `Call.as_dict()`). A record without its
    `request` (older runs) keeps only the offered tool names: their arguments are then checked
    for being an object only."""
    request = call.get("request") or {
        "tools": [
            {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
            for n in call.get("tools") or []
        ],
        "tool_choice": call.get("tool_choice"),
    }
    calls = [
        {"function": {"name": c.get("name"), "arguments": c.get("arguments")}} for c in call.get("tool_calls") or []
    ]
    body = {"choices": [{"message": {"content": call.get("content"), "tool_calls": calls}}]}
    return call_tool_checks(request, body)


# --- the recording proxy --------------------------------------------------------------------------


@dataclass
class Call:
    """One model call as seen on the wire."""

    task: str
    started: float
    wall_s: float = 0.0
    status: int | None = None
    stream: bool = False
    messages: int = 0
    tools: list[str] = field(default_factory=list)
    tool_choice: Any = None
    response_format: str | None = None
    finish_reason: str | None = None
    content: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    usage: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    checks: dict = field(default_factory=dict)
    error: str | None = None
    client_gone: bool = False
    request: dict = field(default_factory=dict)
    """What `call_tool_checks` needs to be recomputed later: the offered tools and tool_choice."""

    def as_dict(self) -> dict:
        return asdict(self)


def record_call(call: Call, request: dict, body: dict) -> None:
    """Fill `call` from the request and the (assembled) response body."""
    call.messages = len(request.get("messages") or [])
    call.tools = sorted(offered_tools(request))
    call.tool_choice = request.get("tool_choice")
    call.response_format = (request.get("response_format") or {}).get("type")
    choice = (body.get("choices") or [{}])[0] or {}
    message = choice.get("message") or {}
    call.finish_reason = choice.get("finish_reason")
    call.content = (message.get("content") or "")[:4000]
    call.tool_calls = [
        {"name": (c.get("function") or {}).get("name"), "arguments": (c.get("function") or {}).get("arguments")}
        for c in message.get("tool_calls") or []
    ]
    call.usage = usage_of(body)
    call.timings = body.get("timings") or {}
    call.checks = call_tool_checks(request, body)
    call.request = {"tools": request.get("tools") or [], "tool_choice": request.get("tool_choice")}


_HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding", "keep-alive"}


class RecordingProxy:
    """A loopback proxy to `upstream` (an OpenAI-compatible base URL, e.g.
    http://127.0.0.1:18080/v1) recording every call under the current `task` label."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.task = ""
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="realmodel-proxy", daemon=True)
        self.port = 0

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    @property
    def base_url(self) -> str:
        """What OPENAI_BASE_URL should be for the graphs."""
        return f"http://127.0.0.1:{self.port}/v1"

    def calls_of(self, task: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.task == task]

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10))
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    key, value = line.split(":", 1)
                    headers[key.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length") or 0))
            await self._forward(method, path, headers, body, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _forward(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        suffix = path[len("/v1") :] if path.startswith("/v1") else path
        url = self.upstream + suffix
        forwarded = {k: v for k, v in headers.items() if k not in _HOP_HEADERS}
        chat = suffix.rstrip("/").endswith("/chat/completions") and method == "POST"
        try:
            request = json.loads(body) if chat and body else {}
        except ValueError:
            request = {}
        call = Call(task=self.task, started=time.time(), stream=bool(request.get("stream")))
        call.messages, call.tools = len(request.get("messages") or []), sorted(offered_tools(request))
        call.tool_choice = request.get("tool_choice")
        if chat:
            with self._lock:
                self.calls.append(call)

        async def exchange() -> None:
            upstream_request = self._client.build_request(method, url, headers=forwarded, content=body)
            response = await self._client.send(upstream_request, stream=True)
            received = bytearray()
            try:
                call.status = response.status_code
                kept = {k: v for k, v in response.headers.items() if k.lower() not in _HOP_HEADERS}
                head = f"HTTP/1.1 {response.status_code} {response.reason_phrase}\r\n"
                head += "".join(f"{k}: {v}\r\n" for k, v in kept.items())
                if call.stream:
                    writer.write((head + "Connection: close\r\n\r\n").encode("latin-1"))
                    async for chunk in response.aiter_raw():
                        received += chunk
                        writer.write(chunk)
                        await writer.drain()
                else:
                    async for chunk in response.aiter_raw():
                        received += chunk
                    writer.write(
                        (head + f"Content-Length: {len(received)}\r\nConnection: close\r\n\r\n").encode("latin-1")
                    )
                    writer.write(bytes(received))
                    await writer.drain()
            finally:
                await response.aclose()
                if chat:
                    self._finish(call, request, bytes(received))

        async def hang_up() -> None:
            while await reader.read(1024):
                pass

        work, watch = asyncio.ensure_future(exchange()), asyncio.ensure_future(hang_up())
        done, _ = await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        if work not in done:  # the graph gave up on the call (its model timeout): stop upstream too
            call.client_gone = True
            work.cancel()
        watch.cancel()
        with contextlib.suppress(BaseException):
            await work
        if work.cancelled() or (work.done() and work.exception() is not None):
            error = (
                "client hung up"
                if call.client_gone
                else repr(work.exception())
                if not work.cancelled()
                else "cancelled"
            )
            call.error = call.error or error
            if call.wall_s == 0.0:
                call.wall_s = round(time.time() - call.started, 3)

    def _finish(self, call: Call, request: dict, raw: bytes) -> None:
        call.wall_s = round(time.time() - call.started, 3)
        try:
            body = assemble_stream(parse_sse(raw)) if call.stream else json.loads(raw or b"{}")
        except ValueError:
            call.error = f"unreadable answer ({len(raw)} bytes)"
            return
        if not isinstance(body, dict):
            call.error = "answer is not an object"
            return
        if call.status and call.status >= 400:
            call.error = str(body.get("error") or body)[:500]
        record_call(call, request, body)
