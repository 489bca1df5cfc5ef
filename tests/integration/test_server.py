"""Platform behaviour through a real `langgraph dev` on Postgres, driven by langgraph-sdk."""

from __future__ import annotations

import asyncio
import json
import os
import uuid

import pytest

from tests.integration.conftest import (
    AEGRA_NO_DELAYED_RUNS,
    AEGRA_NO_MULTITASK,
    AEGRA_NO_ROLLBACK,
    AEGRA_PER_USER,
    KB_DATA,
    cli,
    key,
    sql,
    tool_messages,
    user,
    wait_status,
)

pytestmark = pytest.mark.integration


async def test_the_embeddings_model_loads_at_start_up(dev_server):
    """The server loads the local embeddings model in the background and says when it is ready,
    so that the first run or search after a start does not wait for it."""
    deadline = asyncio.get_running_loop().time() + 120
    while "Embeddings model local:all-MiniLM-L6-v2 ready" not in dev_server.log_text():
        assert asyncio.get_running_loop().time() < deadline, dev_server.log()
        await asyncio.sleep(0.5)


@pytest.mark.not_on_aegra("looks for langgraph_api's log record of a failed run ('Background run failed')")
async def test_a_failed_run_is_logged_once(dev_server):
    client = dev_server.client()
    thread = await client.threads.create()
    run = await client.runs.create(
        thread["thread_id"], "react", input=user("hello"), context={"model": "anthropic:claude-unset"}
    )
    await client.runs.join(thread["thread_id"], run["run_id"])
    assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "error"
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        lines = [line for line in dev_server.log_text().splitlines() if run["run_id"] in line]
        if any("Background run failed" in line for line in lines):
            break
        assert asyncio.get_running_loop().time() < deadline, lines
        await asyncio.sleep(0.2)
    failures = [line for line in lines if "error" in line.lower() and "ModelConfigError" in line]
    assert len(failures) == 1 and "No key for model 'anthropic:claude-unset'" in failures[0], failures


async def test_streams_tokens_custom_events_and_updates(dev_server, openai_server):
    client = dev_server.client()
    k = key()
    openai_server.script(
        k,
        [
            {
                "content": "",
                "tool_calls": [
                    {"name": "calculator", "args": {"expression": "6*7"}, "id": "c1"},
                    {"name": "current_time", "args": {"timezone": "UTC"}, "id": "c2"},
                ],
            },
            {"content": "six times seven is forty-two", "delay_per_token": 0.01},
        ],
    )
    thread = await client.threads.create()
    events: dict[str, list] = {}
    async for part in client.runs.stream(
        thread["thread_id"],
        "react",
        # No figure in the question: a numeric word problem's first call is kept off the token
        # stream (graphs/runtime/calculation.py), and this test is about what streams.
        input=user(f"{k} what is six times seven, and what time is it?"),
        stream_mode=["messages-tuple", "custom", "updates"],
    ):
        events.setdefault(part.event, []).append(part.data)
    assert "error" not in events, events.get("error")
    tokens = [chunk for chunk, meta in events["messages"] if chunk.get("type") == "AIMessageChunk"]
    text = "".join(c["content"] for c in tokens if isinstance(c["content"], str))
    assert "forty-two" in text and len(tokens) > 5
    # tool-call chunks streamed too, tied to their ids
    chunk_ids = {tc["id"] for c in tokens for tc in c.get("tool_call_chunks", []) if tc.get("id")}
    assert chunk_ids == {"c1", "c2"}
    custom = events["custom"]
    finished = {e["tool_call_id"]: e for e in custom if e["event"] == "tool_call_finished"}
    assert set(finished) == {"c1", "c2"} and "42" in finished["c1"]["result_preview"]
    assert [e["step"] for e in custom if e["event"] == "step"] == [1, 2]
    nodes = [name for update in events["updates"] for name in update]
    assert nodes == ["call_model", "tools", "call_model"]
    # the model really received both tool results through the OpenAI client path
    last_request = [r for r in openai_server.requests() if k in str(r.get("messages"))][-1]
    tool_results = [m for m in last_request["messages"] if m["role"] == "tool"]
    assert {m["tool_call_id"] for m in tool_results} == {"c1", "c2"}


