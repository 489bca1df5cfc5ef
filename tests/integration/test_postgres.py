"""The checkpointer and store factories against the embedded Postgres + pgvector."""

from __future__ import annotations

import logging
import operator
from typing import Annotated

import pytest
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from store.postgres import StoreIndexMismatch, checkpointer, store
from tests.integration.conftest import sql

pytestmark = pytest.mark.integration


class Counter(TypedDict):
    log: Annotated[list[str], operator.add]


def counter_graph(saver):
    builder = StateGraph(Counter)
    builder.add_node("add", lambda state: {"log": ["x"]})
    builder.add_edge(START, "add")
    return builder.compile(checkpointer=saver)


def run_config(thread: str, run_id: str) -> dict:
    return {"configurable": {"thread_id": thread}, "metadata": {"run_id": run_id}}


async def test_delete_for_runs_removes_only_that_runs_checkpoints(pg_schema, pg_uri):
    async with checkpointer() as saver:
        graph = counter_graph(saver)
        await graph.ainvoke({"log": ["a"]}, run_config("t1", "run-1"))
        await graph.ainvoke({"log": ["b"]}, run_config("t1", "run-2"))
        await graph.ainvoke({"log": ["c"]}, run_config("t2", "run-3"))
        count = f"SELECT count(*) FROM {pg_schema}.checkpoints WHERE metadata->>'run_id' = %s"
        assert sql(pg_uri, count, ("run-2",))[0][0] > 0
        await saver.adelete_for_runs(["run-2"])
        assert sql(pg_uri, count, ("run-2",))[0][0] == 0
        assert sql(pg_uri, count, ("run-1",))[0][0] > 0
        # the thread reads back as it was before run-2, and goes on from there
        state = await graph.aget_state({"configurable": {"thread_id": "t1"}})
        assert state.values["log"] == ["a", "x"]
        await graph.ainvoke({"log": ["d"]}, run_config("t1", "run-4"))
        state = await graph.aget_state({"configurable": {"thread_id": "t1"}})
        assert state.values["log"] == ["a", "x", "d", "x"]
        other = await graph.aget_state({"configurable": {"thread_id": "t2"}})
        assert other.values["log"] == ["c", "x"]
        # blobs only a deleted checkpoint referenced are gone too
        orphans = sql(
            pg_uri,
            f"SELECT count(*) FROM {pg_schema}.checkpoint_blobs b WHERE NOT EXISTS ("
            f" SELECT 1 FROM {pg_schema}.checkpoints c WHERE c.thread_id = b.thread_id"
            " AND c.checkpoint_ns = b.checkpoint_ns"
            " AND c.checkpoint->'channel_versions'->>b.channel = b.version)",
        )
        assert orphans[0][0] == 0
        await saver.adelete_for_runs([])  # nothing to do, no error


async def test_store_semantic_search_on_pgvector(pg_schema, pg_uri):
    async with store() as pg_store:
        await pg_store.aput(("kb",), "a", {"text": "The cat sat on the warm mat."})
        await pg_store.aput(("kb",), "b", {"text": "Interest rates and inflation rose."})
        hits = await pg_store.asearch(("kb",), query="a kitten resting on a rug")
        assert [h.key for h in hits][0] == "a" and hits[0].score > hits[1].score
    dims = sql(
        pg_uri,
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'embedding'",
        (f"{pg_schema}.store_vectors",),
    )
    assert dims[0][0] == 384
    index = sql(pg_uri, "SELECT indexdef FROM pg_indexes WHERE schemaname = %s", (pg_schema,))
    assert any("hnsw" in row[0] for row in index)


async def test_store_built_with_other_dimensions_gives_a_clear_error(pg_schema, monkeypatch):
    async with store():
        pass
    monkeypatch.setenv("EMBEDDINGS_MODEL", "openai:text-embedding-3-small")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with pytest.raises(StoreIndexMismatch, match="384-dimension.*gives 1536"):
        async with store():
            pass


