"""Memory constants and settings: namespaces' kinds, limits, and the MEMORY_* variables."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

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
ASPECTS_KIND = "aspects"  # the namespace of each speaker's person/attribute index (store/aspects.py), key = speaker
LIST_DEPTH = 200  # a list question's vector search among the named person's messages: this many deep
PEOPLE_KEY = "people"  # the item of the profile namespace holding the registry of people (store/people.py)
PASSAGES_FIELD = "passages"  # a long chat message's sentences, each embedded beside its text (store/sentences.py)
SEARCHES = ("hybrid", "dense")

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
RECALLED_TURNS = 5  # the latest chat turns a recalled memory shows as where it came from
RECALLED_TURN_CHARS = 1000  # each shown turn's text is cut to this length


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
    neighbour_weight: float = 0.55
    neighbour_turns: int = 2
    answer_weight: float = 0.6
    list_interleave: int = 1
    scoring: str = "plain"


def memory_config() -> MemoryConfig:
    """The MEMORY_* settings (settings/): field `x` is MEMORY_X (MEMORY_TTL_DAYS 0: no TTL;
    MEMORY_CHAT_HALF_LIFE_DAYS 0: chat turns do not decay)."""
    values = settings()
    config = MemoryConfig(**{f.name: getattr(values, f"MEMORY_{f.name.upper()}") for f in fields(MemoryConfig)})
    return replace(config, ttl_days=config.ttl_days or None)
