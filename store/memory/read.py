"""Reads: weighted recall, keyword / time-range / recent listings and the profile."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import cast

from langgraph.store.base import BaseStore, GetOp, Item, SearchItem, SearchOp

from store import aspects, hybrid
from store.backend import Listing, backend_for, haystack
from store.dates import expired, names_time
from store.index import require_index
from store.memory import times
from store.memory.config import (
    CATEGORIES,
    MAX_POOL,
    MEMORY_KINDS,
    PROFILE_FACTS_PER_CATEGORY,
    PROFILE_FACTS_SCANNED,
    PROFILE_KEY,
    RECALLED_TURN_CHARS,
    RECALLED_TURNS,
    ROLES,
    SCORINGS,
    TEXT_KINDS,
    MemoryConfig,
    memory_config,
)
from store.memory.hybrid import HYBRID_MIN_POOL, MemoryCorpus, memory_policy
from store.memory.scoring import rank_weighted, recency_factor
from store.memory.times import age_days, resolve_time_range, stamp
from store.memory.validate import (
    as_result,
    checked_keywords,
    checked_limit,
    checked_text,
    choice,
    namespace,
    user_label,
)
from store.memory.write import put_op, with_expiry


async def recall(
    store: BaseStore,
    user_id: str,
    query: str,
    kind: str,
    *,
    top_k: int = 5,
    category: str | None = None,
    role: str | None = None,
    scoring: str | None = None,
    record_access: bool = True,
    turns: bool = True,
    now: datetime | None = None,
    config: MemoryConfig | None = None,
) -> list[dict]:
    """Search one kind of the user's memories (episodic, semantic or chat), with `config`'s
    settings (default: the MEMORY_* variables).

    Candidates: with MEMORY_SEARCH=hybrid (default) the fusion of vector search, BM25 full text
    and the memories written in a time range the query names (`store.memory.hybrid`); with
    `dense` the store's vector search. `scoring` (default MEMORY_SCORING): `"weighted"` re-ranks
    `top_k * MEMORY_CANDIDATE_FACTOR` candidates with `rank_weighted`; `"plain"` keeps the
    candidates' order (duplicates included). Each result carries `score` (the ranking score) and
    `similarity` (the store's cosine similarity; None for a candidate only full text or its
    date found). A chat message sent in parts (store/parts.py) comes back once, with `parts`:
    every part as `turns` shows a message, in order; its similarity is its best part's. Episodic
    and semantic results also carry `turns`: the chat messages the memory
    was learnt from (its `turn_ids`, the latest 5, each `{"id", "role", "text", "created_at",
    "speaker"?}`, text cut to 1,000 characters), read for all results at once; `turns=False`
    leaves them out (no read) for callers that use the texts only. With
    `record_access`, the returned memories get `access_count + 1` and `last_accessed_at` = now
    (the vector is kept).
    """
    config = config or memory_config()
    ns = namespace(user_id, choice(kind, TEXT_KINDS, "kind"))
    query = checked_text(query, config, "query")
    top_k = checked_limit(top_k, "top_k")
    scoring = choice(scoring or config.scoring, SCORINGS, "scoring")
    if category is not None and kind != "semantic":
        raise ValueError("category applies to semantic memories only")
    if category is not None:
        choice(category, CATEGORIES, "category")
    if role is not None and kind != "chat":
        raise ValueError("role applies to chat history only")
    if role is not None:
        choice(role, ROLES, "role")
    now = now or times.utc_now()

    wanted = {k: v for k, v in (("category", category), ("role", role)) if v is not None}
    pool = min(top_k * config.candidate_factor, MAX_POOL)
    if config.search == "hybrid":
        pool = max(pool, HYBRID_MIN_POOL)
        corpus = MemoryCorpus(store, ns, wanted, config, now)
        fused = await hybrid.search(corpus, memory_policy(config, kind), query, pool, now)
        hits = [_scored(cast(Item, r.item), r.score) for r in fused]
        similarity = {r.item.key: r.similarity for r in fused}
        parts: dict[str, Sequence[Item]] = {r.item.key: cast(tuple[Item, ...], r.parts) for r in fused if r.parts}
        if kind == "chat" and config.list_interleave:
            folded = {item.key for key, items in parts.items() for item in items if item.key != key}
            hits = await _with_list_turns(corpus, query, hits, similarity, config.list_interleave, folded)
    else:
        require_index(store)
        hits = await store.asearch(ns, query=query, filter=wanted or None, limit=pool, refresh_ttl=False)
        hits = [hit for hit in hits if not expired(hit.value, now)]
        similarity = {hit.key: hit.score for hit in hits}
        parts = {}
    if scoring == "weighted":
        # A query that names its time ("in the week of 8 May 2023") asks about then, not now.
        ranked = rank_weighted(hits, kind, config, now, decay=not names_time(query, now))
    else:
        ranked = [(hit, hit.score or 0.0) for hit in hits]
    ranked = ranked[:top_k]
    if record_access and ranked:
        ranked = await _record_access(store, ranked, config, now)
    results = [
        as_result(hit, score, similarity=similarity.get(hit.key), **_parts(parts.get(hit.key))) for hit, score in ranked
    ]
    if turns and kind in MEMORY_KINDS:
        await _attach_turns(store, user_id, [(r, r.get("turn_ids")) for r in results], now)
    return results


async def _attach_turns(
    store: BaseStore, user_id: str, holders: list[tuple[dict, Sequence[str] | None]], now: datetime
) -> None:
    """Set `turns` on each holder: the chat messages its ids name (the latest RECALLED_TURNS),
    as `{"id", "role", "text", "created_at", "speaker"?, "truncated"?}`, text cut to
    RECALLED_TURN_CHARS. One batched read of `user_id`'s own chat namespace: an id of another
    user's message, or of a deleted or expired one, finds nothing and is left out."""
    chat_ns = namespace(user_id, "chat")
    wanted = [list(ids or [])[-RECALLED_TURNS:] for _, ids in holders]
    keys = list(dict.fromkeys(key for ids in wanted for key in ids if isinstance(key, str)))
    items = cast(list[Item | None], await store.abatch([GetOp(chat_ns, key, False) for key in keys])) if keys else []
    found = {
        item.key: _turn(item.key, item.value)
        for item in items
        if item is not None and tuple(item.namespace) == chat_ns and not expired(item.value, now)
    }
    for (holder, _), ids in zip(holders, wanted, strict=True):
        holder["turns"] = [found[key] for key in ids if key in found]