async def test_store_built_with_another_model_of_the_same_dimension_gives_a_clear_error(
    pg_schema, pg_uri, monkeypatch, caplog
):
    # another 384-dimension model: an OpenAI-compatible one (opening a store embeds nothing)
    minilm, e5 = "local:all-MiniLM-L6-v2", "openai:multilingual-e5-small"
    monkeypatch.setenv("EMBEDDINGS_DIMS", "")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("EMBEDDINGS_MODEL", minilm)
    async with store() as pg_store:
        await pg_store.aput(("kb",), "a", {"text": "The cat sat on the warm mat."})
    recorded = f"SELECT value FROM {pg_schema}.agent_store_meta WHERE key = 'embeddings_model'"
    assert sql(pg_uri, recorded) == [(minilm,)]
    monkeypatch.setenv("EMBEDDINGS_MODEL", e5)
    monkeypatch.setenv("EMBEDDINGS_DIMS", "384")  # the same dimension: check_index_dims passes
    with pytest.raises(StoreIndexMismatch, match=f"built with the embeddings model {minilm}.*EMBEDDINGS_MODEL is {e5}"):
        async with store():
            pass
    monkeypatch.setenv("EMBEDDINGS_MODEL", minilm)
    monkeypatch.setenv("EMBEDDINGS_DIMS", "")
    async with store() as pg_store:
        hits = await pg_store.asearch(("kb",), query="a kitten on a rug")
        assert [h.key for h in hits] == ["a"]
    # A store built before models were recorded is taken to hold the configured model, with a warning.
    sql(pg_uri, f"DROP TABLE {pg_schema}.agent_store_meta")
    sql(pg_uri, f"DELETE FROM {pg_schema}.agent_schema_version WHERE component = 'store'")
    monkeypatch.setenv("EMBEDDINGS_MODEL", e5)
    monkeypatch.setenv("EMBEDDINGS_DIMS", "384")
    with caplog.at_level(logging.WARNING, logger="store.postgres"):
        async with store():
            pass
    assert sql(pg_uri, recorded) == [(e5,)]
    assert "predates recording its embeddings model" in caplog.text
    monkeypatch.setenv("EMBEDDINGS_MODEL", minilm)
    monkeypatch.setenv("EMBEDDINGS_DIMS", "")
    with pytest.raises(StoreIndexMismatch, match=f"built with the embeddings model {e5}"):
        async with store():
            pass


def test_embedded_postgres_starts_is_reused_and_stops(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "EMBEDDED_POSTGRES_DIR": str(tmp_path / "pg")}

    def pg(*args):
        result = subprocess.run(
            [sys.executable, "-m", "store.postgres", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert pg("status").endswith("stopped")
    uri = pg("start")
    try:
        assert uri.startswith("postgresql://")
        assert pg("uri") == uri  # a second start reuses the running server
        assert pg("status").endswith("running")
        sql(uri, "CREATE EXTENSION IF NOT EXISTS vector")
        assert sql(uri, "SELECT '[1,2,3]'::vector <-> '[1,2,4]'::vector") == [(1.0,)]
    finally:
        stopped = pg("stop")
    assert stopped == "stopped"
    assert pg("status").endswith("stopped")
    assert pg("stop") == "not running"


@pytest.mark.parametrize("kept_fresh", [True, False])
async def test_a_pool_kept_fresh_serves_again_at_once_after_a_postgres_restart(tmp_path, kept_fresh):
    """A pool built as Aegra builds its own (five connections, each checked before use), on a
    Postgres that restarts: with keep_pool_fresh, the first request after the restart gets a
    working connection within its 3 s; left alone, the pool first walks its five broken idle
    connections with growing pauses between them (1 + 2 + 4 + 8 s)."""
    import asyncio
    import os
    import subprocess
    import sys

    from psycopg_pool import AsyncConnectionPool, PoolTimeout

    from store.postgres import keep_pool_fresh

    env = {**os.environ, "EMBEDDED_POSTGRES_DIR": str(tmp_path / "pg")}

    def pg(command: str) -> str:  # as an operator would: a process of its own
        done = subprocess.run(
            [sys.executable, "-m", "store.postgres", command], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    uri = await asyncio.to_thread(pg, "start")
    pool = AsyncConnectionPool(
        uri,
        min_size=5,
        max_size=20,
        open=False,
        kwargs={"autocommit": True},
        check=AsyncConnectionPool.check_connection,
    )
    await pool.open(wait=True)
    fresh = asyncio.create_task(keep_pool_fresh(pool)) if kept_fresh else None
    try:
        await asyncio.to_thread(pg, "stop")
        await asyncio.sleep(2)
        await asyncio.to_thread(pg, "start")
        await asyncio.sleep(1.5)  # a round of keep_pool_fresh
        if kept_fresh:
            async with pool.connection(timeout=3) as conn:
                assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
        else:
            with pytest.raises(PoolTimeout):
                async with pool.connection(timeout=3):
                    pass
    finally:
        if fresh is not None:
            fresh.cancel()
        await pool.close()
        await asyncio.to_thread(pg, "stop")


async def test_a_pool_connection_the_server_ended_is_replaced_before_use(pg_schema, pg_uri):
    """The package's pools check a connection before handing it out: one whose session the server
    ended while it sat idle (here `pg_terminate_backend`, as a restart or an administrator does)
    is replaced, and the request gets a working one; a live connection is handed out again."""
    import asyncio

    from store.pool import open_pool

    async with open_pool(pg_uri, max_size=1) as pool:
        async with pool.connection() as conn:
            first = (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())["pg_backend_pid"]
        async with pool.connection() as conn:  # alive: the same connection again
            assert (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())["pg_backend_pid"] == first
        assert sql(pg_uri, "SELECT pg_terminate_backend(%s)", (first,)) == [(True,)]
        await asyncio.sleep(0.2)  # the server has closed the session
        async with pool.connection(timeout=5) as conn:
            second = (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())["pg_backend_pid"]
        assert second != first
