"""Retrieval: dense (the store's vectors), keyword (BM25) and hybrid (score-normalised weighted
fusion, plus a bonus for chunks of documents dated in the time range the query names). Every
strategy returns each chunk text once (a KB of chat logs or boilerplate repeats texts). Vector
searches embed the query without the names most chunks hold (`common_names`, store/names.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from langgraph.store.base import BaseStore, GetOp, Item

from store.dates import query_window, stamp
from store.fusion import distinct_texts, fuse
from store.knowledge.config import (
    BM25_B,
    BM25_K1,
    COMMON_NAME_SHARE,
    MAX_TOP_K,
    RRF_K,
    STRATEGIES,
    knowledge_config,
)
from store.knowledge.keyword_fallback import bm25_rank, tokenize
from store.knowledge.registry import chunk_namespace, get_kb, search_all
from store.names import capitalised_words, mentions, without_names
from store.sql import adapter_for

T = TypeVar("T")
IN_PROCESS_DATED_SCAN = 10_000  # chunks scanned for a date range on stores without SQL (tests, evals)


@dataclass(frozen=True)
class Hit:
    id: str
    value: dict
    score: float


def _check_query(query: str, top_k: int, strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}.")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise ValueError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}.")
    return query.strip()


async def _dense_hits(
    store: BaseStore, kb: str, query: str, limit: int, span: tuple[datetime, datetime] | None = None
) -> list[Hit]:
    """Vector hits, best first; with `span` only chunks of documents dated in [start, end)
    (stamps are UTC ISO strings of one format, so text comparison orders them by time)."""
    if span is None:
        items = await store.asearch(chunk_namespace(kb), query=query, limit=limit)
    elif adapter_for(store) is not None:
        dated = {"date": {"$gte": stamp(span[0]), "$lt": stamp(span[1])}}
        items = await store.asearch(chunk_namespace(kb), query=query, filter=dated, limit=limit)
    else:  # InMemoryStore compares range filters as numbers: filter the dated chunks here
        start, end = stamp(span[0]), stamp(span[1])
        items = [
            item
            for item in await store.asearch(chunk_namespace(kb), query=query, limit=IN_PROCESS_DATED_SCAN)
            if start <= str(item.value.get("date") or "") < end
        ][:limit]
    return [Hit(item.key, dict(item.value), float(item.score or 0.0)) for item in items if item.score is not None]


def per_document(ranked: Sequence[T], source: Callable[[T], str]) -> list[T]:
    """`ranked` with each document's best chunk first, in order, then the other chunks in order:
    documents compete, not chunks (the chunks of one long document cannot crowd out the others)."""
    seen: set[str] = set()
    first: list[T] = []
    rest: list[T] = []
    for item in ranked:
        key = source(item)
        (rest if key in seen else first).append(item)
        seen.add(key)
    return first + rest


def _distinct(hits: list[Hit], top_k: int) -> list[Hit]:
    """The first `top_k` hits with each chunk text once, one chunk per document before any second."""
    by_id = {hit.id: hit for hit in hits}
    kept = distinct_texts([(hit.id, hit.score) for hit in hits], {hit.id: hit.value["content"] for hit in hits})
    return per_document([by_id[doc_id] for doc_id, _ in kept], lambda hit: hit.value["source"])[:top_k]


async def _keyword_hits(store: BaseStore, kb: str, entry: dict, query: str, limit: int) -> list[Hit]:
    adapter = adapter_for(store)
    if adapter is None:
        return await _fallback_keyword_hits(store, kb, query, limit)
    chunks = max(int(entry.get("chunks") or 0), 1)
    ranked = await adapter.kb_keyword_search(
        kb,
        query,
        knowledge_config().text_search_config,
        n=chunks,
        avgdl=max(float(entry.get("characters") or 0) / chunks, 1.0),
        k1=BM25_K1,
        b=BM25_B,
        limit=limit,
    )
    namespace = chunk_namespace(kb)
    items = cast(list[Item | None], await store.abatch([GetOp(namespace, key, False) for key, _ in ranked]))
    return [
        Hit(key, dict(item.value), score) for (key, score), item in zip(ranked, items, strict=True) if item is not None
    ]


async def _fallback_keyword_hits(store: BaseStore, kb: str, query: str, limit: int) -> list[Hit]:
    """In-process BM25 over every chunk of `kb` (stores without the SQL adapter)."""
    items = {item.key: item.value for item in await search_all(store, chunk_namespace(kb))}
    ranked = await asyncio.to_thread(bm25_rank, query, [(key, value["content"]) for key, value in items.items()])
    return [Hit(key, dict(items[key]), score) for key, score in ranked[:limit]]


async def common_names(store: BaseStore, kb: str, entry: dict, query: str) -> set[str]:
    """The capitalised words of `query` (past its first) that at least COMMON_NAME_SHARE of
    `kb`'s chunks hold: the people of a chat log, a product in its own manual. They tell the
    chunks apart no better than "the" does, yet pull a query vector towards every chunk holding
    them, so vector searches leave them out (full-text search weighs them by their rarity)."""
    words = capitalised_words(query)
    chunks = int(entry.get("chunks") or 0)
    if not words or not chunks:
        return set()
    adapter = adapter_for(store)
    if adapter is not None:
        frequencies = await adapter.kb_document_frequencies(kb, sorted(words), knowledge_config().text_search_config)
    else:
        texts = [set(tokenize(item.value["content"])) for item in await search_all(store, chunk_namespace(kb))]
        frequencies = {word: sum(word.lower() in tokens for tokens in texts) for word in words}
    return {word for word, count in frequencies.items() if count >= COMMON_NAME_SHARE * chunks}


async def _vector_query(store: BaseStore, kb: str, entry: dict, query: str) -> str:
    """The query the vector searches embed: `query` without its `common_names`."""
    return without_names(query, await common_names(store, kb, entry, query))


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Fuse ranked id lists: score(d) = sum over lists of 1 / (k + rank of d), ranks from 1. Best first."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, 1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def _candidate_depth(top_k: int) -> int:
    return min(100, max(4 * top_k, 40))


def _locator(value: dict) -> str:
    parts = [value["source"]]
    if value.get("page"):
        parts.append(f"page {value['page']}")
    if value.get("section"):
        parts.append(f"section {value['section']}")
    return ", ".join(parts)


def _result(kb: str, query: str, strategy: str, hits: list[tuple[Hit, dict[str, int | None]]]) -> dict:
    """The retrieve-only contract: {"context", "retrieval_results", "reference"} (+ kb, query, strategy)."""
    results, reference, passages = [], [], []
    for index, (hit, ranks) in enumerate(hits, 1):
        value = hit.value
        common = {
            "index": index,
            "id": hit.id,
            "source": value["source"],
            "title": value.get("title"),
            "position": value.get("position"),
            "page": value.get("page"),
            "section": value.get("section"),
            "date": value.get("date"),
        }
        results.append(
            {
                **common,
                "content": value["content"],
                "score": round(hit.score, 6),
                "strategy": strategy,
                "rank": index,
                "ranks": ranks,
            }
        )
        reference.append(common)
        passages.append(f"[{index}] {value.get('title') or value['source']} ({_locator(value)})\n{value['content']}")
    return {
        "kb": kb,
        "query": query,
        "strategy": strategy,
        "context": "\n\n".join(passages),
        "retrieval_results": results,
        "reference": reference,
    }


async def dense_search(store: BaseStore, kb: str, query: str, top_k: int = 5) -> dict:
    """Vector search (the store's semantic index, cosine similarity) over `kb`'s chunks."""
    query = _check_query(query, top_k, "dense")
    entry = await get_kb(store, kb)
    vector_query = await _vector_query(store, kb, entry, query)
    hits = _distinct(await _dense_hits(store, kb, vector_query, _candidate_depth(top_k)), top_k)
    return _result(kb, query, "dense", [(hit, {"dense": rank}) for rank, hit in enumerate(hits, 1)])


async def keyword_search(store: BaseStore, kb: str, query: str, top_k: int = 5) -> dict:
    """BM25 keyword search over `kb`'s chunks (Postgres full-text on a Postgres store)."""
    query = _check_query(query, top_k, "keyword")
    entry = await get_kb(store, kb)
    hits = _distinct(await _keyword_hits(store, kb, entry, query, _candidate_depth(top_k)), top_k)
    return _result(kb, query, "keyword", [(hit, {"keyword": rank}) for rank, hit in enumerate(hits, 1)])


@dataclass
class Signals:
    """What hybrid search fuses: dense and keyword hits, the hits among the chunks of documents
    dated in the time range the query names (empty when it names none), and the query's
    `common_names`."""

    dense: list[Hit]
    keyword: list[Hit]
    in_range: list[Hit]
    names: set[str] = field(default_factory=set)


async def gather_signals(
    store: BaseStore, kb: str, entry: dict, query: str, depth: int, now: datetime, time_weight: float
) -> Signals:
    """The dense and keyword candidates, `depth` deep; when the query names a time range
    (`store.dates.query_window`: a date relative to `now`, or the days next to an event it names)
    and `time_weight` is on, the dated chunks in it too, by their own similarity (merged into the
    dense list). Vector searches leave out the query's `common_names`."""
    window = None
    if time_weight:

        async def event_time(event_query: str) -> datetime | None:
            return await _event_time(store, kb, entry, event_query, depth, now, time_weight)

        window = await query_window(query, now, event_time)
    names = await common_names(store, kb, entry, query)
    vector_query = without_names(query, names)
    searches = [_dense_hits(store, kb, vector_query, depth), _keyword_hits(store, kb, entry, query, depth)]
    if window is not None:
        searches.append(_dense_hits(store, kb, vector_query, depth, span=window))
    dense, keyword, *dated = await asyncio.gather(*searches)
    in_range = dated[0] if dated else []
    known = {hit.id for hit in dense}
    dense = sorted([*dense, *(hit for hit in in_range if hit.id not in known)], key=lambda hit: -hit.score)
    return Signals(dense, keyword, in_range, names)


async def _event_time(
    store: BaseStore, kb: str, entry: dict, event_query: str, depth: int, now: datetime, time_weight: float
) -> datetime | None:
    """When the event a query names ("the week after the surf lessons") happened: the `date` of
    the best chunk's document for `event_query`, the query without its time phrase (None when
    that chunk is undated)."""
    config = knowledge_config()
    signals = await gather_signals(store, kb, entry, event_query, depth, now, time_weight)
    found = rank(signals, config.hybrid_keyword_weight, time_weight, config.name_weight)
    dated = found[0][0].value.get("date") if found else None
    return datetime.fromisoformat(dated) if dated else None


def rank(
    signals: Signals, keyword_weight: float, time_weight: float, name_weight: float = 0.0
) -> list[tuple[Hit, dict[str, int | None]]]:
    """The fused candidates, best first, each text once: (Hit whose score is the fused score,
    its ranks in the dense and keyword lists). Chunks dated in the query's time range get
    `time_weight` more, chunks holding one of its common names `name_weight` more."""
    by_id = {hit.id: hit for hit in (*signals.keyword, *signals.dense)}
    in_range = {hit.id for hit in signals.in_range}
    dense_rank = {hit.id: position for position, hit in enumerate(signals.dense, 1)}
    keyword_rank = {hit.id: position for position, hit in enumerate(signals.keyword, 1)}
    fused = fuse(
        [(h.id, h.score) for h in signals.dense],
        [(h.id, h.score) for h in signals.keyword],
        keyword_weight=keyword_weight,
        bonus={
            doc_id: time_weight * (doc_id in in_range) + name_weight * mentions(hit.value["content"], signals.names)
            for doc_id, hit in by_id.items()
        },
        keyword_method="given",
    )
    fused = distinct_texts(fused, {doc_id: hit.value["content"] for doc_id, hit in by_id.items()})
    return [
        (
            Hit(doc_id, by_id[doc_id].value, score),
            {"dense": dense_rank.get(doc_id), "keyword": keyword_rank.get(doc_id)},
        )
        for doc_id, score in fused
    ]


async def hybrid_search(
    store: BaseStore,
    kb: str,
    query: str,
    top_k: int = 5,
    *,
    keyword_weight: float | None = None,
    now: datetime | None = None,
) -> dict:
    """Dense and keyword candidates fused by `store.fusion.fuse` (score-normalised weighted sum;
    `keyword_weight` default KB_HYBRID_KEYWORD_WEIGHT); score is the fused score. When the query
    names a time range (relative to `now`), the chunks of documents dated in it are searched too
    and get KB_TIME_WEIGHT more; chunks holding a name of the query that many chunks hold
    (`common_names`: the person a chat-log question asks about) get KB_NAME_WEIGHT more."""
    query = _check_query(query, top_k, "hybrid")
    entry = await get_kb(store, kb)
    config = knowledge_config()
    weight = config.hybrid_keyword_weight if keyword_weight is None else keyword_weight
    signals = await gather_signals(
        store, kb, entry, query, _candidate_depth(top_k), now or datetime.now(UTC), config.time_weight
    )
    ranked = per_document(rank(signals, weight, config.time_weight, config.name_weight), lambda p: p[0].value["source"])
    return _result(kb, query, "hybrid", ranked[:top_k])


SEARCHES = {"dense": dense_search, "keyword": keyword_search, "hybrid": hybrid_search}


async def retrieve(
    store: BaseStore,
    kb: str,
    query: str,
    *,
    strategy: str = "hybrid",
    top_k: int = 5,
    reader: str | None = None,
) -> dict[str, Any]:
    """Search `kb` with one strategy ("dense", "keyword", "hybrid", "graph" or "fusion") and return the retrieve-only
    contract {"context", "retrieval_results", "reference"} (plus "kb", "query", "strategy"), for
    the user `reader` (their own and the shared knowledge bases; None: any, see `readable_by`).

    Raises ValueError for an empty query, top_k outside 1..50 or an unknown strategy, and
    KBUnknownError (a ValueError listing the knowledge bases `reader` may read) for a kb that
    does not exist or that `reader` may not read.
    """
    _check_query(query, top_k, strategy)
    if reader is not None:
        await get_kb(store, kb, reader=reader)
    return await SEARCHES[strategy](store, kb, query, top_k)
