"""The weighted recall score: relevance, importance, freshness by kind, access frequency."""

from __future__ import annotations

from datetime import datetime

from langgraph.store.base import SearchItem

from store.memory.config import MemoryConfig
from store.memory.times import age_days, written_at


def recency_factor(age_days: float, half_life_days: float) -> float:
    """1.0 for a fresh memory, halving every `half_life_days` (future timestamps count as 0)."""
    return 0.5 ** (max(age_days, 0.0) / half_life_days)


def access_boost(access_count: int, config: MemoryConfig) -> float:
    """`min(access_count * step, cap)`: frequently recalled memories rank a little higher."""
    return min(max(access_count, 0) * config.access_step, config.access_cap)


def relevance(similarity: float, best_similarity: float) -> float:
    """Similarity relative to the best candidate's: 1.0 for the best, 0 for similarity <= 0."""
    return max(similarity, 0.0) / best_similarity if best_similarity > 0 else 0.0


def freshness(kind: str, age_days: float, outdated_days: float, config: MemoryConfig) -> float:
    """Time decay by kind: an event fades with its age (MEMORY_HALF_LIFE_DAYS); a semantic fact
    with `outdated_days`, how much older it is than the newest comparable fact (0 while it is
    the newest; MEMORY_FACT_HALF_LIFE_DAYS); a chat turn with its age only when
    MEMORY_CHAT_HALF_LIFE_DAYS is set."""
    if kind == "semantic":
        return recency_factor(outdated_days, config.fact_half_life_days)
    if kind == "chat":
        half_life = config.chat_half_life_days
        return recency_factor(age_days, half_life) if half_life else 1.0
    return recency_factor(age_days, config.half_life_days)


def weighted_score(
    relevance: float, importance: float, freshness: float, access_count: int, config: MemoryConfig
) -> float:
    """The weighted recall score: relevance, importance, freshness and access frequency."""
    return (
        config.weight_similarity * relevance
        + config.weight_importance * importance
        + config.weight_recency * freshness
        + config.weight_access * access_boost(access_count, config)
    )


def rank_weighted(
    hits: list[SearchItem], kind: str, config: MemoryConfig, now: datetime, *, decay: bool = True
) -> list[tuple[SearchItem, float]]:
    """The candidates ordered by `weighted_score`, best first, each text once. Without `decay`
    (the query names the time it asks about) every candidate's freshness is 1.0."""
    best = max((hit.score or 0.0 for hit in hits), default=0.0)
    scored = []
    for hit in hits:
        if decay:
            outdated = _outdated_days(hit, hits, config, now) if kind == "semantic" else 0.0
            fresh = freshness(kind, age_days(hit.value, now), outdated, config)
        else:
            fresh = 1.0
        score = weighted_score(
            relevance(hit.score or 0.0, best),
            float(hit.value.get("importance", 0.5)),
            fresh,
            int(hit.value.get("access_count", 0)),
            config,
        )
        scored.append((score, hit.score or 0.0, written_at(hit.value, now), hit))
    scored.sort(key=lambda entry: entry[:3], reverse=True)
    seen: set[str | None] = set()
    ranked = []
    for score, _, _, hit in scored:
        text = hit.value.get("text")
        if text not in seen:
            seen.add(text)
            ranked.append((hit, score))
    return ranked


def _outdated_days(hit: SearchItem, hits: list[SearchItem], config: MemoryConfig, now: datetime) -> float:
    """How much older `hit` is than the newest comparable candidate: same category, similarity
    at least its own minus MEMORY_SUPERSEDE_MARGIN (0 when it is the newest)."""
    floor = (hit.score or 0.0) - config.supersede_margin
    written = written_at(hit.value, now)
    newest = max(
        (
            written_at(other.value, now)
            for other in hits
            if other.value.get("category") == hit.value.get("category") and (other.score or 0.0) >= floor
        ),
        default=written,
    )
    return max((newest - written).total_seconds() / 86400, 0.0)
