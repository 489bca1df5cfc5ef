"""Knowledge-base names and the registry: create, list, get, delete, totals."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import BaseStore

from store.backend import backend_for
from store.knowledge.config import (
    ASPECTS_NAMESPACE_ROOT,
    CHUNK_NAMESPACE_ROOT,
    DOCUMENT_NAMESPACE_ROOT,
    KB_NAME,
    PEOPLE_KEY,
    PEOPLE_NAMESPACE_ROOT,
    REGISTRY_NAMESPACE,
)


class KBUnknownError(ValueError):
    """The named knowledge base does not exist; the message lists the ones that do."""

    def __init__(self, name: str, existing: Sequence[str]) -> None:
        self.name = name
        self.existing = list(existing)
        known = ", ".join(self.existing) if self.existing else "none yet"
        super().__init__(f"Unknown knowledge base {name!r}. Existing knowledge bases: {known}.")


class KBExistsError(ValueError):
    """create_kb was asked to create a knowledge base that already exists."""


def validate_kb_name(name: str) -> str:
    """Return `name` if it is a valid knowledge base name (lowercase [a-z0-9_-], 1-64 chars)."""
    if not isinstance(name, str) or not KB_NAME.fullmatch(name):
        raise ValueError(
            f"Invalid knowledge base name {name!r}: use 1-64 characters from lowercase a-z, 0-9, '_' and '-'."
        )
    return name


def chunk_namespace(kb: str) -> tuple[str, str]:
    """The store namespace holding a knowledge base's chunks."""
    return (CHUNK_NAMESPACE_ROOT, kb)


def document_namespace(kb: str) -> tuple[str, str]:
    """The store namespace holding a knowledge base's document records."""
    return (DOCUMENT_NAMESPACE_ROOT, kb)


def people_namespace(kb: str) -> tuple[str, str]:
    """Where `kb`'s registry of people is kept (store/knowledge/people.py)."""
    return (PEOPLE_NAMESPACE_ROOT, kb)


def chunk_id(kb: str, source: str, position: int) -> str:
    """The stable id of the chunk at `position` of `source` in `kb`."""
    return hashlib.sha256(f"{kb}\n{source}\n{position}".encode()).hexdigest()[:32]


def document_key(source: str) -> str:
    """The key of a source's document record."""
    return hashlib.sha256(source.encode()).hexdigest()[:32]


