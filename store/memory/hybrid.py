"""Hybrid memory search: dense candidates (the store's vectors), keyword candidates (BM25 over
`memory_fulltext`, store/sql.py) and, when the query names a date, the memories written then;
fused by `fusion.fuse`, with bonuses for the memories written in the query's time range (a date,
or the days next to an event it names: "the week after the surf lessons") and for those of a
speaker the query names. The vector searches embed the query with the speakers' names
turned into pronouns (store/names.py): the speaker bonus ranks the named person's memories up,
and the name no longer pulls every short message of theirs to the top. On stores without the
SQL adapter (InMemoryStore in unit tests and evals) keyword candidates come from an in-process
BM25 over the user's scanned memories."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from langgraph.store.base import BaseStore, Item, SearchItem

from store.dates import query_window
from store.fusion import distinct_texts, fuse
from store.knowledge.keyword_fallback import bm25_rank
from store.memory.config import TEXT_SEARCH_CONFIG, MemoryConfig
from store.memory.listing import list_items, scan
from store.memory.times import expired, parse_stamp, stamp
from store.names import mentions, named, without_names
from store.sql import adapter_for

NEIGHBOUR_SEEDS = 10  # top hits of each signal whose thread neighbours are fetched
NEIGHBOUR_HITS = 10  # top fused hits that bring their neighbours into the ranking
BM25_K1 = 1.2
BM25_B = 0.75
HYBRID_MIN_POOL = 50  # candidates per signal, at least: fusion needs depth to re-order


async def index_text(store: BaseStore, ns: tuple, key: str, text: str, speaker: str | None = None) -> None:
    """Write the full text of one embedded memory and who said it (Postgres store only; others
    search in process)."""
    adapter = adapter_for(store)
    if adapter is not None:
        await adapter.index_memories(".".join(ns), [(key, text)], TEXT_SEARCH_CONFIG, speaker)


async def unindex_text(store: BaseStore, ns: tuple, key: str) -> None:
    """Delete the full text of one memory (Postgres store only)."""
    adapter = adapter_for(store)
    if adapter is not None:
        await adapter.unindex_memories(".".join(ns), [key])


def _matches(value: dict, wanted: dict) -> bool:
    return all(value.get(name) == expected for name, expected in wanted.items())


async def keyword_candidates(
    store: BaseStore,
    ns: tuple,
    query: str,
    limit: int,
    wanted: dict,
    config: MemoryConfig,
    now: datetime,
) -> list[tuple[Item, float]]:
    """BM25 (item, score) of the namespace's live memories for `query`, best first."""
    adapter = adapter_for(store)
    if adapter is not None:
        return await adapter.memory_keyword_search(
            ".".join(ns),
            query,
            TEXT_SEARCH_CONFIG,
            k1=BM25_K1,
            b=BM25_B,
            limit=limit,
            match=wanted or None,
        )
    items = {
        item.key: item
        for item in await scan(store, ns, config.scan_limit)
        if not expired(item.value, now) and _matches(item.value, wanted)
    }
    ranked = await asyncio.to_thread(
        bm25_rank, query, [(key, item.value.get("text", "")) for key, item in items.items()]
    )
    return [(items[key], score) for key, score in ranked[:limit]]


async def known_speakers(store: BaseStore, ns: tuple, config: MemoryConfig) -> set[str]:
    """Who said the namespace's memories (the `speaker`s they were written with)."""
    adapter = adapter_for(store)
    if adapter is not None:
        return set(await adapter.memory_speakers(".".join(ns)))
    return {
        str(item.value["speaker"]) for item in await scan(store, ns, config.scan_limit) if item.value.get("speaker")
    }


@dataclass
class Signals:
    """What hybrid search fuses: dense hits (cosine similarity), keyword hits (BM25), the keys
    of the memories written in the time range the query names, and the speakers it names."""

    query: str
    dense: list[SearchItem]
    keyword: list[tuple[Item, float]]
    in_range: set[str] = field(default_factory=set)
    speakers: set[str] = field(default_factory=set)
    neighbours: dict[str, list[Item]] = field(default_factory=dict)
    """Key -> the messages of the same thread written just before and after it (top hits)."""


