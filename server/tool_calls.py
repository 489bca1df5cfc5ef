"""`POST /api/v1/tools/{name}`: run one tool for the caller, as the agents' tool node runs it.

The call goes through graphs/runtime/tool_runner.py `run_tool`, so it gets exactly what a call
inside a run gets: the tool's argument schema, `TOOL_ARGS_MAX_CHARS`, `AGENT_TOOL_TIMEOUT` and
`AGENT_TOOL_RETRIES`, and the per-user quotas the tools charge themselves (web search and read,
tools/quota.py). The tool acts for the caller: memory tools read and write the caller's own
memories, knowledge-base tools read the knowledge bases the caller may read.

Answers: 200 with the tool's `result` and its timing; 404 TOOL_NOT_FOUND; 422 VALIDATION_ERROR
for arguments the tool refuses (schema, size, values such as an unknown knowledge base); 429
QUOTA_EXCEEDED; 408 TIMEOUT_ERROR past `AGENT_TOOL_TIMEOUT`; 502 TOOL_FAILED when the tool itself
failed (after its retries).
"""

from __future__ import annotations

import json
from typing import Any

from langgraph.prebuilt.tool_node import ToolInvocationError

from graphs.runtime.tool_runner import run_tool
from server import web
from server.errors import ApiError
from settings import settings
from settings.redact import redact
from tools.errors import ToolInputError
from tools.quota import QuotaExceeded
from tools.registry import available_tools


def _result(content: Any) -> Any:
    """The tool's result as JSON: tools answer dicts and lists, which the tool node hands over as
    JSON text; text that is not JSON stays text."""
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def _failure(name: str, error: BaseException | None, entry: dict) -> ApiError:
    timing = {"tool": name, "duration_ms": entry["duration_ms"], "attempts": entry["attempts"]}
    message = redact(str(entry.get("error") or "the tool reported an error"))
    if isinstance(error, QuotaExceeded):
        return web.quota_error(error)
    if isinstance(error, ToolInvocationError):
        problems = [
            {"field": ".".join(str(part) for part in problem.get("loc", ())) or "body", "message": problem["msg"]}
            for problem in error.filtered_errors or ()
        ]
        text = "; ".join(f"{p['field']}: {p['message']}" for p in problems) or message
        return ApiError("VALIDATION_ERROR", f"Invalid arguments for {name}: {text}", {**timing, "errors": problems})
    if isinstance(error, ToolInputError):
        return ApiError("VALIDATION_ERROR", f"Invalid arguments for {name}: {message}", timing)
    kind = type(error).__name__ if error is not None else "ToolError"
    if isinstance(error, TimeoutError):  # asyncio.TimeoutError too
        return ApiError("TIMEOUT_ERROR", f"{name} failed: {message}", {**timing, "error_type": kind})
    return ApiError("TOOL_FAILED", f"{name} failed: {message}", {**timing, "error_type": kind})


async def call_tool(store: Any, user: Any, name: str, args: dict[str, Any]) -> dict:
    """Run tool `name` with `args` for `user` (None: no auth configured); the answer body, or ApiError."""
    tools, _problems = await available_tools()
    tool = tools.get(name)
    if tool is None:
        raise ApiError(
            "TOOL_NOT_FOUND",
            f"No tool named {name!r}; GET /api/v1/tools lists them.",
            {"tool": name, "available": sorted(tools)},
        )
    config = settings()
    user_id = str(getattr(user, "identity", None) or config.AGENT_DEFAULT_USER_ID)
    run = await run_tool(
        tool,
        args,
        user=user,
        user_id=user_id,
        store=store,
        timeout_s=config.AGENT_TOOL_TIMEOUT,
        retries=config.AGENT_TOOL_RETRIES,
    )
    if run.entry["status"] != "success":
        raise _failure(name, run.error, run.entry)
    return {
        "tool": name,
        "result": _result(run.content),
        "duration_ms": run.entry["duration_ms"],
        "attempts": run.entry["attempts"],
        "started_at": run.entry["started_at"],
        "finished_at": run.entry["finished_at"],
    }
