"""Knowledge-base hybrid search over a chat log (a document per turn) on the real Postgres store:
a question listing several things in the log's own words gets each thing's turn into its first
ten, as plain keyword search does, though each turn holds a small share of the question's words
(`store.floor.standouts`: each part of the question has its own first keyword hit)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from store import knowledge
from store.postgres import store

pytestmark = pytest.mark.integration

START = datetime(2023, 5, 1, 18, tzinfo=UTC)
ITEMS = [
    "Jo: we hired a camper van for the Highlands",
    "Jo: the conference in Lisbon was so boring",
    "Jo: a long weekend in Oslo, pricey but gorgeous",
    "Jo: ski week in the Alps, my legs are dead",
    "Jo: my cousin's wedding in Rome was beautiful",
]
SAM = ["ttyl", "lol", "same", "nah", "wait really", "omw", "ye", "mood"]
JO = ["tired", "so hungry", "on the train", "need a nap", "just woke up lol", "cooking rn"]
QUESTION = "What did Jo say about the camper van, the conference, the long weekend, the ski week and the wedding?"


def chat() -> list[tuple[datetime, str]]:
    """Ten sessions of small talk by both; one of Jo's ITEMS in each of five, Sam's small talk
    around it."""
    turns = []
    for session in range(10):
        at = START + timedelta(days=6 * session)
        texts = [f"Sam: {SAM[(session + k) % len(SAM)]} {session}" for k in range(3)]
        texts += [f"Jo: {JO[(session + k) % len(JO)]} {session}" for k in range(2)]
        if session % 2 == 0:
            texts.insert(2, ITEMS[session // 2])
        turns += [(at + timedelta(minutes=m), text) for m, text in enumerate(texts)]
    return turns


async def test_each_listed_thing_of_a_worded_question_comes_into_the_first_ten(pg_schema):
    async with store() as s:
        await knowledge.create_kb(s, "log", "a chat log")
        turns = chat()
        documents = [
            {"text": text, "source": f"turn:{n}", "title": f"turn {n}", "date": at}
            for n, (at, text) in enumerate(turns)
        ]
        await knowledge.ingest_texts(s, "log", documents, chunk_size=2000, chunk_overlap=0)
        wanted = {f"turn:{n}" for n, (_, text) in enumerate(turns) if text in ITEMS}
        keyword = await knowledge.retrieve(s, "log", QUESTION, strategy="keyword", top_k=10)
        assert wanted <= {r["source"] for r in keyword["retrieval_results"]}
        found = await knowledge.retrieve(s, "log", QUESTION, strategy="hybrid", top_k=10)
        ranked = [r["content"] for r in found["retrieval_results"]]
        assert wanted <= {r["source"] for r in found["retrieval_results"]}, ranked
