"""The `router` graph through a real `langgraph dev` on Postgres, driven by langgraph-sdk: a
retrieval answer with sources from a KB ingested by the CLI, route classification through the
OpenAI-compatible client, sub-agent tokens and events through the router, clear, feedback, and
memory isolation between users."""

from __future__ import annotations

import mimetypes
import os
import uuid

import httpx
import pytest

from store.knowledge import format_for
from tests.integration.conftest import ADMIN_USER, API_KEYS, KB_DATA, cli, key, sql, stored_item, tool_messages, user

pytestmark = pytest.mark.integration

DESCRIPTION = "Greenhouse irrigation guide with controller fault codes, lighthouse keeper notes, staff handbook"


@pytest.fixture(scope="module")
def kb(dev_server, pg_uri) -> str:
    """tests/data/kb in a knowledge base without an owner (shared): ingested with the CLI into
    the server's store (schema it_server), or on Aegra uploaded by the administrator through
    /api/v1/kb to one replica (the others find it, its graph included, in Postgres)."""
    name = f"kb_{uuid.uuid4().hex[:8]}"
    if dev_server.kind == "aegra":
        files = [
            ("files", (path.name, path.read_bytes(), mimetypes.guess_type(path.name)[0] or "text/plain"))
            for path in sorted(KB_DATA.rglob("*"))
            if path.is_file() and format_for(path.name) is not None
        ]
        with httpx.Client(base_url=dev_server.url, headers={"x-api-key": API_KEYS[ADMIN_USER]}, timeout=300) as http:
            created = http.post("/api/v1/kb", json={"name": name, "description": DESCRIPTION})
            assert created.status_code == 201, created.text
            uploaded = http.post(f"/api/v1/kb/{name}/documents", files=files)
            assert uploaded.status_code == 200, uploaded.text
        return name
    env = {**os.environ, "POSTGRES_URI": pg_uri, "POSTGRES_SCHEMA": "it_server"}
    result = cli("ingest", name, str(KB_DATA), "--description", DESCRIPTION, env=env)
    assert result.returncode == 0, result.stderr
    return name


async def stream(client, thread_id, payload=None, *, context=None, subgraphs=False):
    """Stream one router run; return (run_id, [(event, data)])."""
    parts = []
    async for part in client.runs.stream(
        thread_id,
        "router",
        input=payload,
        context=context or {},
        stream_mode=["messages-tuple", "custom", "updates"],
        stream_subgraphs=subgraphs,
    ):
        parts.append((part.event, part.data))
    assert not [data for event, data in parts if event == "error"], parts
    run_id = next(data["run_id"] for event, data in parts if event == "metadata")
    return run_id, parts


def custom(parts, kind=None):
    return [
        data for event, data in parts if event.split("|")[0] == "custom" and (kind is None or data["event"] == kind)
    ]


def tokens(parts, node=None, namespace_prefix=None):
    text = ""
    for event, data in parts:
        name, _, namespace = event.partition("|")
        if name != "messages" or (namespace_prefix is not None and not namespace.startswith(namespace_prefix)):
            continue
        chunk, meta = data
        if (node is None or meta.get("langgraph_node") == node) and isinstance(chunk.get("content"), str):
            text += chunk["content"]
    return text