async def thread_neighbours(
    store: BaseStore, ns: tuple, keys: list[str], window: int, config: MemoryConfig
) -> dict[str, list[Item]]:
    """For each of `keys` with a `thread_id`, the `window` messages of its thread written just
    before it and the `window` just after it (by `created_at`): one SQL query on Postgres, a
    scan of the namespace elsewhere."""
    if not keys or window <= 0:
        return {}
    found: dict[str, list[Item]] = {}
    adapter = adapter_for(store)
    if adapter is not None:
        for hit, item in await adapter.memory_neighbours(".".join(ns), keys, window):
            found.setdefault(hit, []).append(item)
        return found
    threads: dict[str, list[Item]] = {}
    for item in await scan(store, ns, config.scan_limit):
        if item.value.get("thread_id"):
            threads.setdefault(str(item.value["thread_id"]), []).append(item)
    position = {}
    for thread in threads.values():
        thread.sort(key=lambda item: str(item.value.get("created_at") or ""))
        position.update({item.key: (thread, index) for index, item in enumerate(thread)})
    for key in keys:
        if key in position:
            thread, index = position[key]
            found[key] = thread[max(index - window, 0) : index] + thread[index + 1 : index + 1 + window]
    return found


async def gather_signals(
    store: BaseStore,
    user_id: str,
    kind: str,
    ns: tuple,
    query: str,
    pool: int,
    wanted: dict,
    config: MemoryConfig,
    now: datetime,
) -> Signals:
    """The three signals, `pool` deep each, live memories only. When the query names a time
    range: on Postgres a second vector search restricted to it (so the memories of that week are
    ordered by their own similarity), on other stores the range's newest memories (listing).
    With a speaker weight, the vector searches embed the query without the speakers it names."""
    window = None
    if config.time_weight:

        async def event_time(event_query: str) -> datetime | None:
            return await _event_time(store, user_id, kind, ns, event_query, pool, wanted, config, now)

        window = await query_window(query, now, event_time)
    speakers = named(query, await known_speakers(store, ns, config)) if config.speaker_weight else set()
    dense_query = without_names(query, speakers)
    dense_task = store.asearch(ns, query=dense_query, filter=wanted or None, limit=pool, refresh_ttl=False)
    keyword_task = keyword_candidates(store, ns, query, pool, wanted, config, now)
    timed_task: Awaitable[Sequence[Item]] | None = None
    if window is not None and adapter_for(store) is not None:
        # stamps are UTC ISO strings of one format, so text comparison orders them by time
        span = {"created_at": {"$gte": stamp(window[0]), "$lt": stamp(window[1])}}
        timed_task = store.asearch(ns, query=dense_query, filter={**wanted, **span}, limit=pool, refresh_ttl=False)
    elif window is not None:
        timed_task = list_items(store, user_id, (kind,), limit=pool, start=window[0], end=window[1])
    found = await asyncio.gather(dense_task, keyword_task, *([timed_task] if timed_task else []))
    dense = cast(list[SearchItem], found[0])
    keyword = cast(list[tuple[Item, float]], found[1])
    timed = [cast(Sequence[Item], found[2])] if len(found) > 2 else []
    signals = Signals(
        query,
        [hit for hit in dense if not expired(hit.value, now)],
        [(item, score) for item, score in keyword if not expired(item.value, now)],
        speakers=speakers,
    )
    if config.neighbour_weight and config.neighbour_turns:
        seeds = [hit.key for hit in signals.dense[:NEIGHBOUR_SEEDS]]
        seeds += [item.key for item, _ in signals.keyword[:NEIGHBOUR_SEEDS]]
        near = await thread_neighbours(store, ns, list(dict.fromkeys(seeds)), config.neighbour_turns, config)
        signals.neighbours = {  # the same filter as the search's (role, category), live ones only
            key: [item for item in items if _matches(item.value, wanted) and not expired(item.value, now)]
            for key, items in near.items()
        }
    if timed:
        in_range = [item for item in timed[0] if not expired(item.value, now) and _matches(item.value, wanted)]
        signals.in_range = {item.key for item in in_range}
        known = {hit.key for hit in signals.dense}
        signals.dense += [hit for hit in in_range if isinstance(hit, SearchItem) and hit.key not in known]
        signals.dense.sort(key=lambda hit: -(hit.score or 0.0))
        signals.keyword += [(item, 0.0) for item in in_range if not isinstance(item, SearchItem)]
    return signals


