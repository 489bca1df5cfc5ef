"""Tool calls a model wrote as text instead of `tool_calls`, recovered and validated.

Small open models, and the servers that run them, often answer a tool-calling request with the
call written in `content`: a fenced or bare JSON `{"name": ..., "arguments": {...}}` (also with
doubled braces `{{...}}}`, or a list of them), `<tool_call>{...}</tool_call>`, or
`<tools><function name="..." arguments='{...}'/></tools>`. `find_text_tool_calls` finds those
shapes; `check_text_tool_calls` validates each against the offered tools (name offered, arguments
a JSON object accepted by the tool's own argument schema: required fields present, types
checked). Only valid calls become real tool calls; an invalid one is never executed.

LangChain's JSON helpers (`langchain_core.utils.json.parse_json_markdown`) read one fenced
object; the call shapes above need the scan below (every object in the text, doubled braces,
XML-ish wrappers), so the scan uses `json.JSONDecoder.raw_decode` directly.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolCall
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

_DECODER = json.JSONDecoder()
_FUNCTION_TAG = re.compile(
    r"""<function\s+name\s*=\s*["']?(?P<name>[\w.\-]+)["']?\s+(?:arguments|args|parameters)\s*=\s*"""
    r"""(?P<quote>['"])(?P<args>.*?)(?P=quote)\s*/?>(?:\s*</function>)?""",
    re.DOTALL,
)
_FUNCTION_EQ = re.compile(r"<function=(?P<name>[\w.\-]+)>(?P<args>.*?)</function>", re.DOTALL)
_WRAPPERS = re.compile(r"</?(?:tools|tool_call|tool_calls|function_calls)>|```(?:json|tool_call)?", re.IGNORECASE)
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "tool_input", "input")


@dataclass
class TextToolCall:
    """One call found in the text: the tool name, its raw arguments, where it was."""

    name: str
    arguments: Any
    start: int
    end: int


@dataclass
class TextToolCalls:
    """What `recover` made of a message: the valid calls and the problems of the invalid ones."""

    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    content: str = ""
    """The text left once every call found (valid or not) is cut out."""


def _as_call(value: Any) -> tuple[str, Any] | None:
    """(name, arguments) when `value` has a tool call's shape, else None."""
    if not isinstance(value, dict):
        return None
    inner = value.get("function")
    if isinstance(inner, dict) and isinstance(inner.get("name"), str):  # {"type": "function", "function": {...}}
        value = inner
    name = next((value[key] for key in _NAME_KEYS if isinstance(value.get(key), str)), None)
    arg_key = next((key for key in _ARG_KEYS if key in value), None)
    if not name or arg_key is None:
        return None
    if set(value) - {*_NAME_KEYS, arg_key, "type", "id"}:
        return None  # other keys: some JSON object, not a call
    return name.strip(), value[arg_key]


def _json_calls(text: str) -> list[TextToolCall]:
    """Every JSON object (or list of objects) in `text` that has a call's shape."""
    found: list[TextToolCall] = []
    index = 0
    while index < len(text):
        if text[index] not in "{[":
            index += 1
            continue
        try:
            value, end = _DECODER.raw_decode(text, index)
        except ValueError:
            index += 1
            continue
        items = value if isinstance(value, list) else [value]
        calls = [_as_call(item) for item in items]
        if items and all(call is not None for call in calls):
            found += [TextToolCall(name, args, index, end) for name, args in calls if name]  # type: ignore[misc]
            index = end
        else:
            index += 1
    return found


def _undouble(text: str) -> str:
    """`{{"name": ...}}}` as some chat templates teach it: braces doubled, one too many at the end."""
    return text.replace("{{", "{").replace("}}", "}")


def find_text_tool_calls(text: str) -> tuple[list[TextToolCall], str]:
    """The tool calls written in `text` and the text without them (wrappers and fences removed)."""
    if not text or not any(mark in text for mark in ("{", "<function")):
        return [], text
    found = [
        TextToolCall(m["name"], m["args"], m.start(), m.end())
        for pattern in (_FUNCTION_TAG, _FUNCTION_EQ)
        for m in pattern.finditer(text)
    ]
    source = text
    if not found:
        found = _json_calls(text)
    if not found and "{{" in text:
        source = _undouble(text)
        found = _json_calls(source)
    if not found:
        return [], text
    rest, last = [], 0
    for call in sorted(found, key=lambda c: c.start):
        rest.append(source[last : call.start])
        last = max(last, call.end)
    rest.append(source[last:])
    return sorted(found, key=lambda c: c.start), _WRAPPERS.sub("", "".join(rest)).strip()


def _schema_errors(tool: BaseTool, args: dict) -> str | None:
    """None when the tool's own argument schema accepts `args`, else why not."""
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(args)
        except ValidationError as exc:
            return "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or 'arguments'}: {error['msg']}" for error in exc.errors()
            )
        return None
    if isinstance(schema, dict):  # MCP tools: a JSON schema
        import jsonschema

        try:
            jsonschema.validate(args, schema)
        except jsonschema.ValidationError as exc:
            return exc.message
    return None


def check_text_tool_calls(found: list[TextToolCall], tools: list[BaseTool]) -> tuple[list[ToolCall], list[str]]:
    """(valid calls as LangChain tool calls, one error text per invalid call)."""
    by_name = {tool.name: tool for tool in tools}
    calls: list[ToolCall] = []
    errors: list[str] = []
    for item in found:
        tool = by_name.get(item.name)
        if tool is None:
            errors.append(f"there is no tool named {item.name!r}; tools: {', '.join(sorted(by_name))}")
            continue
        args = item.arguments
        if isinstance(args, str):
            try:
                args = json.loads(args or "{}")
            except ValueError as exc:
                errors.append(f"{item.name}: the arguments are not valid JSON ({exc})")
                continue
        if args is None:
            args = {}
        if not isinstance(args, dict):
            errors.append(f"{item.name}: the arguments must be a JSON object, got {type(args).__name__}")
            continue
        problem = _schema_errors(tool, args)
        if problem:
            errors.append(f"{item.name}: {problem}")
            continue
        calls.append(ToolCall(name=item.name, args=args, id=f"call_{uuid.uuid4().hex[:24]}", type="tool_call"))
    return calls, errors


def recover(message: AIMessage, tools: list[BaseTool]) -> TextToolCalls | None:
    """The calls `message` wrote as text, validated against `tools`; None when it wrote none
    (or already made real tool calls)."""
    if not tools or message.tool_calls or not isinstance(message, AIMessage):
        return None
    found, rest = find_text_tool_calls(message.text)
    if not found:
        return None
    calls, errors = check_text_tool_calls(found, tools)
    return TextToolCalls(calls=calls, errors=errors, content=rest)


def with_calls(message: AIMessage, recovered: TextToolCalls) -> AIMessage:
    """A copy of `message` whose text calls are real tool calls (their text removed)."""
    return message.model_copy(
        update={"content": recovered.content, "tool_calls": recovered.calls, "invalid_tool_calls": []}
    )
