"""Text for people: tool results without raw JSON, and many failures summed up in one line.

`readable(result)` turns a tool result that is a JSON object or list (what a tool returning a
dict sends back, e.g. `current_time`'s) into short labelled lines; any other text is kept as it
is. `summarize_errors(errors)` gives the first error and how many others there were, instead of
every error one after the other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

MAX_DEPTH = 4
"""Nesting shown; deeper values are written compactly."""
ERROR_CHARS = 300
"""Longest first error shown by `summarize_errors`."""


def readable(result: Any, limit: int | None = None) -> str:
    """`result` for people: a JSON object or list as `label: value` lines (nested lists as `- `
    items), other text unchanged; cut to `limit` characters when given."""
    value = result
    if isinstance(result, str):
        text = result.strip()
        if not text.startswith(("{", "[")):
            return _cut(result, limit)
        try:
            value = json.loads(text)
        except ValueError:
            return _cut(result, limit)
    if not isinstance(value, (dict, list)):
        return _cut(str(value), limit)
    return _cut("\n".join(_lines(value, 0)) or "(nothing)", limit)


def _lines(value: Any, depth: int) -> list[str]:
    indent = "  " * depth
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if item is None or item == "" or item == [] or item == {}:
                continue
            label = str(key).replace("_", " ")
            if isinstance(item, (dict, list)) and depth < MAX_DEPTH and not _flat(item):
                lines += [f"{indent}{label}:", *_lines(item, depth + 1)]
            else:
                lines.append(f"{indent}{label}: {_scalar(item)}")
        return lines
    if isinstance(value, list):
        lines = []
        for item in value:
            if isinstance(item, (dict, list)) and depth < MAX_DEPTH and not _flat(item):
                nested = _lines(item, depth + 1)
                if nested:
                    lines.append(f"{indent}- {nested[0].lstrip()}")
                    lines += nested[1:]
            else:
                lines.append(f"{indent}- {_scalar(item)}")
        return lines
    return [f"{indent}{_scalar(value)}"]


def _flat(value: dict | list) -> bool:
    """A list of plain values, written on one line."""
    return isinstance(value, list) and all(not isinstance(item, (dict, list)) for item in value)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_scalar(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{str(k).replace('_', ' ')}: {_scalar(v)}" for k, v in value.items() if v is not None)
    return str(value)


def _cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + "…"


def summarize_errors(errors: Sequence[str], limit: int = ERROR_CHARS) -> str:
    """The first error (cut to `limit` characters) and a count of the others, e.g.
    "search failed: DNS lookup of example.org failed (and 4 more errors)"; "" when there are none."""
    shown = [" ".join(str(e).split()) for e in errors if str(e).strip()]
    if not shown:
        return ""
    first = _cut(shown[0], limit)
    others = len(shown) - 1
    if not others:
        return first
    return f"{first} (and {others} more error{'s' if others > 1 else ''})"
