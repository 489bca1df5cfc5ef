"""A store without a vector index never answers a search by meaning with unscored items: the
search fails with `NoVectorIndex` (503 SEMANTIC_SEARCH_UNAVAILABLE over HTTP), keyword search
still works, and the recall note is left out of the turn (a warning in the log)."""

from __future__ import annotations

import logging

import httpx
import pytest
from langgraph.store.memory import InMemoryStore
from starlette.applications import Starlette
from starlette.routing import Route

from graphs.runtime.memory_recall import recall_for_turn
from server.errors import DatabaseUnavailableMiddleware
from store import knowledge, memory
from store.index import NoVectorIndex, store_index_config

DOCUMENT = "Feed the sourdough starter flour and water every day and keep it warm until it doubles."


async def _kb(store: InMemoryStore) -> None:
    await knowledge.create_kb(store, "notes", "kitchen notes")
    await knowledge.ingest_text(store, "notes", DOCUMENT, "sourdough.md")


@pytest.mark.parametrize("strategy", ["dense", "hybrid", "fusion"])
async def test_a_kb_search_by_meaning_without_an_index_is_an_error_not_an_empty_answer(strategy):
    store = InMemoryStore()
    await _kb(store)
    with pytest.raises(NoVectorIndex, match="no vector index"):
        await knowledge.retrieve(store, "notes", "How do I keep my bread leaven alive?", strategy=strategy)
    keyword = await knowledge.retrieve(store, "notes", "sourdough starter", strategy="keyword")
    assert keyword["retrieval_results"][0]["source"] == "sourdough.md"


async def test_the_same_search_with_the_index_finds_the_document():
    store = InMemoryStore(index=store_index_config())
    await _kb(store)
    found = await knowledge.retrieve(store, "notes", "How do I keep my bread leaven alive?", strategy="dense")
    assert found["retrieval_results"][0]["source"] == "sourdough.md" and found["retrieval_results"][0]["score"] > 0


async def test_memory_recall_without_an_index_is_an_error_and_the_recall_note_is_left_out(caplog):
    store = InMemoryStore()
    fact = {"text": "My daughter Lena plays the cello.", "category": "fact", "created_at": "2026-01-05T10:00:00+00:00"}
    await store.aput(("memories", "alice", "semantic"), "m1", fact)
    with pytest.raises(NoVectorIndex):
        await memory.recall(store, "alice", "What instrument does my kid practise?", "semantic")
    with caplog.at_level(logging.WARNING):
        note = (await recall_for_turn(store, "alice", "What instrument does my kid practise?", top_k=3)).note
    assert note == "" and "no vector index" in caplog.text


async def test_the_http_answer_is_503_semantic_search_unavailable():
    async def search(request):
        raise NoVectorIndex("Search by meaning is unavailable: the store has no vector index.")

    app = Starlette(routes=[Route("/search", search)])
    app.add_middleware(DatabaseUnavailableMiddleware)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        reply = await client.get("/search")
    assert reply.status_code == 503
    assert reply.json()["error"] == "SEMANTIC_SEARCH_UNAVAILABLE" and "no vector index" in reply.json()["message"]
