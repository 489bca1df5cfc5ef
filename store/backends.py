"""The two implementations of the backend seam (store/backend.py): `InProcessBackend` (scans and
in-process BM25, for stores without SQL) and `SQLBackend` (store/sql/'s statements on a pool).
Each carries its graph part (`graph`, store/graph_part.py). See store/backend.py for which store
gets which."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from langgraph.store.base import BaseStore, GetOp, Item, PutOp, SearchItem

from store.bm25 import bm25_rank, tokenize
from store.dates import expired, parse_stamp, stamp
from store.graph_part import GraphPart, MemoryGraph
from store.index import require_index
from store.sql import MEMORY_TEXT_SEARCH_CONFIG, StoreSQL
from store.sql.base import Change
from store.sql.graph import PostgresGraph

PAGE = 500
DATED_SCAN = 10_000  # items scanned for a date range in process
Scored = tuple[Item, float]
Span = tuple[datetime, datetime] | None  # [start, end) of a date range


@dataclass(frozen=True)
class Listing:
    """What a listing keeps and how it orders: items whose text or keywords contain ANY of
    `keywords` (case-insensitive) and whose value's `created_at` is in [start, end); ordered by
    matched keyword count, then the value's `order` timestamp (`created_at` or `updated_at`)
    newest first."""

    keywords: Sequence[str] | None = None
    start: datetime | None = None
    end: datetime | None = None
    order: str = "created_at"


def haystack(value: dict) -> str:
    """The text keyword listings match against: the memory's text and its keywords."""
    return f"{value.get('text', '')} {' '.join(value.get('keywords') or [])}"


def best_first(items: list[SearchItem]) -> list[SearchItem]:
    """Vector hits best first, equal scores (the same words stored twice) by key: the store
    returns ties in any order (a parallel sort in Postgres), keys in the same order whenever the
    same data is loaded (memory ids sort as written, store/memory/write.py; a chunk's id follows
    from its document and place)."""
    return sorted(items, key=lambda item: (-(item.score or 0.0), item.key))