async def test_retrieval_answer_with_sources_and_checked_citations(dev_server, openai_server, kb):
    alice = dev_server.client("alice")  # a regular user: knowledge bases are read-only for her, searchable by runs
    k = key()
    openai_server.script(
        k,
        [
            {
                "content": "Fault ZX-4480 means the tank float switch is stuck [1]. See also [9].",
                "delay_per_token": 0.005,
            }
        ],
    )
    thread = await alice.threads.create()
    run_id, parts = await stream(
        alice, thread["thread_id"], user(f"{k} What does fault code ZX-4480 mean?"), context={"kb": kb}
    )
    [decision] = custom(parts, "route_decided")
    assert decision["route"] == "retrieval" and decision["method"] == "requested"
    assert decision["worker_name"] == f"{kb}:hybrid_agent:retrieve_only" and decision["requested_kb_prefix"] == kb
    retrieval = [e for e in custom(parts, "progress") if e["stage"] == "retrieval"]
    assert sorted(e["completed"] for e in retrieval) == [1, 2, 3] and all(e["error"] is None for e in retrieval)
    assert "[9]" in tokens(parts, node="answer")  # streamed as generated ...
    [check] = custom(parts, "citations_checked")
    assert check["invalid_numbers"] == [9] and check["cited"] == 1
    state = (await alice.threads.get_state(thread["thread_id"]))["values"]
    final = state["messages"][-1]
    assert final["type"] == "ai" and "[9]" not in final["content"] and "[1]" in final["content"]  # ... stored checked
    sources = state["sources"]
    assert sources[0]["title"] == "Greenhouse Irrigation Guide" and sources[0]["source"].endswith("greenhouse.md")
    assert all(s["kb"] == kb and s["chunk_id"] for s in sources)
    assert {e["agent_type"] for e in state["execution_log"]} == {"hybrid_agent", "dense_agent", "keyword_agent"}
    assert state["answered_runs"][-1]["run_id"] == run_id
    # the model was given the retrieved passages
    request = [r for r in openai_server.requests() if k in str(r.get("messages"))][-1]
    assert (
        "ZX-4480" in request["messages"][0]["content"]
        and "[1] Greenhouse Irrigation Guide" in request["messages"][0]["content"]
    )
    # an unknown KB is an error naming the existing ones, not a fallback
    _, parts = await stream(alice, thread["thread_id"], user("anything"), context={"kb": "no_such_kb"})
    [error] = custom(parts, "router_error")
    assert "no_such_kb" in error["error"] and kb in error["error"]


