"""Updates of derived items in process (store/backends.py `InProcessBackend.update_items`): the
person/attribute index and the registry of people keep every update of writers at the same
moment even on a store whose reads and writes let other tasks run between them; an update that
changes nothing writes nothing and leaves no namespace behind."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from langgraph.store.base import Op, Result
from langgraph.store.memory import InMemoryStore

from store.backend import backend_for
from store.memory.attributes import aspects_namespace, learn_turn

CHAT = ("memories", "alice", "chat")
WORDS = "pottery painting drawing sketching camping hiking swimming running yoga dancing".split()  # noqa: SIM905


class YieldingStore(InMemoryStore):
    """An in-memory store whose every operation lets other tasks run first, as one doing I/O does."""

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        await asyncio.sleep(0)
        return await super().abatch(ops)


async def test_messages_recorded_at_once_all_reach_their_speakers_index():
    store = YieldingStore()
    await asyncio.gather(*(learn_turn(store, CHAT, "Jo", f"m{n}", f"I went {word}.") for n, word in enumerate(WORDS)))
    item = await store.aget(aspects_namespace(CHAT), "Jo")
    assert item is not None
    filed = {key for values in item.value["aspects"].values() for keys in values.values() for key in keys}
    assert filed == {f"m{n}" for n in range(len(WORDS))}


async def test_an_update_that_changes_nothing_writes_nothing_and_leaves_no_namespace():
    store = InMemoryStore()
    backend = backend_for(store)
    assert await backend.update_items(("kb_people", "x"), ["people"], lambda key, value: None) == {}
    assert await store.alist_namespaces() == []

    written = await backend.update_items(("kb_people", "x"), ["a", "b", "a"], lambda key, value: {"n": 1})
    assert written == {"a": {"n": 1}, "b": {"n": 1}}
    again = await backend.update_items(("kb_people", "x"), ["a"], lambda key, value: {"n": (value or {})["n"] + 1})
    assert again == {"a": {"n": 2}}
    item = await store.aget(("kb_people", "x"), "a")
    assert item is not None and item.value == {"n": 2}