async def _event_time(
    store: BaseStore,
    user_id: str,
    kind: str,
    ns: tuple,
    event_query: str,
    pool: int,
    wanted: dict,
    config: MemoryConfig,
    now: datetime,
) -> datetime | None:
    """When the event a query names ("the week after the surf lessons") happened: the
    `created_at` of the best memory for `event_query`, the query without its time phrase."""
    found = rank(await gather_signals(store, user_id, kind, ns, event_query, pool, wanted, config, now), config)
    return parse_stamp(found[0][0].value.get("created_at")) if found else None


def rank(signals: Signals, config: MemoryConfig) -> list[tuple[SearchItem, float | None]]:
    """The fused candidates, best first, each text once: (SearchItem whose `score` is the fused
    score, dense cosine similarity or None when only full text or the date found it)."""
    by_key: dict[str, Item] = {item.key: item for item, _ in signals.keyword}
    by_key.update({hit.key: hit for hit in signals.dense})
    similarity = {hit.key: hit.score for hit in signals.dense}
    bonus = {
        key: config.time_weight * (key in signals.in_range)
        + config.speaker_weight * speaker_share(item.value, signals.speakers)
        for key, item in by_key.items()
    }
    fused = fuse(
        [(hit.key, hit.score or 0.0) for hit in signals.dense],
        [(item.key, score) for item, score in signals.keyword if score > 0],
        keyword_weight=config.keyword_weight,
        bonus=bonus,
    )
    fused = [(key, score) for key, score in fused if key in by_key]
    if config.neighbour_weight and signals.neighbours:
        fused = with_neighbours(fused, signals.neighbours, by_key, config.neighbour_weight)
    results = []
    for key, score in distinct_texts(fused, {key: item.value.get("text") for key, item in by_key.items()}):
        item = by_key[key]
        hit = SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)
        results.append((hit, similarity.get(key)))
    return results


def speaker_share(value: dict, speakers: set[str]) -> float:
    """How much of the speaker bonus a memory gets: 1 when the query names its speaker alone; when
    it names several people (what did Maya tell Tom), 1 for a named speaker's message that names
    another of them (one speaking about or to the other) and 0.5 for their other messages."""
    speaker = value.get("speaker")
    if speaker not in speakers:
        return 0.0
    if len(speakers) < 2:
        return 1.0
    return 1.0 if mentions(str(value.get("text") or ""), speakers - {speaker}) else 0.5


def with_neighbours(
    fused: list[tuple[str, float]], neighbours: dict[str, list[Item]], by_key: dict[str, Item], weight: float
) -> list[tuple[str, float]]:
    """`fused` with the thread neighbours of its first NEIGHBOUR_HITS hits ranked in: a
    neighbour scores at least `weight` times its hit's score (a reply whose topic the message
    before it carries is found by that message's words), best first, ties in the fused order."""
    scores = dict(fused)
    for key, score in fused[:NEIGHBOUR_HITS]:
        for item in neighbours.get(key, ()):
            by_key.setdefault(item.key, item)
            if weight * score > scores.get(item.key, float("-inf")):
                scores[item.key] = weight * score
    order = {key: index for index, (key, _) in enumerate(fused)}
    return sorted(scores.items(), key=lambda p: (-p[1], order.get(p[0], len(order)), p[0]))


async def hybrid_search(
    store: BaseStore,
    user_id: str,
    kind: str,
    ns: tuple,
    query: str,
    pool: int,
    wanted: dict,
    config: MemoryConfig,
    now: datetime,
) -> list[tuple[SearchItem, float | None]]:
    """`rank` of `gather_signals`: hybrid candidates, best first, each text once."""
    return rank(await gather_signals(store, user_id, kind, ns, query, pool, wanted, config, now), config)