def now_stamp() -> str:
    """The current UTC time as an ISO string (seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


async def search_all(store: BaseStore, namespace: tuple[str, ...]) -> list:
    """Every item of one namespace (and those below it), each once (`Backend.scan`)."""
    return await backend_for(store).scan(namespace)


def is_shared(entry: dict) -> bool:
    """Whether a knowledge base is offered to every user: one without an owner (made by the
    operator: the CLI, an administrator, a batch import) unless an administrator made it private,
    and one an administrator shared (`shared` in its entry)."""
    return bool(entry.get("shared", entry.get("owner") is None))


def readable_by(entry: dict, reader: str | None) -> bool:
    """Whether the user `reader` may read the knowledge base `entry`: their own and the shared
    ones. `reader=None` reads every knowledge base (administrators, the operator's CLI and
    scripts, runs without an authenticated user)."""
    if reader is None:
        return True
    owner = entry.get("owner")
    return is_shared(entry) or (owner is not None and owner == reader)


def _entry(value: dict) -> dict:
    return {**value, "shared": is_shared(value)}


async def list_kbs(store: BaseStore, *, reader: str | None = None) -> list[dict]:
    """The registry entries (with `shared`) of the knowledge bases `reader` may read (every one
    for `reader=None`, see `readable_by`), sorted by name."""
    items = await search_all(store, REGISTRY_NAMESPACE)
    entries = (_entry(item.value) for item in items if readable_by(item.value, reader))
    return sorted(entries, key=lambda kb: kb["name"])


async def get_kb(store: BaseStore, name: str, *, reader: str | None = None) -> dict:
    """The registry entry of `name` (with `shared`); KBUnknownError listing the ones `reader`
    may read when there is none or `reader` may not read it (the two are told apart to nobody:
    a user learns nothing of another user's knowledge bases)."""
    validate_kb_name(name)
    item = await store.aget(REGISTRY_NAMESPACE, name)
    if item is None or not readable_by(item.value, reader):
        raise KBUnknownError(name, [kb["name"] for kb in await list_kbs(store, reader=reader)])
    return _entry(item.value)


async def set_shared(store: BaseStore, name: str, shared: bool) -> dict:
    """Share a knowledge base with every user, or stop sharing it (an administrator's choice);
    the updated entry."""
    await get_kb(store, name)

    def change(_key: str, found: dict | None) -> dict:
        return {**(found or {}), "shared": shared, "updated_at": now_stamp()}

    written = await backend_for(store).update_items(REGISTRY_NAMESPACE, [name], change)
    return _entry(written[name])


async def create_kb(
    store: BaseStore, name: str, description: str = "", *, exist_ok: bool = False, owner: str | None = None
) -> dict:
    """Register a knowledge base and return its entry (with `owner` when one is given).

    Creation is atomic: of concurrent calls for one name exactly one creates it, the others see
    it exist. With `exist_ok`, an existing entry is returned (its description replaced when a
    non-empty one is given); otherwise an existing name raises KBExistsError.
    """
    validate_kb_name(name)
    from store.embeddings import embeddings_spec

    now = now_stamp()
    entry: dict[str, Any] = {
        "name": name,
        "description": description,
        "created_at": now,
        "updated_at": now,
        "documents": 0,
        "chunks": 0,
        "characters": 0,
        "embeddings_model": embeddings_spec().model,
    }
    if owner is not None:
        entry["owner"] = owner
    if await backend_for(store).insert_if_absent(REGISTRY_NAMESPACE, name, entry):
        return entry
    if not exist_ok:
        raise KBExistsError(f"Knowledge base {name!r} already exists.")
    if description:
        # under the entry's lock, as ingests update its figures (`refresh_stats`): a plain get and
        # put would write back the figures it read
        def change(_key: str, current: dict | None) -> dict | None:
            if current is None or current.get("description") == description:
                return None
            return {**current, "description": description, "updated_at": now_stamp()}

        written = await backend_for(store).update_items(REGISTRY_NAMESPACE, [name], change)
        if name in written:
            return written[name]
    item = await store.aget(REGISTRY_NAMESPACE, name)
    return dict(item.value) if item is not None else entry


async def delete_kb(store: BaseStore, name: str) -> dict:
    """Delete a knowledge base: its chunks, document records and registry entry.

    Returns {"name", "documents", "chunks"} with the numbers of items deleted.
    """
    await get_kb(store, name)
    backend = backend_for(store)
    chunks = await backend.delete_under(chunk_namespace(name))
    await backend.unindex_kb_chunks(name)
    await backend.graph.drop(name)
    documents = await backend.delete_under(document_namespace(name))
    await store.adelete(people_namespace(name), PEOPLE_KEY)
    await backend.delete_under(
        (ASPECTS_NAMESPACE_ROOT, name)
    )  # the person/attribute indexes (store/knowledge/aspects.py)
    await store.adelete(REGISTRY_NAMESPACE, name)
    return {"name": name, "documents": documents, "chunks": chunks}


async def refresh_stats(store: BaseStore, name: str) -> dict:
    """Recount the registry entry's totals from the document records (an update of the entry:
    what a concurrent writer notes in it, such as `people`, stays)."""
    records = [item.value for item in await search_all(store, document_namespace(name))]
    totals = {
        "documents": len(records),
        "chunks": sum(r["chunks"] for r in records),
        "characters": sum(r["characters"] for r in records),
    }

    def change(_key: str, found: dict | None) -> dict:
        entry: dict[str, Any] = dict(found) if found else {"name": name, "description": "", "created_at": now_stamp()}
        entry.update(totals, updated_at=now_stamp())
        return entry

    written = await backend_for(store).update_items(REGISTRY_NAMESPACE, [name], change)
    return written[name]
