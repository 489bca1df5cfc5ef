"""Memory constants and settings: namespaces' kinds, limits, and the MEMORY_* variables."""

from __future__ import annotations

from dataclasses import dataclass

from settings import settings

ROOT = "memories"
KINDS = ("episodic", "semantic", "profile", "chat")
MEMORY_KINDS = ("episodic", "semantic")
TEXT_KINDS = ("episodic", "semantic", "chat")
CATEGORIES = ("preference", "fact", "skill", "relationship", "goal", "other")
ROLES = ("user", "assistant")
ASSISTANT_SPEAKER = "assistant"  # who the assistant's chat messages are recorded as said by
SOURCES = ("tool", "extraction", "chat")
SCORINGS = ("weighted", "plain")
PROFILE_KEY = "profile"
SEARCHES = ("hybrid", "dense")
TEXT_SEARCH_CONFIG = "english"  # Postgres text search configuration of memory full text

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


@dataclass(frozen=True)
class MemoryConfig:
    """Memory settings, from the MEMORY_* variables by `memory_config()`."""

    dedupe_threshold: float = 0.9
    half_life_days: float = 180.0
    fact_half_life_days: float = 30.0
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
    search: str = "hybrid"
    keyword_weight: float = 0.35
    time_weight: float = 1.0
    speaker_weight: float = 0.5
    neighbour_weight: float = 0.5
    neighbour_turns: int = 1
    scoring: str = "plain"


def memory_config() -> MemoryConfig:
    """The MEMORY_* settings (settings/; MEMORY_TTL_DAYS 0: no TTL; MEMORY_CHAT_HALF_LIFE_DAYS 0:
    chat turns do not decay)."""
    values = settings()
    return MemoryConfig(
        dedupe_threshold=values.MEMORY_DEDUPE_THRESHOLD,
        half_life_days=values.MEMORY_HALF_LIFE_DAYS,
        fact_half_life_days=values.MEMORY_FACT_HALF_LIFE_DAYS,
        chat_half_life_days=values.MEMORY_CHAT_HALF_LIFE_DAYS,
        supersede_margin=values.MEMORY_SUPERSEDE_MARGIN,
        ttl_days=values.MEMORY_TTL_DAYS or None,
        max_text_chars=values.MEMORY_MAX_TEXT_CHARS,
        weight_similarity=values.MEMORY_WEIGHT_SIMILARITY,
        weight_importance=values.MEMORY_WEIGHT_IMPORTANCE,
        weight_recency=values.MEMORY_WEIGHT_RECENCY,
        weight_access=values.MEMORY_WEIGHT_ACCESS,
        access_step=values.MEMORY_ACCESS_STEP,
        access_cap=values.MEMORY_ACCESS_CAP,
        candidate_factor=values.MEMORY_CANDIDATE_FACTOR,
        scan_limit=values.MEMORY_SCAN_LIMIT,
        search=values.MEMORY_SEARCH,
        keyword_weight=values.MEMORY_KEYWORD_WEIGHT,
        time_weight=values.MEMORY_TIME_WEIGHT,
        speaker_weight=values.MEMORY_SPEAKER_WEIGHT,
        neighbour_weight=values.MEMORY_NEIGHBOUR_WEIGHT,
        neighbour_turns=values.MEMORY_NEIGHBOUR_TURNS,
        scoring=values.MEMORY_SCORING,
    )
