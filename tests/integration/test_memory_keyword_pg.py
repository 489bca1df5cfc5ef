"""Keyword search (BM25) over one user's memories on the real Postgres store: only the best rows'
values are read; the common lexemes a row holding only them could never rank are left out of the
candidates (MaxScore), checked, with the ranking of every candidate as the answer; in a large
namespace, a lexeme most rows hold finds nothing on its own; name resolution still sees it held."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from langgraph.store.memory import InMemoryStore

import store.sql.base as sql_base
import store.sql.memory as memory_sql
from store import memory
from store.backend import backend_for
from store.postgres import store
from store.sql import MEMORY_KEYWORD_SQL
from store.sql.base import _any_of
from tests.integration.conftest import statement_runs

pytestmark = pytest.mark.integration


async def record(s, texts: list[str]) -> str:
    for text in texts:
        await memory.record_chat_message(s, "u", "user", text, "t", speaker="Ann")
    return ".".join(memory.namespace("u", "chat"))


async def test_keyword_search_reads_only_the_values_of_the_results(pg_schema, pg_uri):
    """A common word matches thousands of a large user's messages: BM25 scores them all from the
    full-text table, but only the best rows' values are read from the store, one by one in score
    order until the limit (on 50,000 rows: 130 -> 60 ms, bench/results.md)."""
    async with store() as s:
        prefix = await record(s, [f"the kitten did thing number {i}" for i in range(40)])
        found = await memory.recall(s, "u", "kitten", "chat", top_k=5, record_access=False)
        assert len(found) == 5
        lexemes = await s.sql._lexemes("english", "kitten")
        stats = await s.sql.keyword_statistics(prefix, lexemes)
        ranked = await s.sql.memory_keyword_search(prefix, "kitten", "english", limit=5)
    assert stats["n"] == 40 and stats["dfs"] == [40]
    assert len(ranked) == 5 and [score for _, score in ranked] == sorted((score for _, score in ranked), reverse=True)
    params = {**memory_sql.keyword_params(prefix, lexemes, stats, limit=5), "tsquery": _any_of(lexemes)}
    with psycopg.connect(pg_uri, autocommit=True, options=f"-c search_path={pg_schema},public") as conn:
        plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN ANALYZE {MEMORY_KEYWORD_SQL}", params).fetchall())
    store_reads = [line for line in plan.splitlines() if " on store " in line]
    assert store_reads and all("loops=5)" in line for line in store_reads), plan  # 5 of the 40 matches


async def test_common_lexemes_are_left_out_of_the_candidates_and_the_ranking_stays(pg_schema, monkeypatch):
    """The word "zebra" in 2 of 40 messages, "number" in 18: for the best two of "zebra number",
    the rows holding only "number" (at most 0.22 of the query's weight) cannot rank above the zebra rows,
    so they are not scored; for the best five they can, and every candidate is scored. Either
    way the ranking is that of scoring every candidate."""
    monkeypatch.setattr(sql_base, "PRUNE_ROWS", 10)
    texts = [
        ("a zebra " if i < 2 else "") + (f"number {i} " if i % 2 == 0 and i < 36 else "") + f"plain note {i}"
        for i in range(40)
    ]
    async with store() as s:
        prefix = await record(s, texts)
        runs = statement_runs(s, monkeypatch, MEMORY_KEYWORD_SQL)
        pruned = {
            limit: await s.sql.memory_keyword_search(prefix, "zebra number", "english", limit=limit) for limit in (2, 5)
        }
        tsqueries = list(runs)
        monkeypatch.setattr(sql_base, "PRUNE_SHARE", 0.0)
        whole = {
            limit: await s.sql.memory_keyword_search(prefix, "zebra number", "english", limit=limit) for limit in (2, 5)
        }
    assert tsqueries == ["'zebra'", "'zebra'", "'number' | 'zebra'"]  # two, then a check that failed
    for limit in (2, 5):
        assert [(item.key, round(score, 12)) for item, score in pruned[limit]] == [
            (item.key, round(score, 12)) for item, score in whole[limit]
        ]
    assert len(pruned[5]) == 5 and sum("zebra" in item.value["text"] for item, _ in pruned[5]) == 2


async def test_a_lexeme_most_rows_hold_finds_nothing_alone_in_a_large_namespace(pg_schema, monkeypatch):
    """The word "kitten" in all 12 messages ranks them by length alone: with 12 rows counting as a large
    namespace, it finds nothing alone, and a row holding a rarer lexeme is found as before."""
    texts = [f"the kitten did thing {i}" + " mochi" * (i == 3) for i in range(12)]
    async with store() as s:
        prefix = await record(s, texts)
        small = await s.sql.memory_keyword_search(prefix, "kitten", "english", limit=5)
        monkeypatch.setattr(sql_base, "PRUNE_ROWS", 10)
        large = await s.sql.memory_keyword_search(prefix, "kitten", "english", limit=5)
        both = await s.sql.memory_keyword_search(prefix, "mochi kitten", "english", limit=5)
        alone = await s.sql.memory_keyword_search(prefix, "mochi", "english", limit=5)
    assert len(small) == 5 and large == []
    assert [item.value["text"] for item, _ in both] == ["the kitten did thing 3 mochi"]
    assert [item.key for item, _ in alone] == [item.key for item, _ in both]


async def test_the_words_memories_hold_are_told_however_common(pg_schema, monkeypatch):
    """Name resolution asks which of a query's words some memory holds (store/memory/hybrid.py
    `names`): a word every memory holds is held, in Postgres as in process."""
    monkeypatch.setattr(sql_base, "PRUNE_ROWS", 10)
    texts = [f"the kitten did thing {i}" + " Mochi" * (i == 3) for i in range(12)]
    words = ["kittens", "Mochi", "the", "zebra"]
    now = datetime.now(UTC)
    async with store() as s:
        await record(s, texts)
        in_postgres = await backend_for(s).memory_holds(memory.namespace("u", "chat"), words, now)
    in_memory = InMemoryStore()
    for text in texts:
        await memory.record_chat_message(in_memory, "u", "user", text, "t", speaker="Ann")
    in_process = await backend_for(in_memory).memory_holds(memory.namespace("u", "chat"), words, now)
    assert in_postgres == {"kittens", "Mochi"}
    assert in_process == {"Mochi"}  # no stemming in process: "kittens" is not "kitten"
