"""The people of a knowledge base of chat logs (store/people.py): documents whose lines read
"Name: words" teach it who speaks, the names they introduce themselves with and the names the
other person addresses them by. Kept as one item per knowledge base (`PEOPLE_NAMESPACE`),
updated at ingest (`learn_documents`), rebuilt from the chunks on demand (`rebuild`), deleted
with the knowledge base. The knowledge base's registry entry says whether it has such an item
(`"people": true`), so that a search of any other knowledge base reads none (`persons_of`)."""

from __future__ import annotations

from collections.abc import Iterable

from langgraph.store.base import BaseStore

from store.backend import backend_for
from store.knowledge.config import PEOPLE_KEY, REGISTRY_NAMESPACE
from store.knowledge.registry import chunk_namespace, people_namespace, search_all
from store.people import Person, learn_lines, people, recorded_speakers


async def registry(store: BaseStore, kb: str) -> dict | None:
    # a search, not a get: reading leaves no trace (an in-memory store's get makes the namespace)
    found = await store.asearch(people_namespace(kb), limit=1)
    return found[0].value if found else None


async def learn_documents(store: BaseStore, kb: str, texts: Iterable[str]) -> None:
    """Fold the texts of newly ingested documents into `kb`'s registry, written once they hold a
    speaker's line (every line of the texts counts then, so that documents with a few "Name:
    words" lines are not taken for a chat log; lines ingested before the first speaker's line
    are not counted); the registry entry is marked once the knowledge base has speakers. One
    update of the registry, which concurrent ingests never undo (`Backend.update_items`)."""
    texts = list(texts)

    def change(_key: str, found: dict | None) -> dict | None:
        current = dict(found or {})
        spoken = False
        for text in texts:
            spoken = learn_lines(current, text) or spoken
        return current if spoken or found is not None else None

    written = await backend_for(store).update_items(people_namespace(kb), [PEOPLE_KEY], change)
    if recorded_speakers(written.get(PEOPLE_KEY)):
        await _mark(store, kb)


async def rebuild(store: BaseStore, kb: str) -> dict:
    """`kb`'s registry built anew from its chunks, by date then source (knowledge bases ingested
    before the registry existed); returns it."""
    chunks = [item.value for item in await search_all(store, chunk_namespace(kb))]
    chunks.sort(key=lambda v: (str(v.get("date") or ""), str(v.get("source")), int(v.get("position") or 0)))
    built: dict = {}
    for value in chunks:
        learn_lines(built, str(value.get("content") or ""))
    await store.aput(people_namespace(kb), PEOPLE_KEY, built, index=False)
    if recorded_speakers(built):
        await _mark(store, kb)
    return built


async def _mark(store: BaseStore, kb: str) -> None:
    """Note in `kb`'s registry entry that it has a registry of people (an update: a concurrent
    recount of the entry keeps it, store/knowledge/registry.py `refresh_stats`)."""

    def change(_key: str, entry: dict | None) -> dict | None:
        return {**entry, "people": True} if entry is not None and not entry.get("people") else None

    await backend_for(store).update_items(REGISTRY_NAMESPACE, [kb], change)


async def persons_of(store: BaseStore, kb: str, entry: dict) -> list[Person]:
    """`persons` of the knowledge base whose registry entry is `entry`: none, without a read,
    when the entry says it has no people."""
    return await persons(store, kb) if entry.get("people") else []


async def persons(store: BaseStore, kb: str) -> list[Person]:
    """The speakers of `kb`'s logs with the names they go by (none for other knowledge bases)."""
    found = await registry(store, kb)
    speakers = recorded_speakers(found)
    return people(speakers, found) if speakers else []
