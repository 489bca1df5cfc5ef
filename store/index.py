"""The store's semantic index: its configuration from the configured embeddings (the local
MiniLM by default), the checks that an existing index was built with that model, and the
index of a server's own Postgres store (Aegra's), which the server builds without one.

Every store the package reads by meaning is indexed with `store_index_config()`: the one
`store.postgres.store()` builds (`langgraph dev`, the server image) and Aegra's, which the
package indexes itself at start-up (`index_server_store`): Aegra's `store.index` only takes a
`provider:model` string, which cannot name the local model. A store without an index does not
answer a search by meaning with unscored items: `require_index` raises `NoVectorIndex`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.postgres.aio import AsyncPostgresStore

from store.embeddings import embeddings_spec, get_embeddings
from store.migrations import LOCK_ID
from store.sql import StoreSQL, server_store_sees_vector_type, server_store_with_index

logger = logging.getLogger(__name__)
VECTOR_LOCK_ID = LOCK_ID + 1  # pg advisory lock key of the vector table's setup beside a server's store


class StoreIndexMismatch(RuntimeError):
    """The store's vector index was built with another embeddings model or dimension than configured."""


class NoVectorIndex(RuntimeError):
    """A search by meaning on a store that has no vector index (it would return unscored items)."""


def store_index_config() -> dict:
    """The store's semantic index: the configured embeddings, whole value embedded by default."""
    spec = embeddings_spec()
    return {"dims": spec.dims, "embed": get_embeddings(spec), "fields": ["$"]}


def require_index(store: BaseStore) -> None:
    """Raise `NoVectorIndex` when `store` has no vector index (a store that does not say whether
    it has one passes): its search by query would return items by recency, unscored."""
    if getattr(store, "index_config", True):
        return
    raise NoVectorIndex(
        "Search by meaning is unavailable: the store has no vector index (the embeddings model "
        f"{embeddings_spec().model} is not attached to it; the server's start-up log says why). "
        "Keyword search still works."
    )


async def check_index_dims(adapter: StoreSQL, dims: int) -> None:
    """Fail with a clear message when the existing vector table has another dimension."""
    found = await adapter.vector_dims()
    if found not in (None, -1, dims):
        raise StoreIndexMismatch(
            f"The store's vector index holds {found}-dimension embeddings, but the "
            f"configured embeddings model ({embeddings_spec().model}) gives {dims}. Use the model "
            "the index was built with (EMBEDDINGS_MODEL / EMBEDDINGS_DIMS), or point POSTGRES_URI / "
            "POSTGRES_SCHEMA at a fresh database or schema and re-ingest."
        )


async def check_index_model(adapter: StoreSQL, model: str, existing_index: bool) -> None:
    """Fail with a clear message when the store's vectors were built with another embeddings
    model than `model`, the configured one (`existing_index`: the store had vectors before it
    opened). Two models of the same dimension pass
    `check_index_dims`, but their vectors are not comparable: search would quietly rank
    unrelated items first. The model is recorded (`agent_store_meta`) the first time a store
    opens. A store built before models were recorded is recorded as the configured model: which
    model built it cannot be known, so a warning says so."""
    recorded, first = await adapter.record_embeddings_model(model)
    if recorded != model:
        raise StoreIndexMismatch(
            f"The store's vector index was built with the embeddings model {recorded}, but "
            f"EMBEDDINGS_MODEL is {model}: their vectors are not comparable, even at the same "
            f"dimension, and search would return unrelated items. Set EMBEDDINGS_MODEL={recorded} "
            "back, or point POSTGRES_SCHEMA (or POSTGRES_URI) at a fresh schema or database and "
            "re-ingest the knowledge bases (memories start empty there)."
        )
    if first and existing_index:
        logger.warning(
            "The store's vector index predates recording its embeddings model; recorded %s, the "
            "configured model. If the index was built with another model, search returns unrelated "
            "items: use a fresh POSTGRES_SCHEMA and re-ingest.",
            model,
        )


async def index_server_store(server_store: AsyncPostgresStore, adapter: StoreSQL) -> str:
    """Give a server's own Postgres store (Aegra's) the package's semantic index, so items put
    from now on are embedded with the configured model (MiniLM by default, in process) and a
    search by query ranks by meaning, for the graphs and the store API alike. The vector table is
    LangGraph's own (`store_vectors`, with its versioned `vector_migrations`), created beside the
    server's `store` table once, one replica at a time (an advisory lock they poll for); the
    dimension and the model that built an existing one are checked first (`StoreIndexMismatch`). A store the server already indexed (`store.index` in aegra.json) is
    left as it is, if it names the configured model (else `StoreIndexMismatch`). Returns a line
    for the start-up log."""
    spec = embeddings_spec()
    if server_store.index_config:
        # The server's own index (`store.index` in aegra.json): the package (the knowledge bases'
        # `embeddings_model`, the CLI's vectors) must name the model it embeds with.
        embed, dims = server_store.index_config.get("embed"), server_store.index_config.get("dims")
        if isinstance(embed, str) and (embed != spec.model or dims != spec.dims):
            raise StoreIndexMismatch(
                f"The server's store is indexed with {embed} ({dims} dimensions), but EMBEDDINGS_MODEL is "
                f"{spec.model} ({spec.dims}): set EMBEDDINGS_MODEL (and EMBEDDINGS_DIMS) to the server's model, "
                "or remove `store.index` from the server's configuration to use the package's own index."
            )
        return f"the server's own index ({embed if isinstance(embed, str) else type(embed).__name__})"
    if not await server_store_sees_vector_type(server_store):
        logger.error(
            "The server's store cannot have a vector index: its connections do not see pgvector's `vector` "
            "type (the extension is in schema public: put public on the server's search_path). Searches by "
            "meaning answer SEMANTIC_SEARCH_UNAVAILABLE."
        )
        return "none (pgvector's type is not on the server's search_path)"
    index = store_index_config()
    model = spec.model
    existing_index = await adapter.vector_dims() is not None
    await check_index_dims(adapter, index["dims"])
    configured = server_store_with_index(server_store, index)
    async with adapter.pool.connection() as conn:
        # The setup builds the vector index with CREATE INDEX CONCURRENTLY, which waits for every
        # transaction open when it starts: another replica waiting for a lock would be one, and
        # never end. So the others take turns by polling for a lock of their own, never waiting.
        while True:
            cursor = await conn.execute("SELECT pg_try_advisory_lock(%s) AS got", (VECTOR_LOCK_ID,))
            if (await cursor.fetchone())["got"]:
                break
            await asyncio.sleep(0.2)
        try:
            await configured.setup()  # the vector table and its index (idempotent)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (VECTOR_LOCK_ID,))
    await check_index_model(adapter, model, existing_index)
    attach: Any = server_store
    attach.index_config, attach.embeddings = configured.index_config, configured.embeddings
    return f"{model} ({index['dims']} dimensions), in the package's process"