@pytest.mark.not_on_aegra(AEGRA_NO_MULTITASK)
async def test_background_run_status_and_join(dev_server, openai_server):
    client = dev_server.client()
    k = key()
    openai_server.script(
        k,
        [
            {"content": "first answer", "delay": 1.5},
            {"content": "second answer"},
        ],
    )
    thread = await client.threads.create()
    tid = thread["thread_id"]
    first = await client.runs.create(tid, "react", input=user(f"{k} one"))
    assert await wait_status(client, tid, first["run_id"], {"running"}) == "running"
    second = await client.runs.create(tid, "react", input=user("two"), multitask_strategy="enqueue")
    # queued behind the first run on the same thread
    assert (await client.runs.get(tid, second["run_id"]))["status"] == "pending"
    state = await client.runs.join(tid, second["run_id"])
    assert state["messages"][-1]["content"] == "second answer"
    assert (await client.runs.get(tid, first["run_id"]))["status"] == "success"
    assert (await client.runs.get(tid, second["run_id"]))["status"] == "success"


@pytest.mark.parametrize(
    "action", ["interrupt", pytest.param("rollback", marks=pytest.mark.not_on_aegra(AEGRA_NO_ROLLBACK))]
)
async def test_cancelled_run_leaves_thread_usable(dev_server, openai_server, pg_uri, action):
    client = dev_server.client()
    k = key()
    openai_server.script(
        k,
        [
            {"content": "answer one"},
            {"content": "a very slow answer " * 40, "delay_per_token": 0.2},
            {"content": "recovered fine"},
        ],
    )
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "react", input=user(f"{k} first question"))
    long_run = await client.runs.create(tid, "react", input=user("second question"))
    assert await wait_status(client, tid, long_run["run_id"], {"running"}) == "running"
    by_run = f"SELECT count(*) FROM {dev_server.schema}.checkpoints WHERE metadata->>'run_id' = %s"
    deadline = asyncio.get_running_loop().time() + 30
    while not sql(pg_uri, by_run, (long_run["run_id"],))[0][0] and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    assert sql(pg_uri, by_run, (long_run["run_id"],))[0][0] > 0  # the run has written checkpoints
    while not any("second question" in str(r.get("messages")) for r in openai_server.requests()):
        assert asyncio.get_running_loop().time() < deadline  # the run is asking the model for its slow answer
        await asyncio.sleep(0.05)
    await client.runs.cancel(tid, long_run["run_id"], wait=True, action=action)
    if action == "interrupt":
        status = await wait_status(client, tid, long_run["run_id"], {"interrupted"})
        assert status == "interrupted"
    else:
        # rollback deletes the run and the checkpoints it wrote, in Postgres too
        assert sql(pg_uri, by_run, (long_run["run_id"],))[0][0] == 0
    state = await client.threads.get_state(tid)
    texts = [m["content"] for m in state["values"]["messages"]]
    assert "answer one" in texts and "a very slow answer" not in " ".join(texts)
    final = await client.runs.wait(tid, "react", input=user("third question"))
    assert final["messages"][-1]["content"] == "recovered fine"


async def test_thread_state_history_and_rows_in_postgres(dev_server, openai_server, pg_uri):
    client = dev_server.client()
    k = key()
    openai_server.script(k, ["hello there", "still here"])
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "react", input=user(f"{k} hi"))
    await client.runs.wait(tid, "react", input=user("again"))
    state = await client.threads.get_state(tid)
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "human", "ai"]
    assert state["values"]["steps"] == 1
    history = await client.threads.get_history(tid, limit=20)
    assert len(history) >= 4
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    rows = sql(pg_uri, f"SELECT count(*) FROM {dev_server.schema}.checkpoints WHERE thread_id = %s", (tid,))
    assert rows[0][0] == len(await client.threads.get_history(tid, limit=100))


