"""The react graph records each turn and extracts memories in the background, debounced."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graphs.react.graph import builder
from graphs.runtime.context import Context
from graphs.runtime.memory_schedule import wait_for_local_extractions
from graphs.runtime.models import register_model_provider
from store import memory
from tests.fakes import ScriptedChatModel


def extraction(text: str) -> dict:
    return {
        "tool_calls": [
            {
                "name": "MemoryExtraction",
                "args": {
                    "episodic": [],
                    "semantic": [{"text": text, "category": "preference", "importance": 0.8}],
                    "profile_updates": {},
                },
            }
        ]
    }


@pytest.fixture
def setup(monkeypatch, store):
    # Long enough that nothing fires on its own during a test; tests flush pending extractions.
    monkeypatch.setenv("MEMORY_EXTRACTION_DELAY", "600")
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    slot = {}
    register_model_provider("scripted", lambda name, **kw: slot["model"])
    return graph, store, slot


async def turn(graph, text, user="alice", thread="t1", **context):
    return await graph.ainvoke(
        {"messages": [HumanMessage(text)]},
        {"configurable": {"thread_id": thread}},
        context=Context(model="scripted:x", user_id=user, **{"tools": ["calculator"], **context}),
    )


async def test_turn_is_recorded_and_memories_extracted_after_the_delay(setup):
    graph, store, slot = setup
    slot["model"] = model = ScriptedChatModel(responses=["Noted!", extraction("The user loves green tea")])
    await turn(graph, "I love green tea.")
    chat = await store.asearch(memory.namespace("alice", "chat"), limit=10)
    assert sorted(c.value["text"] for c in chat) == ["I love green tea.", "Noted!"]
    assert await store.asearch(memory.namespace("alice", "semantic")) == []  # not yet: debounced
    await wait_for_local_extractions(now=True)
    saved = await store.asearch(memory.namespace("alice", "semantic"))
    assert [s.value["text"] for s in saved] == ["The user loves green tea"]
    assert len(model.calls) == 2
    assert await store.asearch(memory.namespace("bob", "semantic")) == []


async def test_a_newer_turn_supersedes_a_pending_extraction(setup):
    graph, store, slot = setup
    slot["model"] = model = ScriptedChatModel(responses=["First.", "Second.", extraction("The user moved to Lisbon")])
    await turn(graph, "I live in Porto.")
    await turn(graph, "Actually I moved to Lisbon.")
    await wait_for_local_extractions(now=True)
    assert len(model.calls) == 3  # two answers, one extraction
    assert "Lisbon" in model.calls[-1].messages[-1].text
    assert model.remaining == 0
    chat = await store.asearch(memory.namespace("alice", "chat"), limit=10)
    assert len(chat) == 4  # every message is still recorded


async def test_remember_off_writes_nothing(setup):
    graph, store, slot = setup
    slot["model"] = ScriptedChatModel(responses=["ok"])
    await turn(graph, "secret", remember=False)
    await wait_for_local_extractions(now=True)
    assert await store.alist_namespaces(prefix=("memories",)) == []


async def test_a_memory_saved_in_one_thread_is_found_from_another_despite_a_wrong_category(setup):
    graph, store, slot = setup
    tools = ["save_memory", "search_semantic_memory"]
    slot["model"] = model = ScriptedChatModel(
        responses=[
            {"tool_calls": [{"name": "save_memory", "args": {"text": "The user's favourite colour is teal"}}]},
            "Saved.",
            {
                "tool_calls": [
                    {
                        "name": "search_semantic_memory",
                        "args": {"query": "favourite colour", "category": "fact", "top_k": 1},
                    }
                ]
            },
            "Teal.",
        ]
    )
    await turn(graph, "My favourite colour is teal, remember it.", thread="a", tools=tools, remember=False)
    await turn(graph, "What is my favourite colour?", thread="b", tools=tools, remember=False)
    searched = model.calls[3].messages[-1]
    assert searched.type == "tool" and "teal" in searched.text
    assert [s.value["category"] for s in await store.asearch(memory.namespace("alice", "semantic"))] == ["other"]