async def test_classified_route_streams_the_sub_agents_tokens_and_events(dev_server, openai_server, kb):
    bob = dev_server.client("bob")
    k = key()
    openai_server.script(
        k,
        [
            {
                "tool_calls": [
                    {
                        "name": "RouteChoice",
                        "id": "r1",
                        "args": {"route": "react", "confidence": 0.9, "reason": "needs a calculation"},
                    }
                ]
            },
            {"tool_calls": [{"name": "calculator", "args": {"expression": "6*7"}, "id": "c1"}]},
            {"content": "six times seven is forty-two", "delay_per_token": 0.005},
        ],
    )
    thread = await bob.threads.create()
    _, parts = await stream(bob, thread["thread_id"], user(f"{k} help me with my sums"), subgraphs=True)
    [decision] = custom(parts, "route_decided")
    assert (decision["method"], decision["route"], decision["worker_name"]) == ("llm", "react", "")
    assert decision["reason"] == "needs a calculation"
    # the classification went out as a JSON-schema request with the KB list, and was not streamed
    first = [r for r in openai_server.requests() if k in str(r.get("messages"))][0]
    assert first["response_format"]["json_schema"]["name"] == "RouteChoice" and kb in first["messages"][0]["content"]
    assert not any(
        meta.get("langgraph_node") == "decide_route"
        for e, (c, meta) in [(e, d) for e, d in parts if e.startswith("messages")]
    )
    # the sub-agent's tokens and custom events reach the client under its namespace
    sub_events = [(event, data) for event, data in parts if event.startswith("custom|react:")]
    assert any(data["event"] == "tool_call_finished" and "42" in data["result_preview"] for _, data in sub_events)
    assert "forty-two" in tokens(parts, namespace_prefix="react:")
    state = (await bob.threads.get_state(thread["thread_id"]))["values"]
    assert [m["type"] for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    assert state["messages"][-1]["content"] == "six times seven is forty-two"


async def test_clear_and_feedback_on_the_owners_thread(dev_server, openai_server):
    alice, bob = dev_server.client("alice"), dev_server.client("bob")
    k = key()
    openai_server.script(k, ["Hello Alice!"])
    thread = await alice.threads.create()
    tid = thread["thread_id"]
    run_id, _ = await stream(alice, tid, user(f"{k} Hello!"), context={"route": "general"})
    # only the thread's owner can leave feedback: bob cannot run on alice's thread
    with pytest.raises(Exception) as refused:
        await bob.runs.wait(tid, "router", input={"feedback": {"run_id": run_id, "score": "down"}})
    assert getattr(refused.value, "response", None) is not None and refused.value.response.status_code in (403, 404)
    _, parts = await stream(alice, tid, {"feedback": {"run_id": run_id, "score": "up", "comment": "spot on"}})
    [recorded] = custom(parts, "feedback_recorded")
    assert recorded == {**recorded, "run_id": run_id, "score": "up", "sink": "store"}
    item = await alice.store.get_item(["memories", "alice", "feedback"], run_id)
    assert (
        item["value"]["score"] == "up" and item["value"]["comment"] == "spot on" and item["value"]["thread_id"] == tid
    )
    _, parts = await stream(alice, tid, {"feedback": {"run_id": "not-a-run", "score": "up"}})
    assert "answered runs: " + run_id in custom(parts, "router_error")[0]["error"]
    chat_before = await alice.store.search_items(["memories", "alice", "chat"], limit=100)
    assert any(k in i["value"]["text"] for i in chat_before["items"])  # the turn was recorded in long-term history
    # clear: messages and summary gone, memories kept, thread usable again
    _, parts = await stream(alice, tid, {"clear": True})
    assert custom(parts, "conversation_cleared")[0]["removed_messages"] == 2
    state = (await alice.threads.get_state(tid))["values"]
    assert state["messages"] == [] and state["summary"] == ""
    chat_after = await alice.store.search_items(["memories", "alice", "chat"], limit=100)
    assert len(chat_after["items"]) == len(chat_before["items"])
    assert (await alice.store.get_item(["memories", "alice", "feedback"], run_id)) is not None


async def test_a_users_router_run_never_reads_another_users_memories(dev_server, openai_server):
    alice, bob = dev_server.client("alice"), dev_server.client("bob")
    secret = f"s{uuid.uuid4().hex[:8]}"
    k_save = key()
    openai_server.script(
        k_save,
        [
            {
                "tool_calls": [
                    {
                        "name": "save_memory",
                        "id": "m1",
                        "args": {"text": f"The user's locker code is {secret}", "kind": "semantic", "category": "fact"},
                    }
                ]
            },
            "Saved.",
        ],
    )
    thread = await alice.threads.create()
    await alice.runs.wait(
        thread["thread_id"], "router", input=user(f"{k_save} remember my locker code"), context={"route": "general"}
    )
    assert tool_messages(await alice.threads.get_state(thread["thread_id"]))["m1"]["status"] != "error"

    def lookup() -> list:
        return [
            {"tool_calls": [{"name": "search_semantic_memory", "id": "q1", "args": {"query": "locker code"}}]},
            "Here is what I know.",
        ]

    k_bob, k_alice = key(), key()
    openai_server.script(k_bob, lookup())
    openai_server.script(k_alice, lookup())
    bob_thread = await bob.threads.create()
    # bob even names alice as the context's user: the run still acts for bob
    await bob.runs.wait(
        bob_thread["thread_id"],
        "router",
        input=user(f"{k_bob} what is my locker code?"),
        context={"route": "general", "user_id": "alice"},
    )
    bob_result = tool_messages(await bob.threads.get_state(bob_thread["thread_id"]))["q1"]
    assert secret not in str(bob_result["content"])
    alice_thread = await alice.threads.create()
    await alice.runs.wait(
        alice_thread["thread_id"],
        "router",
        input=user(f"{k_alice} what is my locker code?"),
        context={"route": "general", "recall_answer_similarity": 0},  # the lookup path, no short check first
    )
    alice_result = tool_messages(await alice.threads.get_state(alice_thread["thread_id"]))["q1"]
    assert secret in str(alice_result["content"])  # the same lookup finds it for its owner


async def test_feedback_names_only_runs_of_its_own_thread(dev_server, openai_server):
    """The thread's state is the user's to write: bob copies alice's run id into his thread's
    `answered_runs`, but feedback is checked against the server's own run records."""
    alice, bob = dev_server.client("alice"), dev_server.client("bob")
    k_alice, k_bob = key(), key()
    openai_server.script(k_alice, ["Hello Alice!"])
    openai_server.script(k_bob, ["Hello Bob!"])
    alice_thread = await alice.threads.create()
    alice_run, _ = await stream(
        alice, alice_thread["thread_id"], user(f"{k_alice} Hello!"), context={"route": "general"}
    )
    bob_thread = await bob.threads.create()
    tid = bob_thread["thread_id"]
    await stream(bob, tid, user(f"{k_bob} Hello!"), context={"route": "general"})
    forged = {"run_id": alice_run, "route": "general", "message_id": "forged"}
    await bob.threads.update_state(tid, {"answered_runs": [forged]}, as_node="finish_turn")
    assert forged in (await bob.threads.get_state(tid))["values"]["answered_runs"]

    _, parts = await stream(bob, tid, {"feedback": {"run_id": alice_run, "score": "down", "comment": "forged"}})
    assert custom(parts, "feedback_recorded") == []
    [error] = custom(parts, "router_error")
    assert error["stage"] == "feedback" and alice_run in error["error"] and "not a run of this thread" in error["error"]
    assert await stored_item(bob, ["memories", "bob", "feedback"], alice_run) is None
    assert await stored_item(alice, ["memories", "alice", "feedback"], alice_run) is None
    assert not (await bob.threads.get_state(tid))["values"].get("feedback_log")

    # alice's feedback on her own run is recorded
    _, parts = await stream(alice, alice_thread["thread_id"], {"feedback": {"run_id": alice_run, "score": "up"}})
    [recorded] = custom(parts, "feedback_recorded")
    assert recorded["run_id"] == alice_run and recorded["sink"] == "store"
    record = (await alice.store.get_item(["memories", "alice", "feedback"], alice_run))["value"]
    assert record["score"] == "up"
    # what it is about: the question, the graph and route that answered, the answer's metadata
    assert record["question"] == f"{k_alice} Hello!" and record["graph"] == "router"
    assert record["agent_type"] == "general" and record["metadata"]["model"] and record["metadata"]["created_at"]
    assert record["metadata"]["web_search"] is False  # the general route offers memory tools only


async def test_progress_and_sources_as_generative_ui_messages_in_the_stream_and_the_thread(
    dev_server, openai_server, kb
):
    """agent-chat-ui keeps only UI messages from the custom stream and renders `values.ui` under the
    message each names: the route, retrieval progress and the checked citations with their sources."""
    alice = dev_server.client("alice")
    k = key()
    openai_server.script(k, [{"content": "Fault ZX-4480 means the tank float switch is stuck [1]."}])
    thread = (await alice.threads.create())["thread_id"]
    run_id, parts = await stream(alice, thread, user(f"{k} What does fault code ZX-4480 mean?"), context={"kb": kb})
    ui = [data for event, data in parts if event == "custom" and data.get("type") == "ui"]
    assert {m["name"] for m in ui} == {"route_decision", "retrieval_progress", "citations"}
    assert all(m["event"] == "ui" and m["id"].startswith(f"{m['name']}:{run_id}:") for m in ui)
    [route] = [m for m in ui if m["name"] == "route_decision"]
    assert route["props"]["route"] == "retrieval" and route["props"]["kb_prefix"] == kb
    state = (await alice.threads.get_state(thread))["values"]
    cards = {m["name"]: m for m in state["ui"]}
    answer = state["messages"][-1]
    assert {m["metadata"]["message_id"] for m in state["ui"]} == {answer["id"]}
    sources = cards["citations"]["props"]["sources"]
    assert sources[0]["index"] == 1 and sources[0]["title"] == "Greenhouse Irrigation Guide"
    assert sources[0]["source"].endswith("greenhouse.md") and cards["citations"]["props"]["cited"] == 1
    assert cards["retrieval_progress"]["props"]["stage"] == "generation"


async def test_a_chat_message_answers_a_sub_agents_plan_approval_on_the_router_thread(dev_server, openai_server):
    alice = dev_server.client("alice")
    k = key()
    step = {"id": "a", "description": "6*7", "tool": "calculator", "args": {"expression": "6*7"}, "depends_on": []}
    plan = {"content": "", "tool_calls": [{"name": "Plan", "args": {"steps": [step]}}]}
    openai_server.script(k, [plan, "It is 42.", plan, "Still 42."])
    context = {"route": "plan_execute", "approve_plan": True}
    thread = (await alice.threads.create())["thread_id"]
    await alice.runs.wait(thread, "router", input=user(f"{k} compute 6*7"), context=context)
    state = await alice.threads.get_state(thread)
    value = state["tasks"][0]["interrupts"][0]["value"]
    assert state["next"] == ["await_reply"] and value["action_requests"][0]["name"] == "Review the plan"
    final = await alice.runs.wait(thread, "router", input=user("yes"), context=context)
    assert final["messages"][-1]["content"] == "It is 42." and final["pending"] is None
    assert final["messages"][1]["additional_kwargs"]["plan_review"] == "approve"
    # The older resume shape on the router keeps working.
    thread = (await alice.threads.create())["thread_id"]
    await alice.runs.wait(thread, "router", input=user(f"{k} compute 6*7 again"), context=context)
    final = await alice.runs.wait(thread, "router", command={"resume": {"action": "approve"}}, context=context)
    assert final["messages"][-1]["content"] == "Still 42."


async def test_graph_worker_by_name_and_multi_hop_questions_to_graph_and_fusion(dev_server, openai_server, kb, pg_uri):
    # the graph is in Postgres beside the server's store, for every replica (Aegra: its own store's schema)
    entities = sql(pg_uri, f"SELECT count(*) FROM {dev_server.schema}.kb_graph_entities WHERE kb = %s", (kb,))
    assert entities[0][0] > 0
    alice = dev_server.client("alice")
    k = key()
    openai_server.script(k, [{"content": "The keeper starts the diaphone [1]."}] * 2)
    thread = await alice.threads.create()
    # a worker named `{kb}:graph_agent:retrieve_only` answers through the router
    _, parts = await stream(
        alice,
        thread["thread_id"],
        user(f"{k} What does the Skerryvore keeper start in fog?"),
        context={"kb": kb, "retrieval_agents": ["graph_agent"]},
    )
    [decision] = custom(parts, "route_decided")
    assert decision["worker_name"] == f"{kb}:graph_agent:retrieve_only"
    state = (await alice.threads.get_state(thread["thread_id"]))["values"]
    assert [
        (e["agent_type"], e["status"], e["error"]) for e in state["execution_log"] if e.get("node") == "retrieve"
    ] == [("graph_agent", "success", None)]
    assert state["sources"][0]["source"].endswith("lighthouse.txt")
    [evidence] = custom(parts, "evidence")
    assert evidence["agent_type"] == "graph_agent" and evidence["paths"][0]["path"] == ["Skerryvore"]
    # a multi-hop question goes to the fusion and graph workers first, beside the configured ones
    _, parts = await stream(
        alice,
        thread["thread_id"],
        user(f"{k} Do both the Skerryvore keeper and the greenhouse guide mention a pump?"),
        context={"kb": kb},
    )
    [decision] = custom(parts, "route_decided")
    assert decision["worker_name"] == f"{kb}:fusion_agent:retrieve_only" and "multi-hop" in decision["reason"]
    state = (await alice.threads.get_state(thread["thread_id"]))["values"]
    agents = {e["agent_type"]: e["status"] for e in state["execution_log"][-5:] if e.get("node") == "retrieve"}
    assert agents == dict.fromkeys(
        ("fusion_agent", "graph_agent", "hybrid_agent", "dense_agent", "keyword_agent"), "success"
    )
    assert any(s.get("path") for s in state["sources"])


async def test_a_sub_agents_step_cards_name_its_progress_message_on_the_router_stream(dev_server, openai_server):
    """Under the router, agent-chat-ui (values, messages-tuple and custom with subgraphs) gets the
    sub-agent's progress message on the messages stream and the step cards naming it, while the
    router's node runs; the router's final state has every card under the answer."""
    alice = dev_server.client("alice")
    k = key()
    step = {"id": "a", "description": "6*7", "tool": "calculator", "args": {"expression": "6*7"}, "depends_on": []}
    openai_server.script(k, [{"content": "", "tool_calls": [{"name": "Plan", "args": {"steps": [step]}}]}, "It is 42."])
    thread = (await alice.threads.create())["thread_id"]
    progress_ids, card_links = [], []
    async for part in alice.runs.stream(
        thread,
        "router",
        input=user(f"{k} compute 6*7"),
        context={"route": "plan_execute"},
        stream_mode=["values", "messages-tuple", "custom"],
        stream_subgraphs=True,
    ):
        assert part.event != "error", part.data
        if part.event.startswith("messages|") and part.data[0]["id"].startswith("progress-"):
            progress_ids.append(part.data[0]["id"])
        if part.event.startswith("custom|") and part.data.get("name") == "plan_step":
            card_links.append(part.data["metadata"]["message_id"])
    assert len(set(progress_ids)) == 1 and card_links and set(card_links) == set(progress_ids)
    final = (await alice.threads.get_state(thread))["values"]
    # The cards stay under the progress message, above the answer (no jump when the run ends).
    assert [m["id"] for m in final["messages"][1:2]] == progress_ids[:1]
    assert [m["type"] for m in final["messages"]] == ["human", "ai", "ai"]
    assert final["messages"][-1]["content"] == "It is 42."
    assert {m["metadata"]["message_id"] for m in final["ui"]} == set(progress_ids)


async def test_sources_name_documents_without_the_servers_file_paths(dev_server, openai_server, kb):
    """The KB was ingested by the CLI from a folder on the server: chat users (the answer text,
    the citations card, the stream's events) and the answer model see each document by its title
    and file name, never by the server's path to it."""
    alice = dev_server.client("alice")
    k = key()
    folder = str(KB_DATA.resolve())
    # No citation: the answer gets the list of the sources it was written from attached.
    openai_server.script(k, [{"content": "Fault ZX-4480 means the tank float switch is stuck."}])
    thread = (await alice.threads.create())["thread_id"]
    _, parts = await stream(alice, thread, user(f"{k} What does fault code ZX-4480 mean?"), context={"kb": kb})
    assert folder not in str(parts)
    state = (await alice.threads.get_state(thread))["values"]
    answer = state["messages"][-1]["content"]
    assert "Sources:\n[1] Greenhouse Irrigation Guide (greenhouse.md" in answer and folder not in answer
    assert folder not in str(state)
    [card] = [m for m in state["ui"] if m["name"] == "citations"]
    assert card["props"]["sources"][0]["source"] == "greenhouse.md"
    request = [r for r in openai_server.requests() if k in str(r.get("messages"))][-1]
    assert "greenhouse.md" in str(request["messages"]) and folder not in str(request["messages"])