class InProcessBackend:
    """The backend of stores without SQL: scans and in-process BM25."""

    sql: StoreSQL | None = None  # the SQL adapter (store/sql/) of a backend that has one

    def __init__(self, store: BaseStore, scan_limit: int = 5000) -> None:
        self.store = store
        self.scan_limit = scan_limit
        self.graph: GraphPart = MemoryGraph()  # the knowledge graph's part (store/graph_part.py)

    async def scan(self, ns: tuple[str, ...], limit: float = float("inf")) -> list[Item]:
        """Up to `limit` items of one namespace (default: all), page by page."""
        items: list[Item] = []
        while len(items) < limit:
            page = await self.store.asearch(ns, limit=PAGE, offset=len(items), refresh_ttl=False)
            items.extend(page)
            if len(page) < PAGE:
                break
        return items if limit == float("inf") else items[: int(limit)]

    async def vector_search(
        self, ns: tuple[str, ...], query: str, limit: int, wanted: dict, date_field: str, span: Span = None
    ) -> list[SearchItem]:
        """The store's vector search for values containing `wanted`, best first; with `span`,
        only values whose `date_field` is in [start, end) (InMemoryStore compares range filters
        as numbers, so the dated values are filtered here). A store without a vector index raises
        `NoVectorIndex` (its search would return items unscored, by recency)."""
        require_index(self.store)
        if span is None:
            return best_first(
                await self.store.asearch(ns, query=query, filter=wanted or None, limit=limit, refresh_ttl=False)
            )
        start, end = stamp(span[0]), stamp(span[1])
        found = await self.store.asearch(ns, query=query, filter=wanted or None, limit=DATED_SCAN, refresh_ttl=False)
        return best_first([item for item in found if start <= str(item.value.get(date_field) or "") < end])[:limit]

    async def insert_if_absent(self, ns: tuple[str, ...], key: str, value: dict) -> bool:
        """Put an item (not indexed) only when `ns`/`key` holds none; of concurrent calls for one
        key exactly one returns True."""
        async with _lock():
            if await self.store.aget(ns, key) is not None:
                return False
            await self.store.aput(ns, key, value, index=False)
            return True

    async def update_items(
        self, ns: tuple[str, ...], keys: Sequence[str], change: Change, ttl_minutes: float | None = None
    ) -> dict[str, dict]:
        """Read-modify-write of items of `ns` (not indexed) that concurrent updates of the same
        items never undo: `change(key, live value or None)` gives each key's new value (None:
        leave it; an exception writes nothing); returns the written values by key. `ttl_minutes`:
        the rows' TTL (None: the store's default). In process: under one lock per event loop, the
        values read by a listing of `ns` (a get would leave an in-memory store the namespace)."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        async with _lock():
            current = {item.key: item.value for item in await self.scan(ns) if tuple(item.namespace) == ns}
            written = {key: value for key in wanted if (value := change(key, current.get(key))) is not None}
            ttl = {} if ttl_minutes is None else {"ttl": ttl_minutes}  # none given: the store's default
            for key, value in written.items():
                await self.store.aput(ns, key, value, index=False, **ttl)
            return written

    async def delete_under(self, prefix: tuple[str, ...]) -> int:
        """Delete every item in the namespace `prefix` and below it; returns how many."""
        deleted = 0
        for ns in await self.store.alist_namespaces(prefix=prefix, limit=1000):
            while items := await self.store.asearch(ns, limit=PAGE, refresh_ttl=False):
                await self.store.abatch([PutOp(item.namespace, item.key, None) for item in items])
                deleted += len(items)
        return deleted

    # --- memories ----------------------------------------------------------------------------

    async def index_memory(self, ns: tuple[str, ...], key: str, text: str, speaker: str | None = None) -> None:
        """Write the full text of one memory and who said it (nothing to do in process)."""

    async def unindex_memory(self, ns: tuple[str, ...], key: str) -> None:
        """Delete the full text of one memory (nothing to do in process)."""

    async def memory_keyword(
        self, ns: tuple[str, ...], query: str, limit: int, wanted: dict, now: datetime
    ) -> list[Scored]:
        """BM25 (item, score) of the namespace's memories live at `now` whose values contain `wanted`."""
        items = {
            item.key: item
            for item in await self.scan(ns, self.scan_limit)
            if _matches(item.value, wanted) and not expired(item.value, now)
        }
        texts = [(key, item.value.get("text", "")) for key, item in items.items()]
        return [(items[key], score) for key, score in (await asyncio.to_thread(bm25_rank, query, texts))[:limit]]

    async def memory_holds(self, ns: tuple[str, ...], words: Sequence[str], now: datetime) -> set[str]:
        """The `words` a memory of the namespace live at `now` holds as a word of its own (one of
        their tokens; a stopword is held by none)."""
        held: set[str] = set()
        for item in await self.scan(ns, self.scan_limit):
            if not expired(item.value, now):
                held.update(tokenize(str(item.value.get("text", ""))))
        return {word for word in words if set(tokenize(word)) & held}

    async def speakers(self, ns: tuple[str, ...]) -> set[str]:
        """Who said the namespace's memories (the `speaker`s they were written with)."""
        return {
            str(item.value["speaker"]) for item in await self.scan(ns, self.scan_limit) if item.value.get("speaker")
        }

    async def neighbours(self, ns: tuple[str, ...], keys: Sequence[str], window: int) -> dict[str, list[Item]]:
        """For each of `keys` with a `thread_id`, the `window` items of its thread written just
        before it and the `window` just after it (by `created_at`)."""
        return _adjacent(
            await self.scan(ns, self.scan_limit),
            keys,
            window,
            lambda value: str(value["thread_id"]) if value.get("thread_id") else None,
            lambda value: str(value.get("created_at") or ""),
        )

    async def thread_last(self, ns: tuple[str, ...], thread_id: str, before: str) -> Item | None:
        """The live item of thread `thread_id` written last before the stamp `before` (by
        `created_at`), or None: the message a new one follows."""
        earlier = [
            item
            for item in await self.scan(ns, self.scan_limit)
            if str(item.value.get("thread_id") or "") == thread_id
            and str(item.value.get("created_at") or "") < before
            and not expired(item.value, parse_stamp(before) or datetime.now(UTC))
        ]
        return max(earlier, key=lambda item: (str(item.value.get("created_at") or ""), item.key), default=None)

    async def list_items(
        self, namespaces: Sequence[tuple[str, ...]], now: datetime, limit: int, listing: Listing
    ) -> list[Item]:
        """Items of `namespaces` live at `now` that match `listing`, at most `limit`."""
        keywords, start, end = listing.keywords, listing.start, listing.end
        candidates: list[tuple[int, Item]] = []
        for ns in namespaces:
            for item in await self.scan(ns, self.scan_limit):
                created = parse_stamp(item.value.get("created_at"))
                if expired(item.value, now) or not _within(created, start, end):
                    continue
                text = haystack(item.value).casefold()
                matched = sum(k.casefold() in text for k in keywords or ())
                if keywords and not matched:
                    continue
                candidates.append((matched, item))
        oldest = datetime.min.replace(tzinfo=UTC)
        order = listing.order
        candidates.sort(key=lambda pair: (pair[0], parse_stamp(pair[1].value.get(order)) or oldest), reverse=True)
        return [item for _, item in candidates[:limit]]

    # --- knowledge bases ---------------------------------------------------------------------

    async def index_kb_chunks(self, kb: str, chunks: Iterable[tuple[str, str]]) -> None:
        """Write the full text of (chunk key, content) pairs (nothing to do in process)."""

    async def unindex_kb_chunks(self, kb: str, keys: Sequence[str] | None = None) -> None:
        """Delete the full text of these chunks (None: all of `kb`'s; nothing to do in process)."""

    async def kb_keyword(self, ns: tuple[str, ...], kb: str, entry: dict, query: str, limit: int) -> list[Scored]:
        """BM25 (chunk item, score) of knowledge base `kb` (chunks in `ns`, registry `entry`)."""
        items = {item.key: item for item in await self.scan(ns)}
        texts = [(key, item.value["content"]) for key, item in items.items()]
        return [(items[key], score) for key, score in (await asyncio.to_thread(bm25_rank, query, texts))[:limit]]

    async def kb_neighbours(self, ns: tuple[str, ...], keys: Sequence[str], window: int) -> dict[str, list[Item]]:
        """For each chunk of `keys` (in `ns`), the `window` chunks just before it and the `window`
        just after it in the order (document date, source, position); an undated chunk's
        neighbours are of its own document only."""
        return _adjacent(
            await self.scan(ns),
            keys,
            window,
            lambda value: "" if value.get("date") else f"source:{value.get('source')}",
            lambda value: (str(value.get("date") or ""), str(value.get("source")), int(value.get("position") or 0)),
        )

    async def kb_document_frequencies(self, ns: tuple[str, ...], kb: str, words: Sequence[str]) -> dict[str, int]:
        """How many chunks of `kb` hold each word."""
        texts = [set(tokenize(item.value["content"])) for item in await self.scan(ns)]
        return {word: sum(word.lower() in tokens for tokens in texts) for word in words}


