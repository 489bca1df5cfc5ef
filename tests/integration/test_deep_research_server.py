"""deep_research served by a real `langgraph dev`, driven by langgraph-sdk, searching a loopback engine."""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest

from tests.integration.conftest import KB_DATA, DevServer, cli, key, server_env, user
from tests.unit.test_deep_research import CORPUS, SearchEngine, most_at_once
from tests.web_servers import LoopbackServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def engine():
    with LoopbackServer() as server:
        yield SearchEngine(server)


@pytest.fixture(scope="module")
def research_server(pg_uri, openai_server, engine, tmp_path_factory):
    """`langgraph dev` whose web_search goes to the loopback engine (loopback fetches allowed)."""
    env = server_env(
        openai_server,
        POSTGRES_URI=pg_uri,
        POSTGRES_SCHEMA="it_deep_research",
        SEARXNG_URL=engine.server.base_url,
        WEB_ALLOW_LOOPBACK="1",
        AGENT_TOOL_RETRIES="0",
        WEB_SEARCH_PROVIDER="",
        TAVILY_API_KEY="",
        JINA_API_KEY="",
    )
    server = DevServer(tmp_path_factory.mktemp("deep-research"), env)
    server.start()
    yield server
    server.stop()


def plan_call(k: str, *topics: str) -> dict:
    return {
        "tool_calls": [
            {
                "name": "ResearchPlan",
                "id": "plan",
                "args": {
                    "brief": f"{k} Compare solar kettles and wind pumps.",
                    "sub_questions": [{"question": f"What about the {t}?", "queries": [f"{t} facts"]} for t in topics],
                },
            }
        ]
    }


async def collect(stream) -> dict[str, list]:
    parts: dict[str, list] = {}
    async for part in stream:
        parts.setdefault(part.event, []).append(part.data)
    assert "error" not in parts, parts.get("error")
    return parts


def custom(parts: dict, kind: str) -> list[dict]:
    return [e for e in parts.get("custom", []) if e["event"] == kind]


async def test_clarify_resume_parallel_research_and_validated_report(research_server, openai_server, engine):
    client = research_server.client(None)
    k = key()
    kettle, pump = engine.url("/doc/kettle-basics"), engine.url("/doc/pump-history")
    notes = f"- A solar kettle boils a litre in twenty minutes [{kettle}]\n- Wind pumps date from the 1850s [{pump}]"
    openai_server.script(
        k,
        [
            {
                "tool_calls": [
                    {
                        "name": "ClarifyDecision",
                        "id": "c1",
                        "args": {"need_clarification": True, "question": "For which climate?"},
                    }
                ]
            },
            plan_call(k, "kettle", "pump"),
            notes,
            notes,
            {
                "content": "# Kettles and pumps\n\nKettles are quick [1]. Pumps are old [2]. "
                "A lab says otherwise [7] (https://invented.example/lab).\n\n## Sources\n"
                f"[1] Solar kettles: {kettle}\n[2] Wind pumps: {pump}\n",
                "delay_per_token": 0.005,
            },
        ],
    )
    context = {"allow_clarification": True, "max_research_rounds": 1, "max_concurrent_research_units": 2}
    thread = (await client.threads.create())["thread_id"]
    first = await collect(
        client.runs.stream(
            thread,
            "deep_research",
            input=user(f"{k} research water devices"),
            context=context,
            stream_mode=["custom", "updates"],
        )
    )
    assert custom(first, "clarification_requested")[0]["question"] == "For which climate?"
    state = await client.threads.get_state(thread)
    assert state["next"] == ["ask_user"]
    value = state["tasks"][0]["interrupts"][0]["value"]
    assert value["question"] == "For which climate?"  # beside the standard HITL request
    assert value["action_requests"][0]["args"] == {"question": "For which climate?", "answer": ""}
    assert engine.timings == []

    parts = await collect(
        client.runs.stream(
            thread,
            "deep_research",
            command={"resume": "A hot, dry one"},
            context=context,
            stream_mode=["messages-tuple", "custom", "updates"],
        )
    )
    kinds = [e["event"] for e in parts["custom"]]
    assert kinds.index("research_plan") < kinds.index("researcher_started") < kinds.index("report_writing")
    started = custom(parts, "researcher_started")
    assert sorted(e["researcher_id"] for e in started) == ["r1.1", "r1.2"]
    assert all(e["status"] == "success" for e in custom(parts, "researcher_finished"))
    # The two researchers searched at the same time (overlap of the engine's recorded requests).
    assert most_at_once(engine.intervals(["kettle", "pump"])) == 2

    # Only the report streamed as model tokens, in many chunks (ask_user's messages come whole).
    chunks = [(c, m) for c, m in parts["messages"] if c.get("content") and c["type"] == "AIMessageChunk"]
    assert {m["langgraph_node"] for _, m in chunks} == {"write_report"} and len(chunks) > 10
    whole = {(m["langgraph_node"], c["id"]) for c, m in parts["messages"] if c["type"] != "AIMessageChunk"}
    # The plan node's only message is the empty progress message the research cards show under
    # while the researchers run (agent-chat-ui renders a card under the message it names).
    [progress] = [(c["id"], c["content"]) for c, m in parts["messages"] if m["langgraph_node"] == "plan"]
    assert progress[0].startswith("progress-") and progress[1] == ""
    assert {node for node, _ in whole} <= {"ask_user", "plan", "write_report"}
    cards = [e for e in parts["custom"] if e["event"] == "ui" and e["name"] in ("researcher", "research_progress")]
    assert {e["props"].get("researcher_id") for e in cards} >= {"r1.1", "r1.2"}
    assert {e["metadata"]["message_id"] for e in cards} == {progress[0]}

    [check] = custom(parts, "citations_checked")
    assert check["invented_urls"] == ["https://invented.example/lab"] and check["invalid_numbers"] == [7]
    final = (await client.threads.get_state(thread))["values"]
    report = final["report"]
    assert "invented.example" not in report and "[7]" not in report
    retrieved = {engine.url(path) for pages in CORPUS.values() for path, _, _ in pages}
    assert set(re.findall(r"https?://\S+", report)) <= retrieved and kettle in report
    messages = final["messages"]
    assert [m["content"] for m in messages[1:3]] == ["For which climate?", "A hot, dry one"]
    assert messages[-1]["type"] == "ai" and messages[-1]["content"] == report
    # At the end the cards stay under the progress message, just above the report: the report
    # does not jump above them when the run ends.
    assert messages[-2]["id"] == progress[0] and messages[-2]["content"] == ""
    assert {m["metadata"]["message_id"] for m in final["ui"]} == {progress[0]}
    assert final["plan"] == ["What about the kettle?", "What about the pump?"] and len(final["notes"]) == 2
    # The plan model saw the user's answer.
    plan_request = [r for r in openai_server.requests() if k in str(r.get("messages"))][1]
    assert "A hot, dry one" in str(plan_request["messages"])


