"""A scripted OpenAI-compatible HTTP server, so tests exercise the real `langchain-openai` client.

Endpoints (all `/v1/*` require `Authorization: Bearer <non-empty>`, else 401):

- `POST /v1/chat/completions`: streaming (SSE: role, `reasoning_content` pieces, `content`
  pieces, `tool_calls` with index/id/name then `arguments` pieces, a finish chunk with
  `finish_reason` "tool_calls" or "stop", a usage chunk when `stream_options.include_usage`,
  then `[DONE]`) and non-streaming.
- `POST /v1/embeddings`: deterministic hashed bag-of-words vectors. Each lower-cased word
  (`\\w+`) adds +1 or -1 (hash-chosen) to one hash-chosen coordinate; the vector is then
  L2-normalised. Texts sharing words therefore have a higher cosine similarity than texts
  sharing none. The dimension is the server's `embedding_dim` (default 384), or the request's
  `dimensions`. Both `encoding_format` "float" and "base64" are served.
- `GET /v1/models`.

Scripting (no auth): `POST /_script {"key", "responses"}` sets the script for a key (items as
in `tests.fakes`: str, or `{"content", "tool_calls", "reasoning"}`, plus optional `"delay"`
seconds before answering and `"delay_per_token"` seconds between streamed chunks; or
`{"error": {"status", "message"}, "retry_after"?}` to answer with that HTTP error). A chat
request uses the script whose key occurs in the text of its FIRST user message (the key that
occurs first, the longest of those starting there: what the runtime appends to a message, such as
recalled memories quoting other conversations, never decides), else the `default` script; a missing or exhausted script answers 400 with a message
saying so. `GET /_requests` returns the recorded requests (a chat request's record holds its
`Authorization` header, its `tool_choice` and, in `sampling`, the model parameters it sent); `POST /_reset` clears scripts and
records; `GET /_health` answers once the server is up.

In-process: `with run_openai_server() as server:` (uvicorn in a background thread).
Standalone: `python -m tests.openai_server --port N`, or `with spawn_openai_server() as server:`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import math
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from scripts.free_port import free_port
from tests.fakes import (
    REASONING_KEY,
    approx_tokens,
    scripted_message,
    split_arguments,
    split_tokens,
)

DEFAULT_EMBEDDING_DIM = 384
DEFAULT_SCRIPT_KEY = "default"
START_TIMEOUT_S = 20.0
_WORD_RE = re.compile(r"\w+")
_TIMING_KEYS = ("delay", "delay_per_token")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_denied",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}


class ScriptError(ValueError):
    """A script item is malformed, or no script answers a request."""


def embed_text(text: str, dim: int) -> list[float]:
    """Hashed bag-of-words embedding of `text`: deterministic, L2-normalised, `dim` floats."""
    vector = [0.0] * dim
    words = _WORD_RE.findall(text.lower()) or ["<empty>"]
    for word in words:
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        vector[value % dim] += 1.0 if (value >> 63) & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def _check_item(item: Any) -> None:
    if isinstance(item, str):
        return
    if not isinstance(item, dict):
        raise ScriptError(f"Script items are str or dict, got {item!r}")
    for key in _TIMING_KEYS:
        if key in item and not isinstance(item[key], (int, float)):
            raise ScriptError(f"{key!r} must be a number of seconds in {item!r}")
    if "error" in item:
        error = item["error"]
        if not isinstance(error, dict) or not isinstance(error.get("status"), int):
            raise ScriptError(f"'error' needs an integer 'status' in {item!r}")
        unknown = set(item) - {"error", "retry_after", *_TIMING_KEYS}
        if unknown:
            raise ScriptError(f"Unknown keys {sorted(unknown)} in error item {item!r}")
        return
    try:
        scripted_message(_reply_part(item), lambda: "call_check")
    except (TypeError, ValueError) as exc:
        raise ScriptError(str(exc)) from exc


def _reply_part(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in _TIMING_KEYS}


def _message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _error_response(status: int, message: str, retry_after: float | None = None) -> JSONResponse:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else None
    body = {
        "error": {
            "message": message,
            "type": _ERROR_TYPES.get(status, "server_error"),
            "param": None,
            "code": "invalid_api_key" if status == 401 else None,
        }
    }
    return JSONResponse(body, status_code=status, headers=headers)


class _Script:
    def __init__(self, responses: list[Any]) -> None:
        self.responses = list(responses)
        self.cursor = 0
        self.next_tool_call_id = 1

    def new_tool_call_id(self) -> str:
        call_id = f"call_{self.next_tool_call_id}"
        self.next_tool_call_id += 1
        return call_id


class _ClosingStreamingResponse(StreamingResponse):
    """Closes the body generator when the client goes away, so it can record that."""

    async def stream_response(self, send: Any) -> None:
        try:
            await super().stream_response(send)
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]


class ScriptedOpenAIApp:
    """The server's state (scripts and request records) and its Starlette app.

    All handlers run on the server's event loop, so the state needs no lock.
    """

    def __init__(self, embedding_dim: int = DEFAULT_EMBEDDING_DIM) -> None:
        self.embedding_dim = embedding_dim
        self.scripts: dict[str, _Script] = {}
        self.records: list[dict[str, Any]] = []
        self._completion_ids = 0
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
                Route("/v1/embeddings", self.embeddings, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/_script", self.set_script, methods=["POST"]),
                Route("/_requests", self.list_requests, methods=["GET"]),
                Route("/_reset", self.reset, methods=["POST"]),
                Route("/_health", self.health, methods=["GET"]),
            ]
        )

    # -- control endpoints -------------------------------------------------------------

    async def set_script(self, request: Request) -> Response:
        body = await request.json()
        key, responses = body.get("key"), body.get("responses")
        if not isinstance(key, str) or not key or not isinstance(responses, list):
            return _error_response(400, "POST /_script needs {'key': str, 'responses': list}")
        try:
            for item in responses:
                _check_item(item)
        except ScriptError as exc:
            return _error_response(400, str(exc))
        self.scripts[key] = _Script(responses)
        return JSONResponse({"key": key, "responses": len(responses)})

    async def list_requests(self, request: Request) -> Response:
        return JSONResponse(self.records)

    async def reset(self, request: Request) -> Response:
        self.scripts.clear()
        self.records.clear()
        return JSONResponse({"ok": True})

    async def health(self, request: Request) -> Response:
        return JSONResponse({"ok": True})

    # -- OpenAI endpoints --------------------------------------------------------------

    @staticmethod
    def _authorized(request: Request) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and bool(token.strip())

    async def models(self, request: Request) -> Response:
        if not self._authorized(request):
            return _error_response(401, "Missing or empty bearer token")
        names = ["scripted-chat", "scripted-embeddings"]
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "tests"} for n in names]
        return JSONResponse({"object": "list", "data": data})

    async def embeddings(self, request: Request) -> Response:
        body = await request.json()
        record = {"path": "/v1/embeddings", "model": body.get("model"), "input": body.get("input")}
        self.records.append(record)
        if not self._authorized(request):
            record["status"] = 401
            return _error_response(401, "Missing or empty bearer token")
        raw = body.get("input")
        if isinstance(raw, str) or (isinstance(raw, list) and raw and isinstance(raw[0], int)):
            raw = [raw]
        texts = [t if isinstance(t, str) else " ".join(str(i) for i in t) for t in raw or []]
        dim = int(body.get("dimensions") or self.embedding_dim)
        data = []
        for index, text in enumerate(texts):
            vector = embed_text(text, dim)
            if body.get("encoding_format") == "base64":
                encoded: Any = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
            else:
                encoded = vector
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(approx_tokens(t) for t in texts)
        record["status"] = 200
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or "scripted-embeddings",
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def _pick_script(self, messages: list[dict]) -> str:
        first_user = next((m for m in messages if m.get("role") == "user"), None)
        text = _message_text(first_user) if first_user else ""
        found = [(text.find(key), -len(key), key) for key in self.scripts if key != DEFAULT_SCRIPT_KEY and key in text]
        if found:
            return min(found)[2]
        if DEFAULT_SCRIPT_KEY in self.scripts:
            return DEFAULT_SCRIPT_KEY
        raise ScriptError(
            f"No script key occurs in the first user message {text[:200]!r} and there is no "
            f"{DEFAULT_SCRIPT_KEY!r} script (keys: {sorted(self.scripts)})"
        )

    def _next_item(self, key: str) -> tuple[Any, _Script]:
        script = self.scripts[key]
        if script.cursor >= len(script.responses):
            raise ScriptError(f"Script {key!r} is exhausted: all {len(script.responses)} responses were used")
        item = script.responses[script.cursor]
        script.cursor += 1
        return item, script

    async def chat_completions(self, request: Request) -> Response:
        body = await request.json()
        messages = body.get("messages") or []
        record: dict[str, Any] = {
            "path": "/v1/chat/completions",
            "model": body.get("model"),
            "messages": messages,
            "tools": body.get("tools") or [],
            "tool_choice": body.get("tool_choice"),
            "stream": bool(body.get("stream")),
            "script_key": None,
            "status": None,
        }
        if "response_format" in body:
            record["response_format"] = body["response_format"]
        sampling = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "reasoning_effort")
        record["sampling"] = {name: body[name] for name in sampling if name in body}
        record["authorization"] = request.headers.get("authorization", "")
        self.records.append(record)
        if not self._authorized(request):
            record["status"] = 401
            return _error_response(401, "Missing or empty bearer token")
        try:
            key = self._pick_script(messages)
            record["script_key"] = key
            item, script = self._next_item(key)
        except ScriptError as exc:
            record["status"] = 400
            return _error_response(400, str(exc))
        if isinstance(item, str):
            item = {"content": item}
        delay = float(item.get("delay", 0))
        per_token = float(item.get("delay_per_token", 0))
        if "error" in item:
            await asyncio.sleep(delay)
            status = item["error"]["status"]
            record["status"] = status
            message = item["error"].get("message") or f"Scripted HTTP {status}"
            return _error_response(status, message, item.get("retry_after"))
        answer = scripted_message(_reply_part(item), script.new_tool_call_id)
        self._completion_ids += 1
        completion_id = f"chatcmpl-{self._completion_ids}"
        model = body.get("model") or "scripted-chat"
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = self._stream_events(
                record, completion_id, model, messages, answer, delay, per_token, include_usage
            )
            return _ClosingStreamingResponse(events, media_type="text/event-stream")
        pieces = len(split_tokens(answer.content)) + sum(
            1 + len(split_arguments(json.dumps(c["args"]))) for c in answer.tool_calls
        )
        await asyncio.sleep(delay + per_token * pieces)
        record["status"] = 200
        return JSONResponse(self._completion(completion_id, model, messages, answer))

    @staticmethod
    def _usage(messages: list[dict], answer: Any) -> dict[str, int]:
        prompt = sum(approx_tokens(_message_text(m)) for m in messages)
        completion = approx_tokens(answer.content) + sum(
            approx_tokens(json.dumps(c["args"])) + 1 for c in answer.tool_calls
        )
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    @staticmethod
    def _openai_tool_calls(answer: Any) -> list[dict]:
        return [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
            }
            for c in answer.tool_calls
        ]

    def _completion(self, completion_id: str, model: str, messages: list[dict], answer: Any) -> dict[str, Any]:
        content = answer.content if answer.content or not answer.tool_calls else None
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if answer.tool_calls:
            message["tool_calls"] = self._openai_tool_calls(answer)
        if reasoning := answer.additional_kwargs.get(REASONING_KEY):
            message[REASONING_KEY] = reasoning
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if answer.tool_calls else "stop",
                }
            ],
            "usage": self._usage(messages, answer),
        }

    async def _stream_events(
        self,
        record: dict[str, Any],
        completion_id: str,
        model: str,
        messages: list[dict],
        answer: Any,
        delay: float,
        per_token: float,
        include_usage: bool,
    ) -> AsyncIterator[str]:
        created = int(time.time())

        def event(delta: dict | None, finish_reason: str | None = None, **extra: Any) -> str:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
            payload = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": choices,
                **extra,
            }
            return f"data: {json.dumps(payload)}\n\n"

        deltas: list[dict] = []
        for piece in split_tokens(answer.additional_kwargs.get(REASONING_KEY) or ""):
            deltas.append({REASONING_KEY: piece})
        for piece in split_tokens(answer.content):
            deltas.append({"content": piece})
        for index, call in enumerate(answer.tool_calls):
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": ""},
            }
            deltas.append({"tool_calls": [head]})
            for piece in split_arguments(json.dumps(call["args"])):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})

        record["status"] = "streaming"
        record["chunks_sent"] = 0
        try:
            await asyncio.sleep(delay)
            yield event({"role": "assistant", "content": ""})
            for delta in deltas:
                await asyncio.sleep(per_token)
                if "content" in delta:  # wall time the first text token left (bench/server.py)
                    record.setdefault("first_content_sent_at", time.time())
                yield event(delta)
                record["chunks_sent"] += 1
            yield event({}, "tool_calls" if answer.tool_calls else "stop")
            if include_usage:
                yield event(None, usage=self._usage(messages, answer))
            yield "data: [DONE]\n\n"
            record["status"] = 200
        except (asyncio.CancelledError, GeneratorExit):
            record["status"] = "disconnected"
            raise


class ScriptedOpenAIServer:
    """Talks to a running scripted server over HTTP: base URL, scripting and records."""

    def __init__(self, root_url: str) -> None:
        self.root_url = root_url.rstrip("/")
        self.base_url = f"{self.root_url}/v1"
        # A connection per call: a kept-alive one can be closed by the server (its 5 s keep-alive
        # timeout) just as a call reuses it ("Server disconnected without sending a response").
        self._http = httpx.Client(
            base_url=self.root_url,
            timeout=10.0,
            trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def script(self, key: str, responses: list[Any]) -> None:
        """Set the responses served to conversations whose first user message contains `key`."""
        reply = self._http.post("/_script", json={"key": key, "responses": responses})
        if reply.status_code != 200:
            raise ScriptError(reply.json()["error"]["message"])

    def requests(self) -> list[dict[str, Any]]:
        """All recorded requests, oldest first (path, model, messages, tools, status, ...)."""
        return self._http.get("/_requests").json()

    def reset(self) -> None:
        """Drop every script and request record."""
        self._http.post("/_reset").raise_for_status()

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Block until `/_health` answers, or raise TimeoutError."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self._http.get("/_health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Scripted OpenAI server at {self.root_url} did not start")
            time.sleep(0.05)

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()


def _uvicorn_server(embedding_dim: int, port: int, host: str = "127.0.0.1") -> uvicorn.Server:
    config = uvicorn.Config(
        ScriptedOpenAIApp(embedding_dim).app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    return uvicorn.Server(config)


@contextlib.contextmanager
def run_openai_server(embedding_dim: int = DEFAULT_EMBEDDING_DIM) -> Iterator[ScriptedOpenAIServer]:
    """Serve the scripted API from a background thread on a free 127.0.0.1 port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _uvicorn_server(embedding_dim, port)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="scripted-openai", daemon=True)
    thread.start()
    handle = ScriptedOpenAIServer(f"http://127.0.0.1:{port}")
    try:
        handle.wait_ready()
        yield handle
    finally:
        handle.close()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextlib.contextmanager
def spawn_openai_server(
    embedding_dim: int = DEFAULT_EMBEDDING_DIM, port: int | None = None
) -> Iterator[ScriptedOpenAIServer]:
    """Serve the scripted API from a child process (`python -m tests.openai_server`)."""
    port = port or free_port()
    project_root = Path(__file__).resolve().parent.parent
    python_path = [str(project_root), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in python_path if p)}
    command = [sys.executable, "-m", "tests.openai_server", "--port", str(port)]
    command += ["--embedding-dim", str(embedding_dim)]
    process = subprocess.Popen(command, cwd=project_root, env=env)
    handle = ScriptedOpenAIServer(f"http://127.0.0.1:{port}")
    try:
        handle.wait_ready()
        yield handle
    finally:
        handle.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: list[str] | None = None) -> None:
    """Serve the scripted OpenAI-compatible API until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--embedding-dim", type=int, default=DEFAULT_EMBEDDING_DIM)
    args = parser.parse_args(argv)
    _uvicorn_server(args.embedding_dim, args.port, args.host).run()


if __name__ == "__main__":
    main()
