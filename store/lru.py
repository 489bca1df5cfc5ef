"""`LRU`: the one bounded cache of the project's process-local state (a mapping that forgets its
least recently used entries beyond `limit`). A module that keeps state across calls keeps it in
one of these, with a docstring saying what it caches and why the bound is enough."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `limit` entries; reading or writing one makes it the most recent."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"an LRU holds at least one entry, got limit={limit}")
        self.limit = limit
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key: K, value: V) -> V:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)
        return value

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[K, V]]:
        return list(self._items.items())

    def clear(self) -> None:
        self._items.clear()