async def test_plan_only_answers_with_the_plan(research_server, openai_server, engine):
    client = research_server.client(None)
    k = key()
    openai_server.script(k, [plan_call(k, "clock", "oven")])
    before = len(engine.timings)
    thread = (await client.threads.create())["thread_id"]
    final = await client.runs.wait(
        thread,
        "deep_research",
        input=user(f"{k} plan it"),
        context={"plan_only": True},
    )
    assert "1. What about the clock?" in final["messages"][-1]["content"]
    assert final["plan"] == ["What about the clock?", "What about the oven?"]
    assert len(engine.timings) == before


async def test_every_search_failing_ends_with_an_error_event_not_a_report(research_server, openai_server, engine):
    client = research_server.client(None)
    k = key()
    openai_server.script(k, [plan_call(k, "dryer")])
    engine.failing.add("all")
    try:
        thread = (await client.threads.create())["thread_id"]
        parts = await collect(
            client.runs.stream(
                thread,
                "deep_research",
                input=user(f"{k} research dryers"),
                context={"max_research_rounds": 1},
                stream_mode=["custom", "values"],
            )
        )
    finally:
        engine.failing.discard("all")
    [failure] = custom(parts, "research_failed")
    assert "HTTP 500" in failure["error"]
    final = parts["values"][-1]
    assert final["report"] == "" and final["messages"][-1]["content"].startswith("I could not research this")


async def test_the_question_answered_with_a_respond_decision_then_by_a_chat_message(research_server, openai_server):
    """Agent Inbox answers with `respond`; in agent-chat-ui a user may just type the answer."""
    client = research_server.client(None)
    k = key()
    ask = {
        "tool_calls": [
            {"name": "ClarifyDecision", "id": "c1", "args": {"need_clarification": True, "question": "Which climate?"}}
        ]
    }
    openai_server.script(k, [ask, plan_call(k, "kettle"), ask, plan_call(k, "pump")])
    context = {"allow_clarification": True, "plan_only": True}
    for answer in (
        {"command": {"resume": {"decisions": [{"type": "respond", "message": "A hot one"}]}}},
        {"input": user("A hot one")},
    ):
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "deep_research", input=user(f"{k} research water devices"), context=context)
        assert (await client.threads.get_state(thread))["next"] == ["ask_user"]
        await client.runs.wait(thread, "deep_research", context=context, **answer)
        state = await client.threads.get_state(thread)
        assert state["next"] == [] and state["values"]["clarification"] == ""
        texts = [(m["type"], m["content"]) for m in state["values"]["messages"][:3]]
        assert texts[1:] == [("ai", "Which climate?"), ("human", "A hot one")]


async def test_knowledge_base_sources_are_named_without_the_servers_file_paths(
    research_server, openai_server, engine, pg_uri
):
    """A KB ingested by the CLI from a folder on the server: the report's Sources list, the
    state's sources and the stream name its documents `kb://<kb>/<file name>`, never by the
    server's path to them."""
    kb = f"kb_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "POSTGRES_URI": pg_uri, "POSTGRES_SCHEMA": "it_deep_research"}
    ingested = cli("ingest", kb, str(KB_DATA), "--description", "greenhouse guide", env=env)
    assert ingested.returncode == 0, ingested.stderr
    folder = str(KB_DATA.resolve())
    k = key()
    notes = "- Fault ZX-4480 means the tank float switch is stuck [1]"
    report = "# Greenhouse faults\n\nFault ZX-4480 means the float switch is stuck [1][2][3]."
    openai_server.script(k, [plan_call(k, "greenhouse fault ZX-4480"), notes, report])
    client = research_server.client(None)
    thread = (await client.threads.create())["thread_id"]
    parts = await collect(
        client.runs.stream(
            thread,
            "deep_research",
            input=user(f"{k} what does fault ZX-4480 mean"),
            context={"knowledge_bases": [kb], "max_research_rounds": 1},
            stream_mode=["custom", "updates", "messages-tuple"],
        )
    )
    assert folder not in json.dumps(parts)
    final = (await client.threads.get_state(thread))["values"]
    assert folder not in json.dumps(final)
    assert f"kb://{kb}/greenhouse.md" in {s["url"] for s in final["sources"]}
    assert f"kb://{kb}/greenhouse.md" in final["report"]
    compress = [r for r in openai_server.requests() if k in str(r.get("messages"))][1]
    assert "float switch" in str(compress["messages"]) and folder not in str(compress["messages"])
