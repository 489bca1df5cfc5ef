"""Memory constants and settings: namespaces' kinds, limits, and the MEMORY_* variables."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

ROOT = "memories"
KINDS = ("episodic", "semantic", "profile", "chat")
MEMORY_KINDS = ("episodic", "semantic")
TEXT_KINDS = ("episodic", "semantic", "chat")
CATEGORIES = ("preference", "fact", "skill", "relationship", "goal", "other")
ROLES = ("user", "assistant")
SOURCES = ("tool", "extraction", "chat")
SCORINGS = ("weighted", "plain")
PROFILE_KEY = "profile"

MAX_LIMIT = 100
MAX_POOL = 200
SCAN_PAGE = 100
MAX_KEYWORDS = 20
MAX_KEYWORD_CHARS = 100
MAX_PROFILE_FIELDS = 100
MAX_PROFILE_KEY_CHARS = 64
MAX_PROFILE_VALUE_CHARS = 1000
MAX_ID_CHARS = 256
PROFILE_FACTS_PER_CATEGORY = 10
PROFILE_FACTS_SCANNED = 50
DATE_FORMAT_HELP = "ISO 8601: 'YYYY-MM-DD' or 'YYYY-MM-DDTHH:MM[:SS][+HH:MM]' (UTC when no offset)"


@dataclass(frozen=True)
class MemoryConfig:
    """Memory settings, read from the environment by `memory_config()`."""

    dedupe_threshold: float = 0.9
    half_life_days: float = 30.0
    chat_half_life_days: float = 0.0
    supersede_margin: float = 0.1
    ttl_days: float | None = None
    max_text_chars: int = 8000
    weight_similarity: float = 0.6
    weight_importance: float = 0.2
    weight_recency: float = 0.1
    weight_access: float = 0.1
    access_step: float = 0.1
    access_cap: float = 0.5
    candidate_factor: int = 5
    scan_limit: int = 5000


_ENV_FIELDS = {
    "MEMORY_DEDUPE_THRESHOLD": ("dedupe_threshold", float),
    "MEMORY_HALF_LIFE_DAYS": ("half_life_days", float),
    "MEMORY_CHAT_HALF_LIFE_DAYS": ("chat_half_life_days", float),
    "MEMORY_SUPERSEDE_MARGIN": ("supersede_margin", float),
    "MEMORY_TTL_DAYS": ("ttl_days", float),
    "MEMORY_MAX_TEXT_CHARS": ("max_text_chars", int),
    "MEMORY_WEIGHT_SIMILARITY": ("weight_similarity", float),
    "MEMORY_WEIGHT_IMPORTANCE": ("weight_importance", float),
    "MEMORY_WEIGHT_RECENCY": ("weight_recency", float),
    "MEMORY_WEIGHT_ACCESS": ("weight_access", float),
    "MEMORY_ACCESS_STEP": ("access_step", float),
    "MEMORY_ACCESS_CAP": ("access_cap", float),
    "MEMORY_CANDIDATE_FACTOR": ("candidate_factor", int),
    "MEMORY_SCAN_LIMIT": ("scan_limit", int),
}


def memory_config() -> MemoryConfig:
    """Read the MEMORY_* variables (unset or empty: the default; MEMORY_TTL_DAYS 0: no TTL;
    MEMORY_CHAT_HALF_LIFE_DAYS 0: chat turns do not decay)."""
    values: dict[str, Any] = {}
    for env, (name, kind) in _ENV_FIELDS.items():
        raw = os.environ.get(env, "").strip()
        if not raw:
            continue
        try:
            values[name] = kind(raw)
        except ValueError:
            raise ValueError(f"{env}={raw!r} is not a valid {kind.__name__}") from None
        if not math.isfinite(values[name]) or values[name] < 0:
            raise ValueError(f"{env}={raw!r} must be a finite number >= 0")
    config = MemoryConfig(**values)
    if not 0 < config.dedupe_threshold <= 1:
        raise ValueError("MEMORY_DEDUPE_THRESHOLD must be in (0, 1]")
    if config.half_life_days <= 0:
        raise ValueError("MEMORY_HALF_LIFE_DAYS must be > 0")
    if config.max_text_chars < 1 or config.candidate_factor < 1 or config.scan_limit < 1:
        raise ValueError(
            "MEMORY_MAX_TEXT_CHARS, MEMORY_CANDIDATE_FACTOR and MEMORY_SCAN_LIMIT must be >= 1"
        )
    if config.ttl_days == 0:
        config = MemoryConfig(**{**config.__dict__, "ttl_days": None})
    return config

