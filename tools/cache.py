"""A small in-process TTL cache with LRU eviction, shared by the web tools.

Operations never await, so they are atomic for asyncio tasks; a lock also makes them safe
across threads. An entry is *fresh* for `ttl` seconds and then *stale* for `stale_ttl` more
seconds (kept so a caller can revalidate it, e.g. with an ETag), after which it is dropped.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

V = TypeVar("V")


def cache_scope(runtime: Any) -> str:
    """The part of a web cache key that keeps users apart: the user a run acts for ("" outside
    runs). A cache shared across users would tell one user, by a hit and its speed, what another
    searched for or read."""
    if runtime is None:
        return ""
    from tools.identity import run_user_id

    return run_user_id(runtime)


@dataclass(frozen=True)
class CacheHit(Generic[V]):
    value: V
    fresh: bool


@dataclass(frozen=True)
class _Entry(Generic[V]):
    value: V
    fresh_until: float
    expires_at: float


class TTLCache(Generic[V]):
    """Maps keys to values for a limited time; the least recently used entry goes first when full."""

    def __init__(self, max_entries: int = 256, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: OrderedDict[Hashable, _Entry[V]] = OrderedDict()
        self._max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()

    def lookup(self, key: Hashable) -> CacheHit[V] | None:
        """The entry for `key`, fresh or stale, or None once it has expired."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if now >= entry.expires_at:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return CacheHit(entry.value, fresh=now < entry.fresh_until)

    def get(self, key: Hashable) -> V | None:
        """The value for `key` while it is fresh, else None."""
        hit = self.lookup(key)
        return hit.value if hit is not None and hit.fresh else None

    def set(self, key: Hashable, value: V, *, ttl: float, stale_ttl: float = 0.0) -> None:
        """Store `value`: fresh for `ttl` seconds, then kept stale for `stale_ttl` seconds."""
        now = self._clock()
        with self._lock:
            self._entries[key] = _Entry(value, now + ttl, now + ttl + stale_ttl)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def resize(self, max_entries: int) -> None:
        """Hold at most `max_entries` from now on (the least recently used go first)."""
        with self._lock:
            self._max_entries = max_entries
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def values(self) -> list[V]:
        """The values not yet expired."""
        now = self._clock()
        with self._lock:
            return [entry.value for entry in self._entries.values() if now < entry.expires_at]

    def delete(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