def _turn(key: str, value: dict) -> dict:
    """A chat message as a recalled memory shows it."""
    text = str(value.get("text", ""))
    turn = {
        "id": key,
        "role": value.get("role"),
        "text": text[:RECALLED_TURN_CHARS],
        "created_at": value.get("created_at"),
    }
    if value.get("speaker"):
        turn["speaker"] = value["speaker"]
    if len(text) > RECALLED_TURN_CHARS or value.get("truncated"):
        turn["truncated"] = True
    return turn


def _parts(parts: Sequence[Item] | None) -> dict:
    """A chat message sent in parts comes back once, with `parts`: each of them as `_turn`
    shows a message, in the order they were sent (`store.hybrid.with_parts`)."""
    return {"parts": [_turn(item.key, item.value) for item in parts]} if parts else {}


async def _with_list_turns(
    corpus: MemoryCorpus, query: str, hits: list[SearchItem], similarity: dict, every: int, folded: set[str]
) -> list[SearchItem]:
    """`hits` (as many) with, for a list question naming people, the turns of the other items of
    the list (`MemoryCorpus.list_turns`) after every `every` of them, but those `folded` into a
    message sent in parts that a hit stands for; a turn brought in scores as the hit before it
    (the order stays by score). Adds their similarities to `similarity`."""
    listed = [(item, score) for item, score in await corpus.list_turns(query) if item.key not in folded]
    if not listed:
        return hits
    found = {hit.key: hit for hit in hits}
    for item, score in listed:
        similarity.setdefault(item.key, score)
        found.setdefault(item.key, _scored(cast(Item, item), score))
    merged: list[SearchItem] = []
    for key in aspects.interleaved([hit.key for hit in hits], [item.key for item, _ in listed], every)[: len(hits)]:
        hit = found[key]
        if merged and (hit.score or 0.0) > (merged[-1].score or 0.0):
            hit = _scored(hit, merged[-1].score or 0.0)
        merged.append(hit)
    return merged


def _scored(item: Item, score: float) -> SearchItem:
    """`item` as a SearchItem whose `score` is the fused score."""
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)


async def _record_access(
    store: BaseStore, ranked: list[tuple[SearchItem, float]], config: MemoryConfig, now: datetime
) -> list[tuple[SearchItem, float]]:
    touched, ops = [], []
    for hit, score in ranked:
        value = {
            **hit.value,
            "access_count": int(hit.value.get("access_count", 0)) + 1,
            "last_accessed_at": stamp(now),
        }
        value = with_expiry(value, config, now)
        ops.append(put_op(store, hit.namespace, hit.key, value, False, config))
        hit.value = value
        touched.append((hit, score))
    await store.abatch(ops)
    return touched


async def _list(store: BaseStore, user_id: str, kinds: Sequence[str], limit: int, listing: Listing) -> list[Item]:
    """The user's live memories of `kinds` that match `listing`."""
    return await backend_for(store).list_items([namespace(user_id, k) for k in kinds], times.utc_now(), limit, listing)


def _kinds_for(memory_type: str) -> tuple[str, ...]:
    memory_type = choice(memory_type, (*TEXT_KINDS, "all"), "memory_type")
    return TEXT_KINDS if memory_type == "all" else (memory_type,)


