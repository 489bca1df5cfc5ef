"""Listings the store's `asearch` filter cannot express: substring keywords, `created_at`
ranges, newest first. On a store built by `store.postgres.store()` they run as one SQL query
(`store.sql.StoreSQL.list_items`); on any other store (InMemoryStore in unit tests and evals) the
fallback here scans the user's namespaces page by page (at most MEMORY_SCAN_LIMIT items per kind)
and filters the same way in Python."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from langgraph.store.base import BaseStore, Item

from store.memory import times
from store.memory.config import SCAN_PAGE, memory_config
from store.memory.times import expired, parse_stamp
from store.memory.validate import namespace
from store.sql import adapter_for


def haystack(value: dict) -> str:
    """The text keyword listings match against: the memory's text and its keywords."""
    return f"{value.get('text', '')} {' '.join(value.get('keywords') or [])}"


async def list_items(
    store: BaseStore,
    user_id: str,
    kinds: Iterable[str],
    *,
    limit: int,
    keywords: list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    order: str = "created_at",
) -> list[Item]:
    """Items of the user's `kinds` matching ANY keyword and the [start, end) range on
    `created_at`, ordered by matched keyword count (when keywords are given), then `order`
    newest first, at most `limit`."""
    namespaces = [namespace(user_id, kind) for kind in kinds]
    adapter = adapter_for(store)
    if adapter is not None:
        now = times.utc_now()
        prefixes = [".".join(ns) for ns in namespaces]
        items = await adapter.list_items(prefixes, limit, keywords, start, end, order)
        return [item for item in items if not expired(item.value, now)]
    config = memory_config()
    now = times.utc_now()
    candidates: list[tuple[int, Item]] = []
    for ns in namespaces:
        for item in await scan(store, ns, config.scan_limit):
            value = item.value
            if expired(value, now):
                continue
            created = parse_stamp(value.get("created_at"))
            if not _within(created, start, end):
                continue
            matched = 0
            if keywords:
                text = haystack(value).casefold()
                matched = sum(k.casefold() in text for k in keywords)
                if not matched:
                    continue
            candidates.append((matched, item))
    oldest = datetime.min.replace(tzinfo=UTC)
    candidates.sort(key=lambda pair: (pair[0], parse_stamp(pair[1].value.get(order)) or oldest), reverse=True)
    return [item for _, item in candidates[:limit]]


def _within(moment: datetime | None, start: datetime | None, end: datetime | None) -> bool:
    if start is None and end is None:
        return True
    if moment is None:
        return False
    return (start is None or moment >= start) and (end is None or moment < end)


async def scan(store: BaseStore, ns: tuple, max_items: int) -> list[Item]:
    """Up to `max_items` items of one namespace, page by page (stores without the SQL adapter)."""
    items: list[Item] = []
    while len(items) < max_items:
        page = await store.asearch(ns, limit=SCAN_PAGE, offset=len(items), refresh_ttl=False)
        items.extend(page)
        if len(page) < SCAN_PAGE:
            break
    return items[:max_items]
