"""Memory ids sort as the memories were written, so rankings that break ties by id order the
same conversation's ties the same way however often it is recorded."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import cast

from langgraph.store.base import BaseStore, SearchItem

from store import memory
from store.backends import InProcessBackend
from store.memory.write import memory_key

START = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
EVENTS = [
    "Went hiking in the Alps with my brother.",
    "Adopted a grey kitten from the shelter.",
    "Started a pottery class on Tuesday evenings.",
    "Sold the old car to a neighbour.",
    "Ran the city half marathon in the rain.",
    "Painted the kitchen a pale green.",
]


async def test_ids_sort_by_write_time_then_write_order(store):
    """A replay writes at the turns' own times, in any order; ids sort by those times, and the
    ids written for one instant in the order they were written."""
    minutes = [5, 0, 3, 1, 4, 2]
    ids = {}
    for minute in minutes:
        at = START + timedelta(minutes=minute)
        written = await memory.record_chat_message(store, "u", "user", f"message {minute}", "t1", now=at)
        ids[minute] = written["id"]
    assert sorted(ids.values()) == [ids[minute] for minute in sorted(ids)]
    same = [(await memory.save_memory(store, "u", "episodic", text, now=START))["id"] for text in EVENTS]
    assert len(set(same)) == len(EVENTS)
    assert sorted(same) == same
    assert {uuid.UUID(key).version for key in [*ids.values(), *same]} == {7}


def test_ids_of_one_instant_stay_distinct():
    instant = datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=UTC)  # no other test writes then
    keys = [memory_key(instant) for _ in range(5000)]  # more than the 4,096 the counter orders
    assert len(set(keys)) == len(keys)
    assert keys[:4096] == sorted(keys[:4096])


class _TiedStore:
    """A store whose vector search returns two memories of one similarity, newest first."""

    index_config = {"dims": 384}

    def __init__(self, items: list[SearchItem]) -> None:
        self.items = items

    async def asearch(self, ns, *, query=None, filter=None, limit=10, refresh_ttl=None) -> list[SearchItem]:
        return self.items[:limit]


async def test_equal_similarities_come_in_the_order_written():
    """The same words written twice score alike; the store returns them in any order, the
    vector search in the order written (the first copy is the one kept when texts repeat)."""
    ns = memory.namespace("u", "chat")
    first, second = memory_key(START), memory_key(START + timedelta(days=3))
    closer = SearchItem(ns, memory_key(START + timedelta(days=5)), {"text": "Jo: Thank you!"}, START, START, 0.6)
    tied = [SearchItem(ns, key, {"text": "Jo: Thanks!"}, START, START, score=0.5) for key in (second, first)]
    backend = InProcessBackend(cast(BaseStore, _TiedStore([*tied, closer])))
    found = await backend.vector_search(ns, "thanks", 5, {}, "created_at")
    assert [item.key for item in found] == [closer.key, first, second]
