"""Memory extraction's debounce on both servers: `after_seconds` + rollback where the server has
them (`langgraph_api`), and on Aegra a run that waits itself and extracts only while its turn is
the conversation's latest (graphs/runtime/memory_schedule.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from langgraph.runtime import ServerInfo
from langgraph.store.base import Item
from langgraph.store.memory import InMemoryStore

from graphs.memory_writer.graph import builder as memory_writer_builder
from graphs.memory_writer.pending import add_pending_turn, next_batch, pending_turns
from graphs.runtime import memory_schedule
from graphs.runtime.context import Context
from graphs.runtime.memory_schedule import latest_turn_after_delay, schedule_extraction
from graphs.runtime.models import register_model_provider
from store.index import store_index_config
from tests.fakes import ScriptedChatModel
from tools import server_api

NOW = datetime(2026, 1, 1, tzinfo=UTC)
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


def lisbon_extraction() -> dict:
    semantic = [{"text": "The user lives in Lisbon", "category": "fact"}]
    return {"tool_calls": [{"name": "MemoryExtraction", "args": {"semantic": semantic}}]}


class Threads:
    def __init__(self, status: str) -> None:
        self.status = status

    async def get(self, thread_id):
        return {"thread_id": thread_id, "status": self.status}


@pytest.fixture
def busy(monkeypatch, runs):
    """The in-process server client: the conversation has a run in progress."""
    threads = Threads("busy")
    client = SimpleNamespace(runs=runs, threads=threads)
    monkeypatch.setattr(server_api, "server_client", lambda act_as=None: client)
    monkeypatch.setattr(server_api, "server_kind", lambda: "langgraph")
    return threads


def writer_runtime_config():
    return {"configurable": {"thread_id": "m"}}, Context(model="scripted:m", user_id="alice")


async def test_a_writer_run_yields_to_a_busy_conversation_and_extracts_once_it_is_idle(
    busy, runs, model_slot, monkeypatch
):
    monkeypatch.setenv("MEMORY_WRITER_YIELD_RETRIES", "2")
    store = InMemoryStore(index=store_index_config())
    await schedule_extraction(server_runtime(store), "alice", TURN, "t1")
    scheduled = runs.created[-1]
    model_slot["model"] = model = ScriptedChatModel(responses=[lisbon_extraction()])
    memory_writer = memory_writer_builder.compile(store=store)
    _, context = writer_runtime_config()
    config = {"configurable": {"thread_id": "m", "graph_id": "memory_writer"}}  # as the server runs it

    first = await memory_writer.ainvoke(scheduled["input"], config, context=context)
    assert first["result"] == {"deferred": 1} and model.calls == []
    again = runs.created[-1]  # it re-scheduled itself after the delay, behind itself
    assert again["multitask_strategy"] == "enqueue" and again["after_seconds"] == 20
    assert again["input"]["deferrals"] == 1 and again["thread_id"] == scheduled["thread_id"]
    second = await memory_writer.ainvoke(again["input"], config, context=context)
    assert second["result"] == {"deferred": 2}
    made = len(runs.created)
    gave_up = await memory_writer.ainvoke(runs.created[-1]["input"], config, context=context)
    assert gave_up["result"] == {"yielded": True, "deferrals": 2} and len(runs.created) == made
    assert model.calls == []  # never extracted while the user's run was in progress
    assert len(await pending_turns(store, "alice", "t1")) == 1  # the turn still waits

    busy.status = "idle"
    done = await memory_writer.ainvoke(scheduled["input"], config, context=context)
    assert done["result"]["turns"] == 1 and len(model.calls) == 1
    assert await pending_turns(store, "alice", "t1") == []


def pending(key: str, chars: int) -> Item:
    turn = [{"role": "user", "content": "x" * chars}]
    return Item(value={"messages": turn}, key=key, namespace=("p",), created_at=NOW, updated_at=NOW)


def test_a_run_takes_the_oldest_turns_within_its_bounds(monkeypatch):
    items = [pending(f"{i}", 100) for i in range(6)]
    assert [i.key for i in next_batch(items, max_turns=3, max_chars=10_000)] == ["0", "1", "2"]
    assert [i.key for i in next_batch(items, max_turns=5, max_chars=250)] == ["0", "1"]
    # a turn longer than the budget is still extracted, alone
    assert [i.key for i in next_batch([pending("big", 5000), *items], max_turns=5, max_chars=1000)] == ["big"]


async def test_a_run_extracts_at_most_its_turns_and_leaves_the_rest_for_the_next(model_slot, monkeypatch):
    monkeypatch.setenv("MEMORY_WRITER_MAX_TURNS", "2")
    store = InMemoryStore(index=store_index_config())
    for _ in range(3):
        await add_pending_turn(store, "alice", "t1", TURN, chat_ids=["c"])
    model_slot["model"] = model = ScriptedChatModel(responses=[lisbon_extraction()] * 3)
    memory_writer = memory_writer_builder.compile(store=store)
    config, context = writer_runtime_config()
    first = await memory_writer.ainvoke({"thread_id": "t1"}, config, context=context)
    assert (first["result"]["turns"], first["result"]["pending"], len(model.calls)) == (2, 1, 2)
    second = await memory_writer.ainvoke({"thread_id": "t1"}, config, context=context)
    assert (second["result"]["turns"], second["result"]["pending"], len(model.calls)) == (1, 0, 3)


async def test_a_turn_whose_extraction_fails_waits_for_the_next_run_then_is_dropped(model_slot):
    store = InMemoryStore(index=store_index_config())
    await add_pending_turn(store, "alice", "t1", TURN)
    model_slot["model"] = ScriptedChatModel(responses=["not json"] * 8)
    memory_writer = memory_writer_builder.compile(store=store)
    config, context = writer_runtime_config()
    with pytest.raises(Exception, match="MemoryExtraction|structured|valid"):
        await memory_writer.ainvoke({"thread_id": "t1"}, config, context=context)
    (waiting,) = await pending_turns(store, "alice", "t1")
    assert waiting.value["failures"] == 1
    with pytest.raises(Exception, match="MemoryExtraction|structured|valid"):
        await memory_writer.ainvoke({"thread_id": "t1"}, config, context=context)
    assert await pending_turns(store, "alice", "t1") == []


async def test_on_aegra_a_writer_run_that_finds_the_conversation_busy_ends_at_once(busy, runs, model_slot, monkeypatch):
    monkeypatch.setattr(server_api, "server_kind", lambda: "aegra")
    monkeypatch.setenv("MEMORY_EXTRACTION_DELAY", "0")
    store = InMemoryStore(index=store_index_config())
    await schedule_extraction(server_runtime(store), "alice", TURN, "t1")
    model_slot["model"] = model = ScriptedChatModel(responses=[])
    memory_writer = memory_writer_builder.compile(store=store)
    _, context = writer_runtime_config()
    config = {"configurable": {"thread_id": "m", "graph_id": "memory_writer"}}
    made = len(runs.created)
    done = await memory_writer.ainvoke(runs.created[-1]["input"], config, context=context)
    assert done["result"] == {"yielded": True, "deferrals": 0} and len(runs.created) == made
    assert model.calls == [] and len(await pending_turns(store, "alice", "t1")) == 1


async def test_the_writer_bounds_its_models_answer_by_its_own_setting(model_slot, monkeypatch):
    """A small model looping in its JSON stops at MEMORY_WRITER_MAX_TOKENS; the chat's own
    bound (AGENT_MAX_TOKENS, the context's `max_tokens`) is for answers, not extractions."""
    monkeypatch.setenv("MEMORY_WRITER_MAX_TOKENS", "512")
    asked: dict = {}
    scripted = ScriptedChatModel(responses=[lisbon_extraction()])
    register_model_provider("scripted", lambda name, **kw: asked.update(kw) or scripted)
    store = InMemoryStore(index=store_index_config())
    await add_pending_turn(store, "alice", "t1", TURN, chat_ids=["c"])
    config, _ = writer_runtime_config()
    context = Context(model="scripted:m", user_id="alice", max_tokens=64)
    done = await memory_writer_builder.compile(store=store).ainvoke({"thread_id": "t1"}, config, context=context)
    assert done["result"]["turns"] == 1 and asked["max_tokens"] == 512
