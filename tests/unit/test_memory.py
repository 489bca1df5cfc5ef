"""Long-term memory on InMemoryStore with the real local embeddings: scoring, dedupe, validation,
profile, listings, and the memory tools run through LangGraph's ToolNode (real ToolRuntime)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from store import memory
from store.memory import (
    MemoryConfig,
    access_boost,
    freshness,
    memory_config,
    recency_factor,
    relevance,
    weighted_score,
)
from tools.errors import ToolError, ToolInputError
from tools.memory import MEMORY_TOOLS

NOW = datetime(2025, 7, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def frozen_now(monkeypatch):
    monkeypatch.setattr(memory.times, "utc_now", lambda: NOW)
    return NOW


@pytest.fixture(autouse=True)
def weighted_dense_scoring(monkeypatch):
    """These tests check the weighted formula on the store's own similarity: dense candidates,
    weighted ranking (hybrid search and the plain default: tests/unit/test_memory_hybrid.py)."""
    monkeypatch.setenv("MEMORY_SEARCH", "dense")
    monkeypatch.setenv("MEMORY_SCORING", "weighted")


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


async def stored(store, user_id: str, kind: str) -> list:
    return await store.asearch(memory.namespace(user_id, kind), limit=100)


# ---------------------------------------------------------------- scoring math


def test_recency_halves_at_the_half_life():
    assert recency_factor(0, 30) == 1.0
    assert recency_factor(30, 30) == pytest.approx(0.5)
    assert recency_factor(60, 30) == pytest.approx(0.25)
    assert recency_factor(7, 7) == pytest.approx(0.5)
    assert recency_factor(-5, 30) == 1.0  # a timestamp in the future counts as fresh


def test_weighted_score_follows_the_formula_and_its_weights():
    config = MemoryConfig()
    base = weighted_score(0.8, 0.5, 0.5, 0, config)
    assert base == pytest.approx(0.6 * 0.8 + 0.2 * 0.5 + 0.1 * 0.5 + 0.1 * 0)
    assert weighted_score(0.8, 0.9, 0.5, 0, config) - base == pytest.approx(0.2 * 0.4)
    assert weighted_score(0.8, 0.5, 0.5, 3, config) - base == pytest.approx(0.1 * 0.3)
    assert access_boost(5, config) == access_boost(50, config) == pytest.approx(0.5)
    heavy_recency = MemoryConfig(weight_similarity=0.0, weight_importance=0.0, weight_recency=1.0, weight_access=0.0)
    assert weighted_score(0.9, 0.9, 0.25, 9, heavy_recency) == pytest.approx(0.25)


def test_relevance_is_similarity_relative_to_the_best_candidate():
    assert relevance(0.6, 0.6) == 1.0
    assert relevance(0.3, 0.6) == pytest.approx(0.5)
    assert relevance(-0.1, 0.6) == 0.0
    assert relevance(0.2, 0.0) == 0.0


def test_freshness_decays_by_kind():
    config = MemoryConfig()
    assert freshness("episodic", 180, 0, config) == pytest.approx(0.5)  # events: by age
    assert freshness("semantic", 300, 0, config) == 1.0  # a durable fact does not age
    assert freshness("semantic", 300, 30, config) == pytest.approx(0.5)  # 30 days outdated
    assert freshness("semantic", 300, 30, MemoryConfig(half_life_days=7)) == pytest.approx(0.5)
    assert freshness("chat", 300, 0, config) == 1.0
    chat_decay = MemoryConfig(chat_half_life_days=10)
    assert freshness("chat", 10, 0, chat_decay) == pytest.approx(0.5)


def test_config_reads_the_environment_at_call_time(monkeypatch):
    assert (memory_config().half_life_days, memory_config().fact_half_life_days) == (180, 30)
    monkeypatch.setenv("MEMORY_HALF_LIFE_DAYS", "7")
    monkeypatch.setenv("MEMORY_FACT_HALF_LIFE_DAYS", "5")
    monkeypatch.setenv("MEMORY_WEIGHT_SIMILARITY", "0.9")
    monkeypatch.setenv("MEMORY_TTL_DAYS", "0")
    config = memory_config()
    assert (config.half_life_days, config.fact_half_life_days) == (7, 5)
    assert (config.weight_similarity, config.ttl_days) == (0.9, None)
    monkeypatch.setenv("MEMORY_DEDUPE_THRESHOLD", "high")
    with pytest.raises(ValueError, match="MEMORY_DEDUPE_THRESHOLD"):
        memory_config()


async def test_weighted_and_plain_order_differ_when_importance_and_age_disagree(store, monkeypatch):
    monkeypatch.setenv("MEMORY_SEARCH", "dense")  # the formula on the store's own similarity
    old = await memory.save_memory(
        store,
        "u",
        "episodic",
        "The user went hiking in the Alps with Tom",
        importance=0.1,
        now=ago(120),
    )
    new = await memory.save_memory(
        store,
        "u",
        "episodic",
        "The user went on a mountain trip in Austria",
        importance=0.9,
        now=ago(1),
    )
    query = "hiking in the Alps"
    plain = await memory.recall(store, "u", query, "episodic", scoring="plain", now=NOW, record_access=False)
    weighted = await memory.recall(store, "u", query, "episodic", now=NOW, record_access=False)

    assert [r["id"] for r in plain] == [old["id"], new["id"]]
    assert [r["id"] for r in weighted] == [new["id"], old["id"]]
    assert plain[0]["score"] == plain[0]["similarity"]
    top, best = weighted[0], weighted[1]["similarity"]
    expected = weighted_score(relevance(top["similarity"], best), 0.9, recency_factor(1, 180), 0, MemoryConfig())
    assert top["score"] == pytest.approx(expected)


async def test_a_newer_statement_of_a_fact_supersedes_the_older_one(store, monkeypatch):
    monkeypatch.setenv("MEMORY_SEARCH", "dense")  # the formula on the store's own similarity
    berlin = await memory.save_memory(
        store, "u", "semantic", "The user lives in Berlin.", category="fact", now=ago(200)
    )
    munich = await memory.save_memory(store, "u", "semantic", "The user lives in Munich.", category="fact", now=ago(20))
    friend = await memory.save_memory(
        store, "u", "semantic", "The user's friend Priya lives in Munich.", category="relationship", now=ago(1)
    )
    query = "Which city does the user live in?"

    def ask(scoring="weighted"):
        return memory.recall(store, "u", query, "semantic", scoring=scoring, now=NOW, record_access=False)

    plain, weighted = await ask("plain"), await ask()
    assert [r["id"] for r in plain] == [berlin["id"], munich["id"], friend["id"]]
    assert weighted[0]["id"] == munich["id"]
    scores = {r["id"]: r["score"] for r in weighted}
    best = plain[0]["similarity"]
    # Munich is the newest comparable fact: full freshness; Berlin is 180 days older than it.
    assert scores[munich["id"]] == pytest.approx(
        weighted_score(relevance(plain[1]["similarity"], best), 0.5, 1.0, 0, MemoryConfig())
    )
    assert scores[berlin["id"]] == pytest.approx(weighted_score(1.0, 0.5, recency_factor(180, 30), 0, MemoryConfig()))
    gap = plain[0]["similarity"] - plain[1]["similarity"]
    assert 0.03 < gap < 0.1  # within the default MEMORY_SUPERSEDE_MARGIN
    monkeypatch.setenv("MEMORY_SUPERSEDE_MARGIN", "0.03")  # Munich no longer counts as comparable
    assert [r["id"] for r in await ask()] == [berlin["id"], munich["id"], friend["id"]]


async def test_a_durable_fact_does_not_lose_to_age_alone(store):
    allergy = await memory.save_memory(
        store, "u", "semantic", "The user is allergic to penicillin.", category="fact", importance=0.9, now=ago(300)
    )
    await memory.save_memory(
        store, "u", "semantic", "The user took an aspirin for a headache.", category="fact", importance=0.9, now=ago(1)
    )
    results = await memory.recall(
        store, "u", "Does the user have any drug allergies?", "semantic", now=NOW, record_access=False
    )
    assert results[0]["id"] == allergy["id"]
    assert results[0]["score"] == pytest.approx(weighted_score(1.0, 0.9, 1.0, 0, MemoryConfig()))


async def test_chat_recall_returns_each_text_once_and_decays_only_when_configured(store, monkeypatch):
    concerts = [
        await memory.record_chat_message(store, "u", "user", "Went to a concert after work.", "t", now=ago(days))
        for days in (50, 5, 20)
    ]
    radiohead = await memory.record_chat_message(store, "u", "user", "I saw Radiohead live with Sam.", "t", now=ago(60))
    query = "Which band did the user see?"

    def ask(scoring="weighted"):
        return memory.recall(store, "u", query, "chat", top_k=2, scoring=scoring, now=NOW, record_access=False)

    plain = await ask("plain")
    assert {r["id"] for r in plain} <= {c["id"] for c in concerts}  # the store's duplicates
    weighted = await ask()
    assert [r["id"] for r in weighted] == [concerts[1]["id"], radiohead["id"]]  # newest copy
    best = weighted[0]["similarity"]
    share = relevance(weighted[1]["similarity"], best)
    assert weighted[1]["score"] == pytest.approx(weighted_score(share, 0.5, 1.0, 0, MemoryConfig()))
    monkeypatch.setenv("MEMORY_CHAT_HALF_LIFE_DAYS", "10")
    decayed = await ask()
    assert decayed[1]["score"] == pytest.approx(weighted_score(share, 0.5, recency_factor(60, 10), 0, MemoryConfig()))


async def test_half_life_setting_changes_the_ranking(store, monkeypatch):
    await memory.save_memory(store, "u", "episodic", "The user drank green tea at a tea house", now=ago(40))
    await memory.save_memory(store, "u", "episodic", "The user had black coffee at a cafe", now=ago(0))
    monkeypatch.setenv("MEMORY_WEIGHT_SIMILARITY", "0")
    monkeypatch.setenv("MEMORY_WEIGHT_IMPORTANCE", "0")
    monkeypatch.setenv("MEMORY_HALF_LIFE_DAYS", "20")
    results = await memory.recall(store, "u", "green tea", "episodic", now=NOW, record_access=False)
    assert [r["text"] for r in results] == [
        "The user had black coffee at a cafe",
        "The user drank green tea at a tea house",
    ]
    assert results[1]["score"] == pytest.approx(0.1 * 0.25)


async def test_a_query_that_names_its_time_is_not_decayed(store, monkeypatch):
    """'In May 2025' asks about then: the 41-day-old memory keeps freshness 1.0, so similarity
    decides; the same query without the date lets age demote it."""
    tea = await memory.save_memory(store, "u", "episodic", "The user drank green tea at a tea house", now=ago(41))
    coffee = await memory.save_memory(store, "u", "episodic", "The user had a drink at a cafe", now=ago(0))
    monkeypatch.setenv("MEMORY_WEIGHT_IMPORTANCE", "0")
    monkeypatch.setenv("MEMORY_WEIGHT_RECENCY", "1")
    monkeypatch.setenv("MEMORY_HALF_LIFE_DAYS", "10")

    async def ask(query):
        return await memory.recall(store, "u", query, "episodic", now=NOW, record_access=False)

    undated = await ask("what did the user drink at a tea house")
    assert [r["id"] for r in undated] == [coffee["id"], tea["id"]]
    dated = await ask("what did the user drink at a tea house in May 2025")
    assert [r["id"] for r in dated] == [tea["id"], coffee["id"]]
    assert dated[1]["score"] == pytest.approx(0.6 * relevance(dated[1]["similarity"], dated[0]["similarity"]) + 1.0)


async def test_access_count_raises_the_rank_of_frequently_recalled_memories(store, monkeypatch):
    monkeypatch.setenv("MEMORY_WEIGHT_SIMILARITY", "0")
    a = await memory.save_memory(store, "u", "semantic", "The user plays the piano", category="skill", now=NOW)
    b = await memory.save_memory(store, "u", "semantic", "The user speaks Spanish", category="skill", now=NOW)
    for _ in range(3):
        await memory.recall(store, "u", "plays the piano", "semantic", top_k=1, scoring="plain", now=NOW)
    results = await memory.recall(store, "u", "Spanish", "semantic", now=NOW, record_access=False)
    assert [r["id"] for r in results] == [a["id"], b["id"]]
    assert results[0]["access_count"] == 3 and results[1]["access_count"] == 0


# ---------------------------------------------------------------- save, dedupe, access


async def test_near_duplicate_updates_instead_of_creating(store):
    first = await memory.save_memory(
        store, "u", "semantic", "The user lives in Berlin.", category="fact", importance=0.7, now=ago(10)
    )
    second = await memory.save_memory(
        store, "u", "semantic", "The user lives in Berlin", category="fact", importance=0.4, thread_id="t2", now=NOW
    )

    assert first["action"] == "created" and second["action"] == "updated"
    assert second["id"] == first["id"]
    assert second["previous_text"] == "The user lives in Berlin."
    assert second["similarity"] >= 0.9
    items = await stored(store, "u", "semantic")
    assert len(items) == 1
    value = items[0].value
    assert value["text"] == "The user lives in Berlin"
    assert value["importance"] == 0.7
    assert value["created_at"] == first["created_at"]
    assert value["updated_at"] == NOW.isoformat(timespec="microseconds")
    assert value["thread_id"] == "t2"


async def test_dedupe_respects_category_kind_and_threshold(store, monkeypatch):
    await memory.save_memory(store, "u", "semantic", "The user lives in Berlin", category="fact")
    other_category = await memory.save_memory(store, "u", "semantic", "The user lives in Berlin", category="preference")
    other_kind = await memory.save_memory(store, "u", "episodic", "The user lives in Berlin")
    different = await memory.save_memory(store, "u", "semantic", "The user works as a nurse", category="fact")
    assert {other_category["action"], other_kind["action"], different["action"]} == {"created"}
    monkeypatch.setenv("MEMORY_DEDUPE_THRESHOLD", "1.0")
    strict = await memory.save_memory(store, "u", "semantic", "The user lives in Berlin.", category="fact")
    assert strict["action"] == "created"
    assert len(await stored(store, "u", "semantic")) == 4


async def test_recall_records_access_and_the_vector_survives(store):
    saved = await memory.save_memory(
        store, "u", "semantic", "The user is allergic to peanuts", category="fact", now=ago(3)
    )
    first = await memory.recall(store, "u", "food allergy", "semantic", now=ago(1))
    assert first[0]["access_count"] == 1
    assert first[0]["last_accessed_at"] == ago(1).isoformat(timespec="microseconds")
    again = await memory.recall(store, "u", "food allergy", "semantic", now=NOW)
    assert again[0]["id"] == saved["id"]
    assert again[0]["similarity"] == pytest.approx(first[0]["similarity"], abs=1e-6)
    assert again[0]["access_count"] == 2
    item = (await stored(store, "u", "semantic"))[0]
    assert item.value["updated_at"] == saved["updated_at"]  # access is not a content update


async def test_ttl_hides_expired_memories(store, monkeypatch):
    monkeypatch.setenv("MEMORY_TTL_DAYS", "1")
    monkeypatch.setattr(memory.times, "utc_now", lambda: NOW)
    await memory.save_memory(store, "u", "episodic", "The user visited the dentist", now=ago(2))
    fresh = await memory.save_memory(store, "u", "episodic", "The user visited the museum")
    assert fresh["expires_at"] == (NOW + timedelta(days=1)).isoformat(timespec="microseconds")
    found = await memory.recall(store, "u", "visited", "episodic", now=NOW)
    assert [r["id"] for r in found] == [fresh["id"]]
    listed = await memory.keyword_search(store, "u", ["visited"])
    assert [r["id"] for r in listed] == [fresh["id"]]


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda s: memory.save_memory(s, "u", "semantic", "x", category="hobby"),
            "Unknown category 'hobby'; valid: preference, fact, skill, relationship, goal, other",
        ),
        (lambda s: memory.save_memory(s, "u", "dream", "x"), "Unknown kind 'dream'"),
        (lambda s: memory.save_memory(s, "u", "semantic", "   "), "non-empty"),
        (lambda s: memory.save_memory(s, "u", "semantic", "x" * 8001), "8001 characters"),
        (lambda s: memory.save_memory(s, "u", "semantic", "x", importance=1.5), "importance"),
        (lambda s: memory.save_memory(s, "u", "episodic", "x", category="fact"), "semantic"),
        (lambda s: memory.save_memory(s, "", "semantic", "x"), "user_id"),
        (lambda s: memory.recall(s, "u", "", "semantic"), "query"),
        (lambda s: memory.recall(s, "u", "q", "semantic", top_k=0), "top_k"),
        (lambda s: memory.recall(s, "u", "q", "semantic", top_k=101), "top_k"),
        (lambda s: memory.recall(s, "u", "q", "semantic", scoring="bm25"), "scoring"),
        (lambda s: memory.recall(s, "u", "q", "episodic", role="user"), "role"),
        (lambda s: memory.keyword_search(s, "u", []), "keywords"),
        (lambda s: memory.keyword_search(s, "u", "berlin"), "list"),
        (lambda s: memory.keyword_search(s, "u", ["a"], "profile"), "memory_type"),
        (lambda s: memory.keyword_search(s, "u", ["a"], limit=500), "limit"),
        (lambda s: memory.time_filter(s, "u", start_date="01/02/2025"), "YYYY-MM-DD"),
        (lambda s: memory.time_filter(s, "u", start_date="2025-03-01", end_date="2025-02-01"), "must be before"),
        (lambda s: memory.time_filter(s, "u", start_date="2025-03-01", days_ago=3), "not both"),
        (lambda s: memory.time_filter(s, "u"), "start_date, end_date or days_ago"),
        (lambda s: memory.update_profile(s, "u", {}), "non-empty dict"),
        (lambda s: memory.update_profile(s, "u", {"bio": "x" * 1001}), "bio"),
        (lambda s: memory.get_profile(s, "u", ["hobby"]), "Unknown category"),
    ],
)
async def test_bad_input_is_refused_and_nothing_is_written(store, call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        await call(store)
    assert await store.alist_namespaces(prefix=("memories",)) == []


async def test_chat_messages_are_truncated_not_refused(store):
    long = await memory.record_chat_message(store, "u", "assistant", "y" * 9000, "t1")
    assert len(long["text"]) == 8000 and long["truncated"] is True
    with pytest.raises(ValueError, match="role"):
        await memory.record_chat_message(store, "u", "system", "hi", "t1")


# ---------------------------------------------------------------- profile and listings


async def test_profile_merges_fields_and_groups_facts(store):
    await memory.update_profile(store, "u", {"name": "Alice", "city": "Berlin"})
    await memory.update_profile(store, "u", {"city": "Munich", "job": "nurse"})
    merged = await memory.update_profile(store, "u", {"job": None, "age": 34})
    assert merged["fields"] == {"name": "Alice", "city": "Munich", "age": "34"}
    await memory.save_memory(store, "u", "semantic", "The user likes jazz", category="preference", importance=0.3)
    await memory.save_memory(store, "u", "semantic", "The user hates cilantro", category="preference", importance=0.9)
    await memory.save_memory(store, "u", "semantic", "The user wants to run a marathon", category="goal")

    profile = await memory.get_profile(store, "u", ["preference"])
    assert profile["fields"] == merged["fields"]
    assert list(profile["facts"]) == ["preference"]
    assert [f["text"] for f in profile["facts"]["preference"]] == ["The user hates cilantro", "The user likes jazz"]
    everything = await memory.get_profile(store, "u")
    assert everything["facts"]["goal"][0]["text"] == "The user wants to run a marathon"
    assert everything["facts"]["skill"] == []
    assert (await memory.get_profile(store, "nobody"))["fields"] == {}


async def test_keyword_search_matches_any_keyword_ranked_by_matches(store):
    await memory.save_memory(store, "u", "episodic", "Dinner with Tom in BERLIN", now=ago(3))
    await memory.save_memory(
        store, "u", "semantic", "The user's brother Tom lives in Paris", category="relationship", now=ago(2)
    )
    await memory.record_chat_message(store, "u", "user", "Berlin was rainy today", "t1", now=ago(1))
    await memory.save_memory(store, "u", "episodic", "The user fixed a bike", now=ago(1))

    both = await memory.keyword_search(store, "u", ["berlin", "tom"])
    assert [r["text"] for r in both] == [
        "Dinner with Tom in BERLIN",
        "Berlin was rainy today",
        "The user's brother Tom lives in Paris",
    ]
    assert both[0]["score"] == 1.0 and both[1]["score"] == 0.5
    assert both[1]["matched_keywords"] == ["berlin"]
    episodic = await memory.keyword_search(store, "u", ["berlin"], "episodic")
    assert [r["kind"] for r in episodic] == ["episodic"]
    assert await memory.keyword_search(store, "u", ["100%"]) == []


async def test_time_filter_and_recent_activity(store):
    march = await memory.save_memory(
        store, "u", "episodic", "The user ran a half marathon", now=datetime(2025, 3, 9, 8, tzinfo=UTC)
    )
    april = await memory.save_memory(
        store,
        "u",
        "semantic",
        "The user adopted a cat named Miso",
        category="fact",
        now=datetime(2025, 4, 30, 23, tzinfo=UTC),
    )
    june = await memory.save_memory(
        store, "u", "episodic", "The user started a pottery class", now=datetime(2025, 6, 28, tzinfo=UTC)
    )

    spring = await memory.time_filter(store, "u", start_date="2025-03-01", end_date="2025-04-30", now=NOW)
    assert [r["id"] for r in spring] == [april["id"], march["id"]]  # end date is inclusive
    recent = await memory.time_filter(store, "u", days_ago=7, now=NOW)
    assert [r["id"] for r in recent] == [june["id"]]
    assert recent[0]["score"] == pytest.approx(recency_factor(3.5, 180))
    since = await memory.time_filter(store, "u", start_date="2025-04-01T00:00:00+02:00", now=NOW)
    assert [r["id"] for r in since] == [june["id"], april["id"]]

    # a fact restated later updates it (an event of another day would be a new memory)
    await memory.save_memory(store, "u", "semantic", "The user adopted a cat named Miso!", category="fact", now=NOW)
    activity = await memory.recent_activity(store, "u", limit=2, now=NOW)
    assert [r["id"] for r in activity] == [april["id"], june["id"]]  # updated today, then June


async def test_delete_and_forget_stay_within_the_user(store):
    mine = await memory.save_memory(store, "a.b", "semantic", "The user owns a red bicycle", category="fact")
    theirs = await memory.save_memory(store, "a%2Eb", "semantic", "The user owns a red bicycle", category="fact")
    await memory.record_chat_message(store, "a.b", "user", "hello", "t1")
    await memory.update_profile(store, "a.b", {"name": "Ann"})
    assert mine["id"] != theirs["id"] and theirs["action"] == "created"

    assert (await memory.delete_memory(store, "a%2Eb", mine["id"]))["deleted"] is False
    assert (await memory.delete_memory(store, "a%2Eb", theirs["id"])) == {
        "id": theirs["id"],
        "deleted": True,
        "kind": "semantic",
    }
    assert await memory.forget_user(store, "a.b") == 3
    assert await store.asearch(("memories",), limit=10) == []


# ---------------------------------------------------------------- tools through ToolNode


@dataclass
class RunContext:
    user_id: str | None = None


def tool_graph(store, handle_errors: bool = True):
    tools = [tool(f, parse_docstring=True, error_on_invalid_docstring=True) for f in MEMORY_TOOLS]
    builder = StateGraph(MessagesState, context_schema=RunContext)
    builder.add_node("tools", ToolNode(tools, handle_tool_errors=handle_errors))
    builder.add_edge(START, "tools")
    return builder.compile(store=store)


async def call_tools(graph, user_id, *calls) -> list:
    tool_calls = [{"name": name, "args": args, "id": f"c{i}"} for i, (name, args) in enumerate(calls)]
    out = await graph.ainvoke({"messages": [AIMessage("", tool_calls=tool_calls)]}, context=RunContext(user_id=user_id))
    return out["messages"][1:]


def payload(message) -> dict:
    assert message.status == "success", message.content
    return json.loads(message.content)


def test_tool_schemas_hide_runtime_and_user():
    names = []
    for function in MEMORY_TOOLS:
        built = tool(function, parse_docstring=True, error_on_invalid_docstring=True)
        names.append(built.name)
        assert "runtime" not in built.args and "user_id" not in built.args
        assert all(spec.get("description") for spec in built.args.values()), built.name
    assert names == [
        "search_episodic_memory",
        "search_semantic_memory",
        "keyword_search",
        "time_filter",
        "get_user_profile",
        "get_recent_activity",
        "search_chat_history",
        "save_memory",
        "delete_memory",
    ]


async def test_tools_save_and_search_for_the_context_user_only(store, frozen_now):
    graph = tool_graph(store)
    saved = await call_tools(
        graph,
        "alice",
        (
            "save_memory",
            {"text": "The user's sister Mia lives in Lisbon", "category": "relationship", "importance": 0.8},
        ),
        ("save_memory", {"text": "The user went to a jazz concert", "kind": "episodic"}),
    )
    assert [payload(m)["action"] for m in saved] == ["created", "created"]
    assert [payload(m)["speaker"] for m in saved] == ["alice", "alice"]  # the memory is about the user
    await memory.record_chat_message(store, "alice", "assistant", "Try the pastel de nata", "t1")
    await memory.update_profile(store, "alice", {"name": "Alice"})

    results = await call_tools(
        graph,
        "alice",
        ("search_semantic_memory", {"query": "sister", "category": "relationship"}),
        ("search_episodic_memory", {"query": "concert", "top_k": 3}),
        ("keyword_search", {"keywords": ["LISBON"], "memory_type": "semantic"}),
        ("time_filter", {"days_ago": 1}),
        ("get_user_profile", {"categories": ["relationship"]}),
        ("get_recent_activity", {"limit": 5}),
        ("search_chat_history", {"query": "pastry", "role": "assistant"}),
    )
    semantic, episodic, keyword, timed, profile, recent, chat = map(payload, results)
    assert semantic["results"][0]["text"] == "The user's sister Mia lives in Lisbon"
    for field in ("id", "kind", "created_at", "updated_at", "score", "similarity"):
        assert field in semantic["results"][0]
    assert episodic["results"][0]["kind"] == "episodic"
    assert keyword["count"] == 1
    assert timed["count"] == 2 and timed["start"] == (NOW - timedelta(days=1)).isoformat()
    assert profile["fields"] == {"name": "Alice"}
    assert profile["facts"]["relationship"][0]["importance"] == 0.8
    assert recent["count"] == 2
    assert chat["results"][0]["role"] == "assistant"

    # bob sees none of it, even when the model names alice in its arguments
    bob = await call_tools(
        graph,
        "bob",
        ("search_semantic_memory", {"query": "sister", "user_id": "alice"}),
        ("keyword_search", {"keywords": ["Lisbon", "jazz"]}),
        ("time_filter", {"days_ago": 30}),
        ("get_user_profile", {}),
        ("get_recent_activity", {}),
        ("search_chat_history", {"query": "pastel de nata"}),
    )
    semantic, keyword, timed, profile, recent, chat = map(payload, bob)
    assert semantic["count"] == keyword["count"] == timed["count"] == 0
    assert recent["count"] == chat["count"] == 0
    assert profile["fields"] == {} and all(not facts for facts in profile["facts"].values())


async def test_tool_input_errors_are_tool_input_errors(store):
    graph = tool_graph(store, handle_errors=False)
    bad = [
        ("time_filter", {"start_date": "yesterday"}),
        ("search_episodic_memory", {"query": "x", "top_k": 50}),
        ("keyword_search", {"keywords": [" "]}),
        ("save_memory", {"text": "x" * 9000}),
    ]
    for name, args in bad:
        with pytest.raises(ToolInputError):
            await call_tools(graph, "alice", (name, args))
    assert await store.alist_namespaces(prefix=("memories",)) == []

    messages = await call_tools(tool_graph(store), "alice", ("save_memory", {"text": "x", "category": "hobby"}))
    assert messages[0].status == "error"


async def test_tools_refuse_to_run_without_a_user(store):
    graph = tool_graph(store, handle_errors=False)
    with pytest.raises(ToolError, match="user_id"):
        await call_tools(graph, None, ("get_recent_activity", {}))
    with pytest.raises(ToolError, match="user_id"):
        await call_tools(graph, "  ", ("get_recent_activity", {}))


async def test_a_wrong_category_does_not_hide_the_memory_asked_for(store):
    graph = tool_graph(store)
    await call_tools(
        graph,
        "alice",
        ("save_memory", {"text": "The user's favourite colour is teal"}),  # category "other"
        ("save_memory", {"text": "The user lives in Berlin", "category": "fact"}),
    )
    found, narrowed, empty_category = map(
        payload,
        await call_tools(
            graph,
            "alice",
            ("search_semantic_memory", {"query": "favourite colour", "category": "fact", "top_k": 1}),
            ("search_semantic_memory", {"query": "where does the user live", "category": "fact", "top_k": 5}),
            ("search_semantic_memory", {"query": "favourite colour", "category": "goal", "top_k": 1}),
        ),
    )
    assert [r["text"] for r in found["results"]] == ["The user's favourite colour is teal"]
    assert found["category"] is None and "'fact'" in found["note"]
    # the category narrows when the best match is in it
    assert [r["text"] for r in narrowed["results"]] == ["The user lives in Berlin"]
    assert narrowed["category"] == "fact" and "note" not in narrowed
    assert empty_category["results"][0]["text"] == "The user's favourite colour is teal"
    # another user's search finds nothing, whatever the category
    (bob,) = map(payload, await call_tools(graph, "bob", ("search_semantic_memory", {"query": "colour"})))
    assert bob["count"] == 0


async def test_a_search_of_the_wrong_kind_falls_back_to_the_other_kind(store):
    graph = tool_graph(store)
    await call_tools(
        graph,
        "alice",
        ("save_memory", {"text": "The user ran a marathon in Rome", "kind": "episodic"}),
    )
    semantic, category = map(
        payload,
        await call_tools(
            graph,
            "alice",
            ("search_semantic_memory", {"query": "marathon"}),
            ("search_semantic_memory", {"query": "marathon", "category": "skill"}),
        ),
    )
    for answer in (semantic, category):
        assert [r["text"] for r in answer["results"]] == ["The user ran a marathon in Rome"]
        assert "episodic" in answer["note"]
    await call_tools(graph, "alice", ("save_memory", {"text": "The user is allergic to peanuts", "category": "fact"}))
    (episodic,) = map(payload, await call_tools(graph, "bob", ("search_episodic_memory", {"query": "peanuts"})))
    assert episodic["count"] == 0  # bob has no memories of either kind
    await call_tools(graph, "bob", ("save_memory", {"text": "The user is allergic to cats", "category": "fact"}))
    (episodic,) = map(payload, await call_tools(graph, "bob", ("search_episodic_memory", {"query": "allergy"})))
    assert [r["text"] for r in episodic["results"]] == ["The user is allergic to cats"]
    assert "semantic" in episodic["note"]


async def test_a_wrong_memory_type_or_profile_category_widens_instead_of_coming_back_empty(store):
    graph = tool_graph(store)
    await call_tools(graph, "alice", ("save_memory", {"text": "The user's favourite colour is teal"}))
    keyword, profile, exact = map(
        payload,
        await call_tools(
            graph,
            "alice",
            ("keyword_search", {"keywords": ["teal"], "memory_type": "episodic"}),
            ("get_user_profile", {"categories": ["fact", "preference"]}),
            ("get_user_profile", {"categories": ["other"]}),
        ),
    )
    assert [r["text"] for r in keyword["results"]] == ["The user's favourite colour is teal"]
    assert keyword["memory_type"] == "all" and "episodic" in keyword["note"]
    assert [f["text"] for f in profile["facts"]["other"]] == ["The user's favourite colour is teal"]
    assert "fact, preference" in profile["note"]
    assert list(exact["facts"]) == ["other"] and "note" not in exact
    (nothing,) = map(payload, await call_tools(graph, "bob", ("keyword_search", {"keywords": ["teal"]})))
    assert nothing["count"] == 0
