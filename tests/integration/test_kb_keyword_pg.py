"""Keyword search (BM25) over one knowledge base on the real Postgres store, as memories' runs: the
chunks of common words that a chunk holding only them could never rank are left unread (MaxScore),
checked, with the ranking of every candidate as the answer; in a large knowledge base a word most
chunks hold finds nothing on its own; another knowledge base's chunks never count."""

from __future__ import annotations

import pytest

import store.sql.base as sql_base
from store.postgres import store
from store.sql import KB_KEYWORD_SQL
from store.sql.knowledge import KB_TERM_COUNTS_SQL
from tests.integration.conftest import statement_runs

pytestmark = pytest.mark.integration

# "zebra" in 2 of 40 chunks, "number" in 18
ZOO = [
    ("a zebra " if i < 2 else "") + (f"number {i} " if i % 2 == 0 and i < 36 else "") + f"plain note {i}"
    for i in range(40)
]


async def index(s, kb: str, texts: list[str]) -> tuple[int, float]:
    """Write `texts` as `kb`'s chunks' full text; (chunks, mean length) as the registry keeps them."""
    await s.sql.index_kb_chunks(kb, [(f"{kb}-{i}", text) for i, text in enumerate(texts)], "english")
    return len(texts), sum(map(len, texts)) / len(texts)


async def test_common_lexemes_are_left_out_of_the_candidates_and_the_ranking_stays(pg_schema, monkeypatch):
    """For the best two chunks of "zebra number", the chunks holding only "number" (at most 0.22
    of the query's weight) cannot rank above the zebra chunks, so they are not scored; for the
    best five they can, and every candidate is scored. Either way the ranking is that of scoring
    every candidate, and another knowledge base full of both words changes nothing."""
    monkeypatch.setattr(sql_base, "PRUNE_ROWS", 10)
    async with store() as s:
        n, avgdl = await index(s, "zoo", ZOO)
        await index(s, "other", ["zebra number zebra"] * 30)
        counts = await s.sql._fetch(KB_TERM_COUNTS_SQL, {"scope": "zoo", "terms": ["'zebra'", "'number'"]})
        runs = statement_runs(s, monkeypatch, KB_KEYWORD_SQL)

        async def search(limit: int) -> list[tuple[str, float]]:
            return await s.sql.kb_keyword_search("zoo", "zebra number", "english", n=n, avgdl=avgdl, limit=limit)

        pruned = {limit: await search(limit) for limit in (2, 5)}
        tsqueries = list(runs)
        monkeypatch.setattr(sql_base, "PRUNE_SHARE", 0.0)
        whole = {limit: await search(limit) for limit in (2, 5)}
    assert counts[0]["dfs"] == [2, 18]  # the other knowledge base's 30 chunks are not counted
    assert tsqueries == ["'zebra'", "'zebra'", "'number' | 'zebra'"]  # two, then a check that failed
    for limit in (2, 5):
        assert [(key, round(score, 12)) for key, score in pruned[limit]] == [
            (key, round(score, 12)) for key, score in whole[limit]
        ]
    assert [key for key, _ in pruned[2]] == ["zoo-0", "zoo-1"]
    assert len(pruned[5]) == 5 and all(key.startswith("zoo-") for key, _ in pruned[5])


async def test_a_word_most_chunks_hold_finds_nothing_alone_in_a_large_knowledge_base(pg_schema, monkeypatch):
    """The word "kitten" in all 12 chunks ranks them by length alone: with 12 chunks counting as a
    large knowledge base, it finds nothing alone, and a chunk holding a rarer word is found as before."""
    texts = [f"the kitten did thing {i}" + " mochi" * (i == 3) for i in range(12)]
    async with store() as s:
        n, avgdl = await index(s, "cats", texts)

        async def search(query: str) -> list[str]:
            found = await s.sql.kb_keyword_search("cats", query, "english", n=n, avgdl=avgdl, limit=5)
            return [key for key, _ in found]

        small = await search("kitten")
        monkeypatch.setattr(sql_base, "PRUNE_ROWS", 10)
        large, both, alone = await search("kitten"), await search("mochi kitten"), await search("mochi")
    assert len(small) == 5 and large == []
    assert both == alone == ["cats-3"]
