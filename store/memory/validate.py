"""Validation of every input before anything is written, and the user namespaces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.store.base import Item

from store.memory.config import (
    CATEGORIES,
    KINDS,
    MAX_ID_CHARS,
    MAX_KEYWORD_CHARS,
    MAX_KEYWORDS,
    MAX_LIMIT,
    MAX_PROFILE_KEY_CHARS,
    MAX_PROFILE_VALUE_CHARS,
    PASSAGES_FIELD,
    ROOT,
    MemoryConfig,
)


def user_label(user_id: Any) -> str:
    """The namespace label of a user id (`%` and `.` percent-encoded); ValueError if invalid."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError("user_id must be a non-empty string")
    if len(user_id) > MAX_ID_CHARS:
        raise ValueError(f"user_id is longer than {MAX_ID_CHARS} characters")
    return user_id.replace("%", "%25").replace(".", "%2E")


def user_prefix(user_id: str) -> tuple[str, str]:
    """The namespace prefix under which all of one user's memories live."""
    return (ROOT, user_label(user_id))


def namespace(user_id: str, kind: str) -> tuple[str, str, str]:
    """The store namespace of one user's memories of one kind."""
    return (*user_prefix(user_id), choice(kind, KINDS, "kind"))


def choice(value: Any, allowed: Sequence[str], name: str) -> str:
    """`value` if it is one of `allowed`, else ValueError listing them."""
    if value not in allowed:
        raise ValueError(f"Unknown {name} {value!r}; valid: {', '.join(allowed)}")
    return value


def checked_text(text: Any, config: MemoryConfig, name: str = "text") -> str:
    """The stripped text, or ValueError if empty or longer than MEMORY_MAX_TEXT_CHARS."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{name} must be a non-empty string")
    if len(text) > config.max_text_chars:
        raise ValueError(
            f"{name} has {len(text)} characters; the limit is {config.max_text_chars} "
            "(MEMORY_MAX_TEXT_CHARS). Save a shorter summary."
        )
    return text.strip()


def checked_limit(value: Any, name: str = "limit", maximum: int = MAX_LIMIT) -> int:
    """An integer from 1 to `maximum`, or ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ValueError(f"{name} must be an integer from 1 to {maximum}, got {value!r}")
    return value


def checked_importance(value: Any) -> float:
    """A number from 0 to 1 as float, or ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"importance must be a number from 0 to 1, got {value!r}")
    return float(value)


def checked_category(kind: str, category: Any) -> str | None:
    """The category of a semantic memory ("other" by default); None for other kinds."""
    if kind != "semantic":
        if category is not None:
            raise ValueError("category applies to semantic memories only")
        return None
    return choice(category if category is not None else "other", CATEGORIES, "category")


def optional_id(value: Any, name: str) -> str | None:
    """None or a non-empty id of at most MAX_ID_CHARS characters."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
        raise ValueError(f"{name} must be a non-empty string of at most {MAX_ID_CHARS} characters")
    return value


def checked_keywords(keywords: Any) -> list[str]:
    """Distinct non-empty keywords within the limits, or ValueError."""
    if isinstance(keywords, str) or not isinstance(keywords, (list, tuple)):
        raise ValueError("keywords must be a list of strings, e.g. ['meeting', 'project']")
    cleaned = [k.strip() for k in keywords if isinstance(k, str) and k.strip()]
    if len(cleaned) != len(keywords) or not cleaned:
        raise ValueError("keywords must be a non-empty list of non-empty strings")
    if len(cleaned) > MAX_KEYWORDS or any(len(k) > MAX_KEYWORD_CHARS for k in cleaned):
        raise ValueError(f"at most {MAX_KEYWORDS} keywords of at most {MAX_KEYWORD_CHARS} characters each")
    return list(dict.fromkeys(cleaned))


def shown(value: dict) -> dict:
    """A stored value as reads and writes return it: without its search `passages`."""
    return {k: v for k, v in value.items() if k != PASSAGES_FIELD}


def as_result(item: Item, score: float | None, **extra: Any) -> dict:
    """The dict a read or write returns for one item (`shown`)."""
    return {"id": item.key, **shown(item.value), "score": score, **extra}


def profile_fields(fields: Any) -> dict[str, str | None]:
    """Checked profile changes: field name -> text, or None to remove the field."""
    if not isinstance(fields, dict) or not fields:
        raise ValueError("fields must be a non-empty dict of field name -> text (None removes)")
    checked: dict[str, str | None] = {}
    for name, value in fields.items():
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_PROFILE_KEY_CHARS:
            raise ValueError(
                f"profile field names must be non-empty strings of at most "
                f"{MAX_PROFILE_KEY_CHARS} characters, got {name!r}"
            )
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        too_long = isinstance(value, str) and len(value) > MAX_PROFILE_VALUE_CHARS
        if value is not None and (not isinstance(value, str) or too_long):
            raise ValueError(
                f"profile field {name!r} must be text of at most {MAX_PROFILE_VALUE_CHARS} "
                "characters, or None to remove it"
            )
        checked[name.strip()] = value.strip() if isinstance(value, str) else None
    return checked
