"""The person/attribute indexes of a knowledge base of chat logs (store/aspects.py): one item
per speaker (`aspects_namespace`), their chunks' ids under each aspect's values, updated as
chunks are written (`learn_chunks`), rebuilt from the chunks on demand (`rebuild`), deleted with
the knowledge base. A list question naming people gets the chunks of the list's items
(`listed`), which hybrid search interleaves with its own ranking (store/knowledge/handle.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from langgraph.store.base import BaseStore, GetOp, Item

from store import aspects
from store.backend import backend_for
from store.knowledge.config import ASPECTS_NAMESPACE_ROOT, LIST_DEPTH
from store.knowledge.registry import chunk_namespace
from store.knowledge.search import Hit, dense_hits
from store.names import without_names


def aspects_namespace(kb: str) -> tuple[str, str]:
    """Where `kb`'s person/attribute indexes are kept, one item per speaker."""
    return (ASPECTS_NAMESPACE_ROOT, kb)


def _value(speaker: str, index: dict) -> dict:
    return {"kind": "aspects", "speaker": speaker, "aspects": index}


async def learn_chunks(store: BaseStore, kb: str, chunks: Iterable[tuple[str, str]]) -> None:
    """Fold written chunks ((id, content)) into the indexes of the speakers of their lines "Name:
    words" (`store.aspects.speaker_lines`): one update (a read and a write) of the indexes of the
    speakers they speak of, which concurrent ingests never undo (`Backend.update_items`)."""
    said: dict[str, list[tuple[str, str]]] = {}
    for key, content in chunks:
        for speaker, line in aspects.speaker_lines(content):
            if aspects.turn_aspects(line):
                said.setdefault(speaker, []).append((key, line))
    if not said:
        return

    def change(speaker: str, value: dict | None) -> dict:
        index = dict((value or {}).get("aspects") or {})
        for key, line in said[speaker]:
            aspects.add_turn(index, key, line)
        return _value(speaker, index)

    await backend_for(store).update_items(aspects_namespace(kb), list(said), change)


async def rebuild(store: BaseStore, kb: str) -> dict[str, dict]:
    """`kb`'s indexes built anew from its chunks (for knowledge bases ingested before they
    existed); returns them (speaker -> index)."""
    backend = backend_for(store)
    await backend.delete_under(aspects_namespace(kb))
    chunks = await backend.scan(chunk_namespace(kb))
    chunks.sort(key=lambda item: (str(item.value.get("date") or ""), str(item.value.get("source")), item.key))
    await learn_chunks(store, kb, ((item.key, str(item.value.get("content") or "")) for item in chunks))
    return {item.key: item.value["aspects"] for item in await backend.scan(aspects_namespace(kb))}


async def listed(store: BaseStore, kb: str, query: str, people: Mapping[str, frozenset[str]]) -> list[Hit]:
    """For a list question naming `people` (recorded speaker -> their names; `store.aspects.asked`),
    the chunks of the list's items, one per item first (`store.aspects.items_first`), ranked by their
    vector similarity to the query without the names (among the LIST_DEPTH closest chunks) plus
    REPORTED_WEIGHT for a line telling what its writer did; [] for any other question. Returns
    hits scored by similarity."""
    kinds = aspects.asked(query)
    if not kinds or not people:
        return []
    found = await store.abatch([GetOp(aspects_namespace(kb), person, False) for person in people])
    items = aspects.items_for([item.value.get("aspects") or {} for item in found if isinstance(item, Item)], kinds)
    if not items:
        return []
    hits = {
        hit.id: hit
        for hit in await dense_hits(store, kb, without_names(query, set().union(*people.values())), LIST_DEPTH)
    }
    boosted = {
        key: hit.score + aspects.REPORTED_WEIGHT * aspects.reported(str(hit.value.get("content") or ""))
        for key, hit in hits.items()
    }
    picked = aspects.items_first(list(hits), items, lambda key: boosted.get(key, float("-inf")))
    return [hits[key] for key in picked if key in hits]
