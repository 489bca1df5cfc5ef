"""Long-term memory on the real AsyncPostgresStore (embedded Postgres + pgvector HNSW):
persistence, dedupe, access bookkeeping that keeps vectors, SQL listings, TTL (written, swept by
the store factory's sweeper) and user isolation."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from store import knowledge, memory
from store.postgres import store
from tests.integration.conftest import sql
from tools.memory import MEMORY_TOOLS

pytestmark = pytest.mark.integration


def rows(pg_uri, schema, where="TRUE", params=()) -> list[tuple]:
    return sql(pg_uri, f"SELECT prefix, key, value FROM {schema}.store WHERE {where}", params)


def vectors(pg_uri, schema, key) -> list[tuple]:
    return sql(
        pg_uri,
        f"SELECT field_name, updated_at FROM {schema}.store_vectors WHERE key = %s",
        (key,),
    )


async def test_memories_persist_and_dedupe_on_postgres(pg_schema, pg_uri):
    async with store() as s:
        first = await memory.save_memory(
            s, "alice", "semantic", "The user lives in Berlin.", category="fact", importance=0.6
        )
    async with store() as s:  # a new pool: what was written is read back from Postgres
        again = await memory.save_memory(
            s, "alice", "semantic", "The user lives in Berlin", category="fact", importance=0.9
        )
        found = await memory.recall(s, "alice", "which city is home", "semantic")

    assert again["action"] == "updated" and again["id"] == first["id"]
    stored = rows(pg_uri, pg_schema)
    assert len(stored) == 1
    prefix, key, value = stored[0]
    assert prefix == "memories.alice.semantic" and key == first["id"]
    assert value["text"] == "The user lives in Berlin" and value["importance"] == 0.9
    assert [v[0] for v in vectors(pg_uri, pg_schema, key)] == ["text"]
    assert found[0]["id"] == first["id"] and found[0]["access_count"] == 1


async def test_recall_updates_access_without_touching_the_vector(pg_schema, pg_uri):
    async with store() as s:
        saved = await memory.save_memory(s, "alice", "episodic", "The user ran the Berlin marathon in 3 hours 50")
        await memory.save_memory(s, "alice", "episodic", "The user baked sourdough bread")
        before = vectors(pg_uri, pg_schema, saved["id"])
        first = await memory.recall(s, "alice", "running race", "episodic", top_k=1)
        second = await memory.recall(s, "alice", "running race", "episodic", top_k=1, scoring="plain")

    assert first[0]["id"] == second[0]["id"] == saved["id"]
    assert second[0]["access_count"] == 2 and second[0]["last_accessed_at"]
    assert second[0]["similarity"] == pytest.approx(first[0]["similarity"], abs=1e-5)
    assert vectors(pg_uri, pg_schema, saved["id"]) == before  # same row, not re-embedded
    value = rows(pg_uri, pg_schema, "key = %s", (saved["id"],))[0][2]
    assert value["access_count"] == 2 and value["updated_at"] == saved["updated_at"]


async def test_sql_listings_keyword_time_and_recent(pg_schema):
    day = datetime(2025, 5, 1, tzinfo=UTC)
    async with store() as s:
        tom = await memory.save_memory(s, "u", "episodic", "Dinner with Tom at 100% Pizza", now=day)
        paris = await memory.save_memory(
            s,
            "u",
            "semantic",
            "The user's friend Tom lives in Paris",
            category="relationship",
            now=day + timedelta(days=5),
        )
        chat = await memory.record_chat_message(
            s, "u", "user", "Pizza again tonight?", "t1", now=day + timedelta(days=6)
        )
        await memory.save_memory(s, "u", "episodic", "The user repaired a bike_chain", now=day + timedelta(days=20))

        ranked = await memory.keyword_search(s, "u", ["tom", "PIZZA"])
        literal = await memory.keyword_search(s, "u", ["100%"])
        wildcard = await memory.keyword_search(s, "u", ["r_p"])
        underscore = await memory.keyword_search(s, "u", ["e_c"])
        only_chat = await memory.keyword_search(s, "u", ["pizza"], "chat")
        may = await memory.time_filter(s, "u", start_date="2025-05-01", end_date="2025-05-05")
        late = await memory.time_filter(s, "u", start_date="2025-05-05T12:00:00+02:00")
        # a fact restated later updates it (an event of another day would be a new memory)
        await memory.save_memory(
            s,
            "u",
            "semantic",
            "The user's friend Tom lives in Paris!",
            category="relationship",
            now=day + timedelta(days=30),
        )
        recent = await memory.recent_activity(s, "u", limit=2)

    assert [r["id"] for r in ranked] == [tom["id"], chat["id"], paris["id"]]
    assert ranked[0]["score"] == 1.0 and ranked[0]["matched_keywords"] == ["tom", "PIZZA"]
    assert [r["id"] for r in literal] == [tom["id"]]
    assert wildcard == []  # LIKE wildcards in keywords are literal: "r_p" is not "rep"
    assert [r["text"] for r in underscore] == ["The user repaired a bike_chain"]
    assert [r["id"] for r in only_chat] == [chat["id"]]
    assert [r["id"] for r in may] == [tom["id"]]
    assert [r["text"] for r in late] == ["The user repaired a bike_chain", paris["text"]]
    assert recent[0]["id"] == paris["id"] and recent[0]["text"].endswith("!")


async def test_ttl_is_written_to_the_row_and_kept_across_access(pg_schema, pg_uri, monkeypatch):
    monkeypatch.setenv("MEMORY_TTL_DAYS", "2")
    async with store() as s:
        saved = await memory.save_memory(s, "u", "semantic", "The user is training for a triathlon", category="goal")
        stale = await memory.save_memory(
            s,
            "u",
            "semantic",
            "The user wants a new laptop",
            category="goal",
            now=datetime.now(UTC) - timedelta(days=3),
        )
        await memory.recall(s, "u", "sport goals", "semantic")
        hits = await memory.keyword_search(s, "u", ["triathlon", "laptop"])
    ttl = sql(
        pg_uri,
        f"SELECT ttl_minutes, expires_at > NOW() + interval '47 hours' FROM {pg_schema}.store WHERE key = %s",
        (saved["id"],),
    )
    assert ttl == [(2880, True)]
    assert [h["id"] for h in hits] == [saved["id"]] and stale["id"] != saved["id"]


def row_keys(pg_uri, schema) -> set[str]:
    return {row[1] for row in rows(pg_uri, schema)}


def sweeper_tasks() -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "ttl_sweeper" and not t.done()]


async def test_a_sweep_deletes_expired_memories_only(pg_schema, pg_uri, monkeypatch):
    monkeypatch.setenv("MEMORY_TTL_DAYS", "2")
    monkeypatch.setenv("STORE_TTL_SWEEP_MINUTES", "0")  # no background sweeper: sweep by hand
    async with store() as s:
        assert sweeper_tasks() == []
        live = await memory.save_memory(s, "u", "semantic", "The user keeps bees", category="skill")
        expired = await memory.save_memory(
            s, "u", "episodic", "The user repainted the fence", now=datetime.now(UTC) - timedelta(days=3)
        )
        await knowledge.create_kb(s, "handbook")
        await knowledge.ingest_text(s, "handbook", "Bees need water in summer.", "bees.txt")
        ns = memory.namespace("u", "semantic")
        await s.aget(ns, live["id"])  # a store read does not extend the expiry (no refresh)
        await s.asearch(ns, query="bees")
        kept = await s.asearch(memory.namespace("u", "episodic"), query="fence")
        before = row_keys(pg_uri, pg_schema)
        swept = await s.sweep_ttl()
    assert kept == []  # expired but not yet swept: hidden from the store's own reads
    assert expired["id"] in before and swept == 1
    after = row_keys(pg_uri, pg_schema)
    assert after == before - {expired["id"]}
    kb_rows = sql(pg_uri, f"SELECT prefix, expires_at FROM {pg_schema}.store WHERE prefix LIKE 'kb%%'")
    assert {prefix for prefix, _ in kb_rows} == {"kb.handbook", "kb_docs.handbook", "kb_registry"}
    assert all(expires is None for _, expires in kb_rows)  # knowledge bases never expire
    expiry = sql(pg_uri, f"SELECT expires_at - NOW() FROM {pg_schema}.store WHERE key = %s", (live["id"],))[0][0]
    assert timedelta(hours=47) < expiry <= timedelta(days=2)


async def test_the_store_factory_sweeps_while_open(pg_schema, pg_uri, monkeypatch):
    monkeypatch.setenv("MEMORY_TTL_DAYS", "2")
    three_days_ago = datetime.now(UTC) - timedelta(days=3)
    monkeypatch.setenv("STORE_TTL_SWEEP_MINUTES", "0")
    async with store() as s:
        first = await memory.save_memory(s, "u", "episodic", "The user lost a glove", now=three_days_ago)
    assert first["id"] in row_keys(pg_uri, pg_schema)

    monkeypatch.delenv("STORE_TTL_SWEEP_MINUTES")  # the default: every 60 minutes
    async with store() as s:
        running = sweeper_tasks()
        assert len(running) == 1 and s.ttl_config["sweep_interval_minutes"] == 60
        assert first["id"] not in row_keys(pg_uri, pg_schema)  # swept when the store opened
    assert running[0].done() and sweeper_tasks() == []

    monkeypatch.setenv("STORE_TTL_SWEEP_MINUTES", "0.002")  # every 0.12 s
    async with store() as s:
        second = await memory.save_memory(s, "u", "episodic", "The user lost a scarf", now=three_days_ago)
        live = await memory.save_memory(s, "u", "episodic", "The user found a hat")
        for _ in range(200):  # the background task deletes it; bounded wait, no timing assert
            if second["id"] not in row_keys(pg_uri, pg_schema):
                break
            await asyncio.sleep(0.05)
        assert second["id"] not in row_keys(pg_uri, pg_schema)
        assert live["id"] in row_keys(pg_uri, pg_schema)


@dataclass
class RunContext:
    user_id: str


def tool_graph(pg_store):
    tools = [tool(f, parse_docstring=True) for f in MEMORY_TOOLS]
    builder = StateGraph(MessagesState, context_schema=RunContext)
    builder.add_node("tools", ToolNode(tools, handle_tool_errors=False))
    builder.add_edge(START, "tools")
    return builder.compile(store=pg_store)


async def run_tools(graph, user_id, *calls) -> list[dict]:
    tool_calls = [{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(calls)]
    out = await graph.ainvoke({"messages": [AIMessage("", tool_calls=tool_calls)]}, context=RunContext(user_id))
    return [json.loads(message.content) for message in out["messages"][1:]]


READ_CALLS = (
    ("search_episodic_memory", {"query": "trip to Lisbon"}),
    ("search_semantic_memory", {"query": "sister's name"}),
    ("keyword_search", {"keywords": ["Lisbon", "Mia", "pastel"]}),
    ("time_filter", {"days_ago": 7}),
    ("get_user_profile", {}),
    ("get_recent_activity", {"limit": 50}),
    ("search_chat_history", {"query": "pastry recommendation"}),
)


def result_ids(payloads: list[dict]) -> set[str]:
    ids = set()
    for data in payloads:
        ids.update(r["id"] for r in data.get("results", []))
        for facts in data.get("facts", {}).values():
            ids.update(f["id"] for f in facts)
    return ids


@pytest.mark.parametrize("other", ["bob", "alice2", "al_ce", "alice.x"])
async def test_users_are_isolated(pg_schema, pg_uri, other):
    async with store() as s:
        graph = tool_graph(s)
        saved = await run_tools(
            graph,
            "alice",
            ("save_memory", {"text": "The user's sister is called Mia", "category": "relationship"}),
            ("save_memory", {"text": "The user flew to Lisbon for a week", "kind": "episodic"}),
        )
        await memory.record_chat_message(s, "alice", "assistant", "Try pastel de nata", "t1")
        await memory.update_profile(s, "alice", {"name": "Alice"})
        own = await memory.save_memory(s, other, "semantic", "The user's sister is called Mia", category="relationship")
        alice_ids = {m["id"] for m in saved}

        mine = await run_tools(graph, "alice", *READ_CALLS)
        theirs = await run_tools(graph, other, *READ_CALLS)
        refused = await memory.delete_memory(s, other, saved[0]["id"])
        forgotten = await memory.forget_user(s, other)
        alice_after = await memory.keyword_search(s, "alice", ["Mia", "Lisbon", "pastel"])

    assert own["action"] == "created"  # dedupe never reaches into another user's memories
    assert alice_ids <= result_ids(mine)
    assert result_ids(theirs) <= {own["id"]}
    assert theirs[4]["fields"] == {} and theirs[6]["count"] == 0
    assert refused["deleted"] is False
    assert forgotten == 1
    assert len(alice_after) == 3
    remaining = {row[0] for row in rows(pg_uri, pg_schema)}
    assert remaining == {
        "memories.alice.semantic",
        "memories.alice.episodic",
        "memories.alice.chat",
        "memories.alice.profile",
    }
    orphans = sql(
        pg_uri,
        f"SELECT count(*) FROM {pg_schema}.store_vectors v WHERE NOT EXISTS "
        f"(SELECT 1 FROM {pg_schema}.store s WHERE s.prefix = v.prefix AND s.key = v.key)",
    )
    assert orphans == [(0,)]


async def test_delete_and_forget_own_memories(pg_schema, pg_uri):
    async with store() as s:
        a = await memory.save_memory(s, "alice", "semantic", "The user drinks oat milk", category="preference")
        await memory.record_chat_message(s, "alice", "user", "I drink oat milk", "t1")
        await memory.update_profile(s, "alice", {"city": "Oslo"})
        deleted = await memory.delete_memory(s, "alice", a["id"])
        again = await memory.delete_memory(s, "alice", a["id"])
        count = await memory.forget_user(s, "alice")
        profile = await memory.get_profile(s, "alice")
    assert deleted == {"id": a["id"], "deleted": True, "kind": "semantic"}
    assert again["deleted"] is False
    assert count == 2 and profile["fields"] == {}
    assert rows(pg_uri, pg_schema) == []
    assert sql(pg_uri, f"SELECT count(*) FROM {pg_schema}.store_vectors") == [(0,)]


async def test_recalled_memories_show_their_own_turns_on_postgres(pg_schema, pg_uri):
    async with store() as s:
        said = await memory.record_chat_message(s, "alice", "user", "I moved to Porto in March.", "t1")
        reply = await memory.record_chat_message(s, "alice", "assistant", "Porto is a lovely city.", "t1")
        bobs = await memory.record_chat_message(s, "bob", "user", "My password hint is Porto.", "t9")
        await memory.save_memory(
            s,
            "alice",
            "semantic",
            "The user lives in Porto",
            category="fact",
            source="extraction",
            turn_ids=[said["id"], bobs["id"], reply["id"]],
        )
        await memory.update_profile(s, "alice", {"city": "Porto"}, turn_ids=[said["id"]])
    async with store() as s:  # read back from Postgres by a new pool
        [found] = await memory.recall(s, "alice", "which city does she live in", "semantic", top_k=1)
        profile = await memory.get_profile(s, "alice")
        [bob_view] = await memory.recall(s, "bob", "password hint", "chat", top_k=1)

    assert [(t["id"], t["role"], t["text"]) for t in found["turns"]] == [
        (said["id"], "user", "I moved to Porto in March."),
        (reply["id"], "assistant", "Porto is a lovely city."),
    ]
    assert "password" not in json.dumps(found)  # bob's message id names nothing in alice's chat
    assert profile["field_turns"]["city"][0]["id"] == said["id"]
    assert bob_view["id"] == bobs["id"] and "turns" not in bob_view  # chat turns are the turns themselves


async def test_rebuilt_passages_are_those_recording_writes(pg_schema):
    """Messages recorded before their passages were kept (values without them, no passage
    vectors: an older version's history) get them from `rebuild_passages` as
    `record_chat_message` writes them: a long message's sentences, and a reply with the question
    it answers; written and embedded again once, a second run changes nothing."""
    from store.backend import backend_for

    said = [
        ("Ann", "Did you ever get the sourdough starter going?", "t1"),
        ("Ben", "Yes! Three so far, and the last one finally came out right.", "t1"),
        ("Ann", "Long day at work. The train was late again. Then it rained all the way home.", "t2"),
        ("Ben", "ok", "t2"),
    ]
    ns = memory.namespace("u", "chat")
    prefix = ".".join(ns)
    async with store() as s:
        for speaker, text, thread in said:
            await memory.record_chat_message(s, "u", "user", text, thread, speaker=speaker)

        def with_passages(found: dict) -> list[str]:
            return [key for key, passages in found.items() if passages]

        async def state() -> tuple[dict, int]:
            found = {item.key: item.value.get("passages") for item in await backend_for(s).scan(ns)}
            vectors = await s.sql._fetch("SELECT count(*) AS n FROM store_vectors WHERE prefix = %s", (prefix,))
            return found, vectors[0]["n"]

        recorded, vectors = await state()
        async with s.sql.pool.connection() as conn:
            await conn.execute("UPDATE store SET value = value - 'passages' WHERE prefix = %s", (prefix,))
            await conn.execute("DELETE FROM store_vectors WHERE prefix = %s AND field_name <> 'text'", (prefix,))
        stripped, bare = await state()
        rebuilt = await memory.rebuild_passages(s, "u")
        again = await memory.rebuild_passages(s, "u")
        restored, restored_vectors = await state()
        # the question gone (deleted, expired): the reply keeps the exchange it holds
        question = next(key for key, found in recorded.items() if not found and key < min(with_passages(recorded)))
        await memory.delete_memory(s, "u", question)
        after_delete = await memory.rebuild_passages(s, "u")
        left, _ = await state()
    assert (
        len(with_passages(recorded)) == 2 and bare == 4 < vectors
    )  # the reply's exchange, the long message's sentences
    assert any("sourdough" in passage for found in recorded.values() if found for passage in found)
    assert set(stripped.values()) == {None}
    assert rebuilt == 2 and again == 0
    assert restored == recorded and restored_vectors == vectors
    assert after_delete == 0 and left == {key: found for key, found in recorded.items() if key != question}
