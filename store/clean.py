"""Values made safe for Postgres: text columns and JSONB cannot hold the NUL character."""

from __future__ import annotations

from typing import Any


def strip_nul(value: Any) -> Any:
    """`value` with every NUL character removed from its strings (dict keys, lists, nested)."""
    if isinstance(value, str):
        return value.replace("\x00", "") if "\x00" in value else value
    if isinstance(value, dict):
        return {strip_nul(key): strip_nul(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(strip_nul(item) for item in value)
    return value
