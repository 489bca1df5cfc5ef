"""Memory extraction's debounce on both servers: `after_seconds` + rollback where the server has
them (`langgraph_api`), and on Aegra a run that waits itself and extracts only while its turn is
the conversation's latest (graphs/runtime/memory_schedule.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from langgraph.runtime import ServerInfo
from langgraph.store.memory import InMemoryStore

from graphs.memory_writer.graph import builder as memory_writer_builder
from graphs.runtime import memory_schedule
from graphs.runtime.context import Context
from graphs.runtime.memory_schedule import latest_turn_after_delay, schedule_extraction
from store.index import store_index_config
from tests.fakes import ScriptedChatModel
from tools import server_api

TURN = [{"role": "user", "content": "I live in Lisbon"}, {"role": "assistant", "content": "Noted."}]


class RecordingRuns:
    def __init__(self) -> None:
        self.created: list[dict] = []

    async def create(self, thread_id, assistant_id, **kwargs):
        self.created.append({"thread_id": thread_id, "assistant_id": assistant_id, **kwargs})
        return {"run_id": str(len(self.created))}


@pytest.fixture
def runs(monkeypatch, model_slot):
    recorded = RecordingRuns()
    monkeypatch.setattr(server_api, "server_client", lambda act_as=None: SimpleNamespace(runs=recorded))
    monkeypatch.setenv("MEMORY_EXTRACTION_DELAY", "20")
    return recorded


def server_runtime(store):
    return SimpleNamespace(
        server_info=ServerInfo(assistant_id="a", graph_id="react", user=None),
        context=Context(model="scripted:m"),
        store=store,
    )


async def test_on_langgraph_api_the_server_delays_and_rolls_back(runs, monkeypatch):
    monkeypatch.setattr(server_api, "server_kind", lambda: "langgraph")
    store = InMemoryStore()
    await schedule_extraction(server_runtime(store), "alice", TURN, "t1")
    (run,) = runs.created
    assert run["after_seconds"] == 20 and run["multitask_strategy"] == "rollback"
    assert "turn_id" not in run["input"] and "not_before" not in run["input"]


async def test_on_aegra_each_run_carries_its_turn_and_start_time_and_the_latest_turn_is_stored(runs, monkeypatch):
    monkeypatch.setattr(server_api, "server_kind", lambda: "aegra")
    store = InMemoryStore()
    runtime = server_runtime(store)
    before = time.time()
    await schedule_extraction(runtime, "alice", TURN, "t1")
    await schedule_extraction(runtime, "alice", TURN, "t1")
    first, second = runs.created
    for run in runs.created:
        assert "after_seconds" not in run and "multitask_strategy" not in run  # Aegra ignores them
        assert run["input"]["not_before"] >= before + 20
        assert run["thread_id"] == memory_schedule.memory_thread_id("alice", "t1")
    assert first["input"]["turn_id"] != second["input"]["turn_id"]
    assert not await latest_turn_after_delay(store, "alice", "t1", first["input"]["turn_id"], None)
    assert await latest_turn_after_delay(store, "alice", "t1", second["input"]["turn_id"], None)
    # another conversation has its own latest turn
    assert await latest_turn_after_delay(store, "alice", "t2", first["input"]["turn_id"], None)


async def test_the_superseded_run_writes_nothing_and_the_latest_one_extracts_both_turns(runs, monkeypatch, model_slot):
    monkeypatch.setattr(server_api, "server_kind", lambda: "aegra")
    monkeypatch.setenv("MEMORY_EXTRACTION_DELAY", "0")
    store = InMemoryStore(index=store_index_config())  # extraction compares with memories by meaning
    runtime = server_runtime(store)
    colour = [{"role": "user", "content": "My favourite colour is teal"}, {"role": "assistant", "content": "Nice."}]
    await schedule_extraction(runtime, "alice", TURN, "t1")
    await schedule_extraction(runtime, "alice", colour, "t1")
    older, latest = (run["input"] for run in runs.created)
    model = ScriptedChatModel(
        responses=[
            {
                "tool_calls": [
                    {
                        "name": "MemoryExtraction",
                        "args": {"semantic": [{"text": "The user lives in Lisbon", "category": "fact"}]},
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "MemoryExtraction",
                        "args": {
                            "semantic": [{"text": "The user's favourite colour is teal", "category": "preference"}]
                        },
                    }
                ]
            },
        ]
    )
    model_slot["model"] = model
    config = {"configurable": {"thread_id": "m"}}
    context = Context(model="scripted:m", user_id="alice")
    memory_writer = memory_writer_builder.compile(store=store)
    skipped = await memory_writer.ainvoke(older, config, context=context)
    assert skipped["result"] == {"superseded": True} and model.calls == []
    done = await memory_writer.ainvoke(latest, config, context=context)
    # the superseded run's turn is not lost: the latest run extracts both, oldest first
    assert done["result"]["turns"] == 2 and done["result"]["pending"] == 0 and len(model.calls) == 2
    assert "Lisbon" in model.calls[0].messages[-1].content and "teal" in model.calls[1].messages[-1].content
    saved = {item.value.get("text") for item in await store.asearch(("memories", "alice"), limit=50)}
    assert {"The user lives in Lisbon", "The user's favourite colour is teal"} <= saved