def _phrased_here(index: dict, wanted: dict) -> bool:
    """Whether store/sql/'s vector search (VECTOR_SEARCH_SQL) answers a search of an index so
    configured for values containing `wanted`: the package's index (cosine distance on `vector`
    columns, as store/index.py sets it) and plain values to match. Else the library's search does."""
    vector_type = (index.get("ann_index_config") or {}).get("vector_type", "vector")
    plain = all(isinstance(value, (str, int, float, bool)) for value in wanted.values())
    return index.get("distance_type", "cosine") == "cosine" and vector_type == "vector" and plain


class SQLBackend(InProcessBackend):
    """The backend of the Postgres store: store/sql/'s statements (`sql`) on its pool."""

    def __init__(self, store: BaseStore, sql: StoreSQL, text_search_config: str) -> None:
        super().__init__(store)
        self.sql: StoreSQL = sql
        self.text_search_config = text_search_config
        self.graph: PostgresGraph = PostgresGraph(sql.pool)  # the kb_graph_* tables (store/sql/graph.py)

    async def vector_search(
        self, ns: tuple[str, ...], query: str, limit: int, wanted: dict, date_field: str, span: Span = None
    ) -> list[SearchItem]:
        if not getattr(self.store, "index_config", True):
            # a server's own store gets its index when the package's pool is prepared
            # (store/server_store.py): after a start with Postgres down, the first use does it
            async with self.sql.pool.connection():
                pass
        require_index(self.store)
        index = cast(dict, getattr(self.store, "index_config", None) or {})
        if _phrased_here(index, wanted):
            # the store's own embedder (its query vectors cached, store/embeddings.py), our statement
            vector = await cast(Any, self.store).embeddings.aembed_query(query)
            dated = (date_field, stamp(span[0]), stamp(span[1])) if span is not None else None
            # as many vectors as the library's search reads: 2 per item wanted for each field embedded
            vectors = 2 * limit * len(index.get("fields") or ["$"]) + 1
            return await self.sql.vector_search(
                ".".join(ns), vector, limit=limit, vectors=vectors, match=wanted, span=dated
            )
        if span is not None:  # stamps are UTC ISO strings of one format: text order is time order
            wanted = {**wanted, date_field: {"$gte": stamp(span[0]), "$lt": stamp(span[1])}}
        return best_first(
            await self.store.asearch(ns, query=query, filter=wanted or None, limit=limit, refresh_ttl=False)
        )

    async def scan(self, ns: tuple[str, ...], limit: float = float("inf")) -> list[Item]:
        # one statement in a stable order (the store's search pages lose rows that tie)
        return await self.sql.scan_items(ns, None if limit == float("inf") else int(limit))

    async def insert_if_absent(self, ns: tuple[str, ...], key: str, value: dict) -> bool:
        return await self.sql.insert_if_absent(ns, key, value)

    async def update_items(
        self, ns: tuple[str, ...], keys: Sequence[str], change: Change, ttl_minutes: float | None = None
    ) -> dict[str, dict]:
        # on the pool's connection (a get and a put through the store would take a second one
        # while holding the lock), the store's default TTL as its `put` gives it
        if ttl_minutes is None:
            ttl_minutes = (getattr(self.store, "ttl_config", None) or {}).get("default_ttl")
        return await self.sql.update_items(ns, keys, change, ttl_minutes)

    async def delete_under(self, prefix: tuple[str, ...]) -> int:
        return await self.sql.delete_under(prefix)

    async def index_memory(self, ns: tuple[str, ...], key: str, text: str, speaker: str | None = None) -> None:
        await self.sql.index_memories(".".join(ns), [(key, text)], MEMORY_TEXT_SEARCH_CONFIG, speaker)

    async def unindex_memory(self, ns: tuple[str, ...], key: str) -> None:
        await self.sql.unindex_memories(".".join(ns), [key])

    async def memory_keyword(
        self, ns: tuple[str, ...], query: str, limit: int, wanted: dict, now: datetime
    ) -> list[Scored]:
        prefix, config = ".".join(ns), MEMORY_TEXT_SEARCH_CONFIG
        return await self.sql.memory_keyword_search(prefix, query, config, limit=limit, match=wanted or None)

    async def memory_holds(self, ns: tuple[str, ...], words: Sequence[str], now: datetime) -> set[str]:
        return await self.sql.memory_holds(".".join(ns), words, MEMORY_TEXT_SEARCH_CONFIG)

    async def speakers(self, ns: tuple[str, ...]) -> set[str]:
        return set(await self.sql.memory_speakers(".".join(ns)))

    async def neighbours(self, ns: tuple[str, ...], keys: Sequence[str], window: int) -> dict[str, list[Item]]:
        found: dict[str, list[Item]] = {}
        for hit, item in await self.sql.memory_neighbours(".".join(ns), keys, window):
            found.setdefault(hit, []).append(item)
        return found

    async def thread_last(self, ns: tuple[str, ...], thread_id: str, before: str) -> Item | None:
        return await self.sql.memory_thread_last(".".join(ns), thread_id, before)

    async def list_items(
        self, namespaces: Sequence[tuple[str, ...]], now: datetime, limit: int, listing: Listing
    ) -> list[Item]:
        prefixes = [".".join(ns) for ns in namespaces]
        items = await self.sql.list_items(prefixes, limit, listing.keywords, listing.start, listing.end, listing.order)
        return [item for item in items if not expired(item.value, now)]

    async def index_kb_chunks(self, kb: str, chunks: Iterable[tuple[str, str]]) -> None:
        await self.sql.index_kb_chunks(kb, chunks, self.text_search_config)

    async def unindex_kb_chunks(self, kb: str, keys: Sequence[str] | None = None) -> None:
        await self.sql.unindex_kb_chunks(kb, keys)

    async def kb_keyword(self, ns: tuple[str, ...], kb: str, entry: dict, query: str, limit: int) -> list[Scored]:
        chunks = max(int(entry.get("chunks") or 0), 1)
        avgdl = max(float(entry.get("characters") or 0) / chunks, 1.0)
        ranked = await self.sql.kb_keyword_search(
            kb, query, self.text_search_config, n=chunks, avgdl=avgdl, limit=limit
        )
        items = cast(list[Item | None], await self.store.abatch([GetOp(ns, key, False) for key, _ in ranked]))
        return [(item, score) for (_, score), item in zip(ranked, items, strict=True) if item is not None]

    async def kb_document_frequencies(self, ns: tuple[str, ...], kb: str, words: Sequence[str]) -> dict[str, int]:
        return await self.sql.kb_document_frequencies(kb, words, self.text_search_config)

    async def kb_neighbours(self, ns: tuple[str, ...], keys: Sequence[str], window: int) -> dict[str, list[Item]]:
        found: dict[str, list[Item]] = {}
        for hit, item in await self.sql.kb_neighbours(".".join(ns), keys, window):
            found.setdefault(hit, []).append(item)
        return found