async def test_store_put_and_semantic_search_through_the_api(dev_server, pg_uri):
    client = dev_server.client()
    ns = ["docs", key()]
    await client.store.put_item(ns, "cats", {"text": "Cats purr and chase mice around the house."})
    await client.store.put_item(ns, "stocks", {"text": "The stock market fell as bond yields rose."})
    await client.store.put_item(ns, "rain", {"text": "Heavy rain and thunderstorms are expected tonight."})
    found = await client.store.search_items(ns, query="kitten hunting a mouse", limit=3)
    keys = [item["key"] for item in found["items"]]
    assert keys[0] == "cats"
    if dev_server.kind == "dev":  # Aegra's store API answers key, value and namespace only, no score
        scores = [item["score"] for item in found["items"]]
        assert scores == sorted(scores, reverse=True)
    weather = await client.store.search_items(ns, query="storm forecast", limit=1)
    assert weather["items"][0]["key"] == "rain"
    # Aegra files the administrator's namespace under its own identity (users.<id>. ...)
    rows = sql(
        pg_uri, f"SELECT count(*) FROM {dev_server.schema}.store_vectors WHERE prefix LIKE %s", (f"%{'.'.join(ns)}",)
    )
    assert rows[0][0] == 3


async def test_restart_keeps_thread_state(dev_server, openai_server):
    client = dev_server.client()
    k = key()
    openai_server.script(k, ["remembered answer", "after restart"])
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "react", input=user(f"{k} remember this"))
    dev_server.stop()
    dev_server.start()
    client = dev_server.client()
    state = await client.threads.get_state(tid)
    assert state["values"]["messages"][-1]["content"] == "remembered answer"
    metadata = state["values"]["messages"][-1]["response_metadata"]  # when and by which model, kept across restarts
    assert metadata["created_at"].startswith("20") and metadata["model"]
    final = await client.runs.wait(tid, "react", input=user("and now?"))
    assert [m["content"] for m in final["messages"]][-1] == "after restart"


async def test_a_model_without_its_key_fails_the_run_at_once_with_a_clear_error(dev_server):
    client = dev_server.client()
    thread = await client.threads.create()
    events = []
    async for part in client.runs.stream(
        thread["thread_id"],
        "react",
        input=user("hi"),
        context={"model": "anthropic:claude-sonnet-4-5"},
        stream_mode=["custom"],
    ):
        events.append(part)
    assert "ANTHROPIC_API_KEY" in await dev_server.failure_message(client, thread["thread_id"], events)
    runs = await client.runs.list(thread["thread_id"])
    assert runs[0]["status"] == "error"


@pytest.mark.not_on_aegra(AEGRA_NO_DELAYED_RUNS)
async def test_turns_are_recorded_and_extraction_is_scheduled_as_a_debounced_background_run(dev_server, openai_server):
    from graphs.runtime.memory_schedule import memory_thread_id

    client = dev_server.client()
    k = key()
    user_id = f"user-{k}"
    openai_server.script(k, ["Hello Ada.", "Noted, Lisbon."])
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "react", input=user(f"{k} I am Ada"), context={"user_id": user_id})
    memory_thread = memory_thread_id(user_id, tid)
    first = await client.runs.list(memory_thread)
    assert [(r["assistant_id"], r["status"]) for r in first] == [(first[0]["assistant_id"], "pending")]
    await client.runs.wait(tid, "react", input=user("I live in Lisbon"), context={"user_id": user_id})
    second = await client.runs.list(memory_thread)
    # the newer turn rolled back the pending extraction: one pending run, the new one
    assert [r["status"] for r in second] == ["pending"]
    assert second[0]["run_id"] != first[0]["run_id"]
    assistant = await client.assistants.get(second[0]["assistant_id"])
    assert assistant["graph_id"] == "memory_writer"
    chat = await client.store.search_items(["memories", user_id, "chat"], limit=10)
    texts = sorted(item["value"]["text"] for item in chat["items"])
    assert texts == sorted([f"{k} I am Ada", "Hello Ada.", "I live in Lisbon", "Noted, Lisbon."])
    other = await client.store.search_items(["memories", f"other-{k}"], limit=10)
    assert other["items"] == []