async def keyword_search(
    store: BaseStore,
    user_id: str,
    keywords: list[str],
    memory_type: str = "all",
    limit: int = 10,
) -> list[dict]:
    """Memories whose text contains ANY of the keywords (case-insensitive substring).

    `memory_type`: episodic, semantic, chat, or all (the three). Ranked by how many keywords
    match, then newest first; `score` = matched keywords / keywords, `matched_keywords` lists them.
    """
    kinds = _kinds_for(memory_type)
    keywords = checked_keywords(keywords)
    limit = checked_limit(limit)
    items = await _list(store, user_id, kinds, limit, Listing(keywords=keywords))
    results = []
    for item in items:
        text = haystack(item.value).casefold()
        matched = [k for k in keywords if k.casefold() in text]
        results.append(as_result(item, len(matched) / len(keywords), matched_keywords=matched))
    return results


async def time_filter(
    store: BaseStore,
    user_id: str,
    start_date: str | None = None,
    end_date: str | None = None,
    days_ago: int | None = None,
    limit: int = 10,
    *,
    now: datetime | None = None,
    config: MemoryConfig | None = None,
) -> list[dict]:
    """Episodic and semantic memories created within a time range, newest first.

    Dates are ISO 8601 (see `resolve_time_range`); `score` is the recency factor
    0.5 ** (age_days / MEMORY_HALF_LIFE_DAYS).
    """
    user_label(user_id)
    start, end = resolve_time_range(start_date, end_date, days_ago, now=now)
    limit = checked_limit(limit)
    now = now or times.utc_now()
    items = await _list(store, user_id, MEMORY_KINDS, limit, Listing(start=start, end=end))
    half_life = (config or memory_config()).half_life_days
    return [as_result(item, recency_factor(age_days(item.value, now), half_life)) for item in items]


async def recent_activity(
    store: BaseStore, user_id: str, limit: int = 10, *, now: datetime | None = None, config: MemoryConfig | None = None
) -> list[dict]:
    """The latest created or updated episodic and semantic memories, newest `updated_at` first;
    `score` is the recency factor."""
    limit = checked_limit(limit)
    now = now or times.utc_now()
    items = await _list(store, user_id, MEMORY_KINDS, limit, Listing(order="updated_at"))
    half_life = (config or memory_config()).half_life_days
    return [as_result(item, recency_factor(age_days(item.value, now), half_life)) for item in items]


async def get_profile(store: BaseStore, user_id: str, categories: list[str] | None = None) -> dict:
    """The user's structured profile plus their semantic facts grouped by category.

    Returns `{"fields": {...}, "field_turns": {field: [turn, ...]}, "created_at", "updated_at",
    "facts": {category: [memory, ...]}}`, up to 10 facts per category, most important first
    (`score` = importance), chosen among the 50 most recently written of that category. Facts
    carry `turns` and fields learnt from a conversation their `field_turns`, as `recall` shows
    them (one batched read of the user's chat messages). `categories` limits the categories (None: all).
    """
    profile_ns = namespace(user_id, "profile")
    semantic_ns = namespace(user_id, "semantic")
    if categories is None:
        wanted = list(CATEGORIES)
    elif isinstance(categories, (list, tuple)) and not isinstance(categories, str):
        wanted = [choice(c, CATEGORIES, "category") for c in dict.fromkeys(categories)]
    else:
        raise ValueError(f"categories must be a list of: {', '.join(CATEGORIES)}")
    ops = [GetOp(profile_ns, PROFILE_KEY, False)] + [
        SearchOp(semantic_ns, {"category": c}, PROFILE_FACTS_SCANNED, 0, None, False) for c in wanted
    ]
    results = await store.abatch(ops)
    # abatch answers each op with its own result type: the GetOp an Item, each SearchOp a list.
    profile = cast(Item | None, results[0])
    per_category = cast(list[list[SearchItem]], results[1:])
    now = times.utc_now()
    value = profile.value if profile and not expired(profile.value, now) else {}
    facts = {}
    for category, items in zip(wanted, per_category, strict=True):
        live = [item for item in items if not expired(item.value, now)]
        live.sort(key=_importance_then_recency, reverse=True)
        facts[category] = [
            as_result(item, float(item.value.get("importance", 0))) for item in live[:PROFILE_FACTS_PER_CATEGORY]
        ]
    fields = value.get("fields") or {}
    field_turns = value.get("field_turns") or {}
    sources: dict[str, dict] = {name: {} for name in fields if field_turns.get(name)}
    holders = [(fact, fact.get("turn_ids")) for category in facts.values() for fact in category]
    holders += [(holder, field_turns[name]) for name, holder in sources.items()]
    await _attach_turns(store, user_id, holders, now)
    return {
        "fields": fields,
        "field_turns": {name: holder["turns"] for name, holder in sources.items() if holder["turns"]},
        "created_at": value.get("created_at"),
        "updated_at": value.get("updated_at"),
        "facts": facts,
    }


def _importance_then_recency(item: Item) -> tuple[float, str]:
    return float(item.value.get("importance", 0)), item.value.get("updated_at") or ""
