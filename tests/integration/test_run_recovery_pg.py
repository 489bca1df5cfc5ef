"""store/recovery.py on a real Postgres: a graph run whose Postgres stops mid-run and starts
again resumes from its last checkpoint, with LangGraph's Postgres checkpointer on a pool built as
Aegra builds its own, and the thread has every message once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from typing import Annotated

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from typing_extensions import TypedDict

from store.pool import ensure_embedded_postgres, is_database_unavailable, keep_pool_fresh, stop_embedded_postgres
from store.recovery import resume_after_outages
from tests.integration.conftest import ROOT

pytestmark = pytest.mark.integration


class State(TypedDict):
    messages: Annotated[list, add_messages]


def start_postgres() -> None:
    """Start the test's Postgres again, from a process of its own (as an operator would)."""
    started = subprocess.run(
        [sys.executable, "-m", "store.postgres", "start"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert started.returncode == 0, started.stderr


@pytest.fixture
def own_postgres(tmp_path, monkeypatch):
    """An embedded Postgres of the test's own, which it stops and starts."""
    monkeypatch.setenv("EMBEDDED_POSTGRES_DIR", str(tmp_path / "pg" / "data"))
    uri = ensure_embedded_postgres()
    yield uri
    stop_embedded_postgres()


def build(saver: AsyncPostgresSaver, calls: dict, reached: asyncio.Event, release: asyncio.Event):
    """question -> `note` -> `answer`; the first `answer` waits for `release`."""

    async def note(state: State) -> dict:
        calls["note"] += 1
        return {"messages": [AIMessage("noted")]}

    async def answer(state: State) -> dict:
        calls["answer"] += 1
        if calls["answer"] == 1:
            reached.set()
            await release.wait()
        return {"messages": [AIMessage("the answer")]}

    builder = StateGraph(State)
    builder.add_node("note", note)
    builder.add_node("answer", answer)
    builder.add_edge(START, "note")
    builder.add_edge("note", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


async def test_a_run_whose_postgres_restarts_resumes_from_its_last_checkpoint(own_postgres):
    pool = AsyncConnectionPool(  # as Aegra opens its checkpointer's pool (aegra_api.core.database)
        conninfo=own_postgres,
        max_size=4,
        timeout=2,  # a write fails within 2 s (Aegra's pool: 30 s, so a shorter outage is not seen at all)
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": None, "row_factory": dict_row},
        check=AsyncConnectionPool.check_connection,
    )
    await pool.open()
    fresh = asyncio.create_task(keep_pool_fresh(pool))  # as server/http.py does for Aegra's pool
    try:
        saver = AsyncPostgresSaver(conn=pool)
        await saver.setup()
        calls = {"note": 0, "answer": 0}
        reached, release = asyncio.Event(), asyncio.Event()
        graph = build(saver, calls, reached, release)
        run_id = str(uuid.uuid4())
        config = {"configurable": {"thread_id": str(uuid.uuid4()), "run_id": run_id}, "run_id": run_id}
        question = {"messages": [HumanMessage("the question")]}
        run = asyncio.create_task(
            resume_after_outages(lambda: graph.ainvoke(question, config), uri=own_postgres, wait=90, retries=2)
        )
        await asyncio.wait_for(reached.wait(), 30)
        await asyncio.sleep(1)  # the checkpoint after `note` is written
        await asyncio.to_thread(stop_embedded_postgres)
        release.set()  # `answer` ends; writing its result fails
        await asyncio.sleep(3)
        assert not run.done(), run  # waiting for Postgres, not failed
        await asyncio.to_thread(start_postgres)
        back = time.monotonic()
        await asyncio.wait_for(run, 60)
        print(f"the run completed {time.monotonic() - back:.2f} s after Postgres was back")
        state = await graph.aget_state(config)
        assert [m.content for m in state.values["messages"]] == ["the question", "noted", "the answer"]
        # `note` was not run again; `answer` ran again (resumed at it) or not (its result was kept
        # by the write that waited for Postgres), depending on where the outage caught the write.
        assert calls["note"] == 1 and calls["answer"] in (1, 2), calls
    finally:
        fresh.cancel()
        await pool.close()


async def test_without_postgres_back_in_time_the_run_fails_with_its_error(own_postgres):
    attempts = 0

    async def attempt() -> None:
        nonlocal attempts
        attempts += 1
        async with AsyncPostgresSaver.from_conn_string(own_postgres) as saver:
            await saver.aget_tuple({"configurable": {"thread_id": "t"}})

    await asyncio.to_thread(stop_embedded_postgres)
    started = time.monotonic()
    with pytest.raises(Exception) as failed:
        await resume_after_outages(attempt, uri=own_postgres, wait=2, retries=3)
    waited = time.monotonic() - started
    assert is_database_unavailable(failed.value), failed.value
    assert attempts == 1 and 2 <= waited < 10, (attempts, waited)