async def test_knowledge_base_ingested_by_the_cli_is_searched_by_the_agent(dev_server, openai_server, pg_uri):
    kb = f"kb_{uuid.uuid4().hex[:8]}"
    # the CLI writes where the server keeps its store: schema it_server (langgraph.json's
    # factories), or Aegra's own tables (the database's default schema, public)
    env = {**os.environ, "POSTGRES_URI": pg_uri, "POSTGRES_SCHEMA": dev_server.schema}
    ingest = cli("ingest", kb, str(KB_DATA), env=env)
    assert ingest.returncode == 0, ingest.stderr
    k = key()
    openai_server.script(
        k,
        [
            {
                "tool_calls": [
                    {"name": "list_knowledge_bases", "id": "list", "args": {}},
                    {
                        "name": "knowledge_base_search",
                        "id": "kw",
                        "args": {"query": "what does fault ZX-4480 mean", "kb": kb, "strategy": "keyword", "top_k": 3},
                    },
                    {
                        "name": "knowledge_base_search",
                        "id": "hy",
                        "args": {"query": "how do I request holidays", "kb": kb, "top_k": 3},
                    },
                    {"name": "knowledge_base_search", "id": "bad", "args": {"query": "anything", "kb": "no_such_kb"}},
                ]
            },
            "Fault ZX-4480 is explained in the irrigation guide [1].",
        ],
    )
    bob = dev_server.client("bob")  # a regular user: the operator's knowledge bases are shared, read-only
    thread = await bob.threads.create()
    await bob.runs.wait(thread["thread_id"], "react", input=user(f"{k} what is ZX-4480?"))
    results = tool_messages(await bob.threads.get_state(thread["thread_id"]))
    assert kb in [entry["name"] for entry in results["list"]["content"]]
    keyword = results["kw"]["content"]
    assert keyword["retrieval_results"][0]["title"] == "Greenhouse Irrigation Guide"
    assert "ZX-4480" in keyword["context"] and keyword["reference"][0]["source"].endswith("greenhouse.md")
    hybrid = results["hy"]["content"]["retrieval_results"]
    assert any("HR-2209" in r["content"] for r in hybrid)
    assert results["bad"]["status"] == "error"
    assert "Unknown knowledge base 'no_such_kb'" in results["bad"]["content"]
    assert kb in results["bad"]["content"]  # the error lists the knowledge bases that exist
    if dev_server.kind == "aegra":
        return  # Aegra files store API calls under the caller's own namespace: no shared `kb` there
    # the operator's knowledge base is shared: bob reads it through the store API too
    registry = await bob.store.get_item(["kb_registry"], kb)
    assert registry["value"]["name"] == kb and "owner" not in registry["value"]
    chunks = await bob.store.search_items(["kb", kb], query="irrigation fault codes", limit=3)
    assert chunks["items"] and all(item["namespace"] == ["kb", kb] for item in chunks["items"])


@pytest.mark.not_on_aegra(f"{AEGRA_PER_USER} memories")
async def test_memory_writer_run_extracts_and_saves_through_the_server(dev_server, openai_server):
    admin = dev_server.client()
    k = key()
    user_id = f"dave-{k}"
    openai_server.script(
        k,
        [
            {
                "content": "",
                "tool_calls": [
                    {
                        "name": "MemoryExtraction",
                        "args": {
                            "episodic": [{"text": f"The user adopted a dog named Biscuit ({k})", "importance": 0.7}],
                            "semantic": [
                                {"text": "The user is allergic to peanuts", "category": "fact", "importance": 0.9}
                            ],
                            "profile_updates": {"name": "Dave"},
                        },
                    }
                ],
            }
        ],
    )
    thread = await admin.threads.create()
    turn = [
        {"role": "user", "content": f"{k} I'm Dave, I adopted a dog called Biscuit. Peanuts make me ill."},
        {"role": "assistant", "content": "Congratulations on Biscuit!"},
    ]
    result = await admin.runs.wait(
        thread["thread_id"],
        "memory_writer",
        input={"messages": turn, "thread_id": "conv-1"},
        context={"user_id": user_id},
    )
    assert result["result"] == {"created": 2, "updated": 0, "profile_fields": 1, "dropped": 0, "turns": 1, "pending": 0}
    found = await admin.store.search_items(["memories", user_id, "semantic"], query="food allergy")
    assert found["items"][0]["value"]["text"] == "The user is allergic to peanuts"
    assert found["items"][0]["value"]["source"] == "extraction"
    profile = await admin.store.get_item(["memories", user_id, "profile"], "profile")
    assert profile["value"]["fields"] == {"name": "Dave"}