# Atomic inserts and updates in process (unit tests, scripts): one lock per event loop.
_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def _adjacent(
    items: Sequence[Item],
    keys: Sequence[str],
    window: int,
    group: Callable[[dict], str | None],
    order: Callable[[dict], Any],
) -> dict[str, list[Item]]:
    """For each of `keys`, the `window` items before it and the `window` after it among the
    items of its `group` (None: in none) sorted by `order`."""
    groups: dict[str, list[Item]] = {}
    for item in items:
        name = group(item.value)
        if name is not None:
            groups.setdefault(name, []).append(item)
    position = {}
    for members in groups.values():
        members.sort(key=lambda item: order(item.value))
        position.update({item.key: (members, index) for index, item in enumerate(members)})
    found = {}
    for key in keys:
        if key in position:
            members, index = position[key]
            found[key] = members[max(index - window, 0) : index] + members[index + 1 : index + 1 + window]
    return found


def _lock() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    if loop not in _LOCKS:
        _LOCKS[loop] = asyncio.Lock()
    return _LOCKS[loop]


def _matches(value: dict, wanted: dict) -> bool:
    return all(value.get(name) == expected for name, expected in wanted.items())


def _within(moment: datetime | None, start: datetime | None, end: datetime | None) -> bool:
    if start is None and end is None:
        return True
    return moment is not None and (start is None or moment >= start) and (end is None or moment < end)
