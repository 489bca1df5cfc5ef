"""Every SQL statement the project runs against langgraph-checkpoint-postgres's tables, in one place.

The library's public APIs (`BaseStore`, the saver) cannot express a few things the project needs:
memory listings filtered by substring and timestamp range, deleting all of a user's namespaces at
once, deleting the checkpoints a run wrote (rollback), full-text keyword search.
Those statements live here, on a connection pool the project opened itself (`store.postgres.open_pool`), never on the library's private members. `check_tables` runs when
the factories open the store and the checkpointer: it fails with the installed library version
when a table or column these statements rely on is gone (tests/integration/test_store_sql.py
fails the same way when an upgrade changes the schema).

The project's own tables are created and upgraded by the versioned `migrations` (run when the
store opens, store/migrations.py), never lazily. Memory full text lives in `memory_fulltext`
(prefix, key, tsvector), written next to each embedded memory (through store/backend.py) and
deleted with it; `memory_speakers` (prefix, speaker)
lists who said the memories of each namespace (hybrid search reads it before embedding a query).

Knowledge-base full text lives in a table of our own, `kb_fulltext`, not in an index on the
library's `store` table (see docs/knowledge.md): it is written on ingest and delete next to the
store's chunk rows.

`agent_store_meta` (key, value), another table of our own, records facts about the store itself:
the embeddings model its vectors were built with (`record_embeddings_model`, checked when the
store opens).

Statements by owner: `base` (the library's tables checked at start-up, items, where a store's
table is, BM25 and its MaxScore shared by both full texts), `schema` (the migrations), `memory`, `knowledge`,
`quotas`, `checkpoints`, and `graph` (the knowledge graph's tables, `PostgresGraph`, the backend's
graph part on Postgres). `StoreSQL` is all of them
on one pool. The benchmarks' bulk load lives in bench/bench_sql.py, outside the product.
"""

from store.sql.base import (
    CHECKPOINT_COLUMNS,
    KB_PREFIX,
    LIBRARY,
    MEMORY_TEXT_SEARCH_CONFIG,
    MIGRATION_COMPONENT,
    STORE_COLUMNS,
    STORE_LOCATION_SQL,
    LibrarySchemaError,
    library_version,
    server_store_conninfo,
    server_store_location,
    server_store_sees_vector_type,
    server_store_with_index,
    store_location,
)
from store.sql.checkpoints import CheckpointSQL
from store.sql.knowledge import KB_KEYWORD_SQL, KnowledgeSQL
from store.sql.memory import MEMORY_KEYWORD_SQL, MemorySQL
from store.sql.quotas import QuotaSQL
from store.sql.schema import migrations


class StoreSQL(MemorySQL, KnowledgeSQL, QuotaSQL, CheckpointSQL):
    """The project's SQL on the library's tables and on its own, over a pool we opened."""


__all__ = [
    "CHECKPOINT_COLUMNS",
    "KB_KEYWORD_SQL",
    "KB_PREFIX",
    "LIBRARY",
    "MEMORY_KEYWORD_SQL",
    "MEMORY_TEXT_SEARCH_CONFIG",
    "MIGRATION_COMPONENT",
    "STORE_COLUMNS",
    "STORE_LOCATION_SQL",
    "LibrarySchemaError",
    "StoreSQL",
    "library_version",
    "migrations",
    "server_store_conninfo",
    "server_store_location",
    "server_store_sees_vector_type",
    "server_store_with_index",
    "store_location",
]