async def test_turns_record_who_spoke_and_a_fact_from_many_turns_back_is_recalled(dev_server, openai_server):
    # bob chats as users do (no speaker given anywhere); the runtime records each message with
    # who said it, and chat recall of a question naming him finds what he said many turns earlier,
    # in the middle of a longer message.
    bob = dev_server.client("bob")
    first, second = key(), key()
    early = [
        f"{first} Morning! Busy week ahead.",
        "Long week. My sister Ines moved to Porto last spring, she teaches piano at a music school there. "
        "Anyway, what should I cook tonight?",
        "Can you remind me how to boil an egg properly?",
        "What is a good stretch for a stiff neck?",
    ]
    later = [
        f"{second} I want to plan a weekend trip.",
        "My colleague Sam keeps recommending Seville for the food.",
        "Which wine goes with grilled fish?",
        "I started piano practice again, scales every evening.",
        "Is it worth taking the night train to Paris?",
        "My neighbour's cat keeps visiting our balcony.",
        "How many hours of sleep do adults need?",
        "Let me think about the music school idea for my son.",
    ]
    openai_server.script(first, [f"Answer {i}." for i in range(len(early))])
    recall_call = {
        "tool_calls": [
            {
                "name": "search_chat_history",
                "id": "recall",
                "args": {"query": "Where does Bob's sister live and what does she do?", "limit": 5},
            }
        ]
    }
    openai_server.script(second, [*(f"Reply {i}." for i in range(len(later))), recall_call, "Porto."])
    for messages in (early, later):
        thread = await bob.threads.create()
        for text in messages:
            await bob.runs.wait(thread["thread_id"], "react", input=user(text))
    final = await bob.runs.wait(thread["thread_id"], "react", input=user("Where does my sister live again?"))
    assert final["messages"][-1]["content"] == "Porto."

    found = tool_messages(await bob.threads.get_state(thread["thread_id"]))["recall"]["content"]["results"]
    fact = next(r for r in found if "Porto" in r["text"])
    assert fact["role"] == "user" and fact["speaker"] == "bob"
    assert found.index(fact) < 3
    chat = await bob.store.search_items(["memories", "bob", "chat"], limit=100)
    by_role = {(item["value"]["role"], item["value"].get("speaker")) for item in chat["items"]}
    assert by_role == {("user", "bob"), ("assistant", "assistant")}
    # the long message is also searched by its sentences, each labelled with who said it
    stored = next(item["value"] for item in chat["items"] if "Ines" in item["value"]["text"])
    assert stored["passages"][0].startswith("bob: Long week. My sister Ines") and len(stored["passages"]) == 2
    assert "passages" not in fact


async def test_a_run_sends_its_model_parameters_to_the_model(dev_server, openai_server):
    client = dev_server.client()
    k = key()
    openai_server.script(k, ["brief"])
    thread = await client.threads.create()
    context = {"top_p": 0.25, "max_tokens": 32, "remember": False}
    final = await client.runs.wait(thread["thread_id"], "react", input=user(f"{k} be brief"), context=context)
    assert final["messages"][-1]["content"] == "brief"
    [sent] = [r["sampling"] for r in openai_server.requests() if k in json.dumps(r.get("messages"))]
    assert sent["top_p"] == 0.25 and 32 in (sent.get("max_tokens"), sent.get("max_completion_tokens"))
    with pytest.raises(Exception) as refused:  # checked before anything is written
        await client.runs.create(thread["thread_id"], "react", input=user("x"), context={"top_p": 2})
    assert type(refused.value).__name__ == "UnprocessableEntityError" and "`top_p`" in str(refused.value)
