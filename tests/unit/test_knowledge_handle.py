"""Handles: a knowledge base opened once, its signals gathered once and ranked per strategy; a
user's memory space; the embedder keeping query vectors."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.memory import InMemoryStore

from graphs.router.evidence import merge_runs
from store import knowledge, memory
from store.embeddings import QueryCachedEmbeddings, get_embeddings
from tests.unit.test_knowledge import KB_DATA


@pytest.fixture(scope="module")
async def kb_store():
    store = InMemoryStore(index={"dims": 384, "embed": get_embeddings(), "fields": ["content"]})
    await knowledge.create_kb(store, "demo", "fixture documents", owner="alice")
    await knowledge.ingest_path(store, "demo", KB_DATA)
    return store


async def test_open_checks_the_reader_once_and_the_handle_searches_as_retrieve_does(kb_store):
    handle = await knowledge.open(kb_store, "demo", reader="alice")
    assert handle.name == "demo" and handle.entry["owner"] == "alice" and handle.namespace == ("kb", "demo")
    with pytest.raises(knowledge.KBUnknownError, match="Unknown knowledge base 'demo'"):
        await knowledge.open(kb_store, "demo", reader="bob")
    question = "What does fault code ZX-4480 mean?"
    for strategy in knowledge.STRATEGIES:
        searched = await handle.search(question, strategy=strategy, top_k=3)
        retrieved = await knowledge.retrieve(kb_store, "demo", question, strategy=strategy, top_k=3, reader="alice")
        assert searched == retrieved and searched["strategy"] == strategy and searched["retrieval_results"]


async def test_one_gather_ranks_every_strategy_as_its_own_search_does(kb_store):
    handle = await knowledge.open(kb_store, "demo")
    question = "Which fault code means the Float Switch is stuck?"
    gathered = await handle.gather(question, top_k=4, strategies=knowledge.STRATEGIES)
    for strategy in knowledge.STRATEGIES:
        alone = await handle.search(question, strategy=strategy, top_k=4)
        ranked = knowledge.rank(gathered, strategy)
        assert [r["id"] for r in ranked["retrieval_results"]] == [r["id"] for r in alone["retrieval_results"]], strategy
    text_only = await handle.gather(question, top_k=4, strategies={"dense", "keyword"})
    assert text_only.graph is None
    with pytest.raises(ValueError, match="gathered for dense, keyword, not 'graph'"):
        knowledge.rank(text_only, "graph")
    with pytest.raises(ValueError, match="Unknown strategy 'vector'"):
        await handle.gather(question, strategies={"vector"})


async def test_gathered_signals_travel_as_plain_data(kb_store):
    handle = await knowledge.open(kb_store, "demo")
    gathered = await handle.gather("Who keeps the lighthouse?", top_k=3, strategies={"hybrid", "fusion"})
    data = json.loads(json.dumps(gathered.as_data()))  # JSON types only: what a checkpoint keeps
    back = knowledge.Gathered.from_data(data)
    assert back.policy == gathered.policy and back.strategies == gathered.strategies
    for strategy in ("hybrid", "fusion"):
        assert knowledge.rank(back, strategy) == knowledge.rank(gathered, strategy)


def _run(agent_type, strategy, ids):
    return {
        "kb": "garden",
        "agent_type": agent_type,
        "strategy": strategy,
        "retrieval_results": [
            {"id": i, "content": f"text {i}", "source": f"/d/{i}.md", "title": i, "score": 1 / (n + 1)}
            for n, i in enumerate(ids)
        ],
    }


def test_the_merge_keeps_the_order_of_the_worker_that_covers_the_others():
    runs = [
        _run("hybrid_agent", "hybrid", ["a", "b", "c"]),
        _run("dense_agent", "dense", ["d", "e", "a"]),
        _run("keyword_agent", "keyword", ["f", "a", "g"]),
    ]
    merged = merge_runs(runs, top_k=3)
    assert [s["chunk_id"] for s in merged] == ["a", "b", "c"]
    assert merged[0]["found_by"] == ["hybrid_agent", "dense_agent", "keyword_agent"] and merged[0]["score"] == 1.0
    # dense and keyword alone: nothing covers the other, the lists are fused
    fused = merge_runs(runs[1:], top_k=3)
    assert [s["chunk_id"] for s in fused][0] == "a" and {s["chunk_id"] for s in fused} <= {"a", "d", "e", "f", "g"}
    # fusion covers hybrid and graph
    with_fusion = [_run("graph_agent", "graph", ["x", "y"]), _run("fusion_agent", "fusion", ["y", "a"]), *runs]
    assert [s["chunk_id"] for s in merge_runs(with_fusion, top_k=5)] == ["y", "a"]


def test_the_merge_shows_a_message_sent_in_parts_whole():
    runs = [_run("hybrid_agent", "hybrid", ["a", "b"])]
    parts = [
        {"id": "a", "source": "turn:1", "content": "Tom: Mochi"},
        {"id": "p", "source": "turn:2", "content": "Tom: wait really"},
    ]
    runs[0]["retrieval_results"][0]["parts"] = parts
    merged = merge_runs(runs, top_k=2)
    assert merged[0]["content"] == "Tom: Mochi\nTom: wait really" and merged[0]["parts"] == parts
    assert merged[1]["content"] == "text b" and "parts" not in merged[1]


async def test_a_memory_space_acts_for_its_user_with_its_settings(store):
    from store.memory.config import memory_config

    with pytest.raises(ValueError):
        memory.open(store, "")
    alice = memory.open(store, "alice")
    bob = memory.open(store, "bob", config=memory_config())
    await alice.save("semantic", "Alice's favourite tea is genmaicha", category="preference")
    await alice.record_chat_message("user", "I moved to Porto last spring.", "t1")
    assert [m["text"] for m in await alice.recall("which tea does she like", "semantic")] == [
        "Alice's favourite tea is genmaicha"
    ]
    assert await bob.recall("which tea does she like", "semantic") == []
    assert [m["text"] for m in await alice.recall("where does she live", "chat")] == ["I moved to Porto last spring."]
    assert await alice.forget() >= 2 and await alice.recall("tea", "semantic") == []


class CountingEmbeddings(Embeddings):
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed_documents(self, texts):
        self.calls.append(list(texts))
        return [[float(len(t)), 1.0] for t in texts]

    def embed_query(self, text):
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts):
        self.calls.append(list(texts))
        await asyncio.sleep(0.01)
        return [[float(len(t)), 1.0] for t in texts]


async def test_the_embedder_embeds_a_text_once_even_while_it_is_in_flight():
    model = CountingEmbeddings()
    cached = QueryCachedEmbeddings(model, limit=2)
    cached.aembed_ahead("where is the pump")
    first, second = await asyncio.gather(
        cached.aembed_query("where is the pump"), cached.aembed_query("where is the pump")
    )
    assert first == second and model.calls == [["where is the pump"]]
    assert cached.embed_query("where is the pump") == first and len(model.calls) == 1
    await cached.aembed_documents(["one", "two"])  # a batch is not cached
    await cached.aembed_documents(["one", "two"])
    assert model.calls[1:] == [["one", "two"], ["one", "two"]]
    for text in ("a", "b", "c"):  # bounded: the least recently used is embedded again
        await cached.aembed_query(text)
    await cached.aembed_query("where is the pump")
    assert model.calls[-1] == ["where is the pump"]


CHAT_LOG = [
    "Nate: ok",
    "Joanna: Did you see the new bakery on Elm Street? Their sourdough is amazing and the owner is so kind.",
    "Nate: lol",
    "Joanna: I went back twice this week for the cinnamon rolls.",
    "Nate: haha sure",
    "Joanna: We should go together on Saturday morning.",
    "Nate: I tried the bakery yesterday, the rye bread was great",
    "Nate: yes",
]


async def test_a_chat_log_is_ranked_on_keyword_hits_without_the_names_the_question_holds():
    """In a chat log every line of a person opens with their name: the question's name makes
    plain keyword search favour that person's shortest lines. Hybrid ranking fuses a keyword
    search of the question without its names (the name bonus weighs them); the keyword strategy
    stays plain keyword search."""
    store = InMemoryStore(index={"dims": 384, "embed": get_embeddings(), "fields": ["content"]})
    await knowledge.create_kb(store, "log", "a chat")
    documents = [{"text": line, "source": f"turn-{i}"} for i, line in enumerate(CHAT_LOG)]
    await knowledge.ingest_texts(store, "log", documents, chunk_size=2000, chunk_overlap=0)
    handle = await knowledge.open(store, "log")
    question = "What did Nate think of the bakery?"
    gathered = await handle.gather(question, top_k=5, strategies={"keyword", "hybrid"})
    signals = gathered.signals
    assert signals.people and signals.keyword_nameless is not None
    nameless = [hit.value["content"] for hit, _ in signals.keyword_nameless]
    plain = [hit.value["content"] for hit, _ in signals.keyword]
    assert all("bakery" in text for text in nameless) and len(nameless) == 2
    assert any("bakery" not in text for text in plain)  # Nate's lines that match his name only
    keyword = knowledge.rank(gathered, "keyword")["retrieval_results"]
    assert [r["content"] for r in keyword] == list(dict.fromkeys(plain))[:5]
    hybrid = knowledge.rank(gathered, "hybrid")["retrieval_results"]
    assert "bakery" in hybrid[0]["content"]
    back = knowledge.Gathered.from_data(json.loads(json.dumps(gathered.as_data())))
    assert back.signals.keyword_nameless is not None
    assert [h.key for h, _ in back.signals.keyword_nameless] == [h.key for h, _ in signals.keyword_nameless]
    assert knowledge.rank(back, "hybrid") == knowledge.rank(gathered, "hybrid")
    unnamed = await handle.gather("Which bread is good?", top_k=5, strategies={"hybrid"})
    assert unnamed.signals.keyword_nameless is None  # nobody named: one keyword search
