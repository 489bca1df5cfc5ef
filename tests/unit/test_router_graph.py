"""The router graph with a scripted model: route table, retrieval fan-out, citations, extractive
answers, clear and feedback."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

import graphs.router.graph as router
from graphs.router import feedback as feedback_sink
from graphs.router.context import RouterContext
from graphs.router.intent import is_multi_hop
from graphs.runtime.models import ModelConfigError
from graphs.runtime.prompts import SHARED_PREAMBLE
from graphs.runtime.ui import is_progress
from store import knowledge, memory
from store.embeddings import get_embeddings
from tests.fakes import ScriptedChatModel
from tools.memory import MEMORY_TOOLS

KB_DATA = Path(__file__).resolve().parents[1] / "data" / "kb"
DESCRIPTION = "Greenhouse irrigation guide with controller fault codes, lighthouse keeper notes, otters, staff handbook"


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setenv("AGENT_RETRY_BASE_DELAY", "0.01")


@pytest.fixture(scope="module")
async def demo_store():
    """tests/data/kb ingested into the knowledge base `demo` (memories indexed on `text`)."""
    store = InMemoryStore(index={"dims": 384, "embed": get_embeddings(), "fields": ["content", "text"]})
    await knowledge.create_kb(store, "demo", DESCRIPTION)
    await knowledge.ingest_path(store, "demo", KB_DATA)
    return store


async def run(
    model_slot, store, responses, *, context=None, message="hi", thread="t1", graph=None, run_id=None, payload=None
):
    """One run; returns (state, custom events, message chunks, model, graph)."""
    model = ScriptedChatModel(responses=responses)
    model_slot["model"] = model
    graph = graph or router.builder.compile(checkpointer=InMemorySaver(), store=store)
    ctx = RouterContext(model="scripted:test", remember=False, **(context or {}))
    # LangGraph treats a repeated run_id as the same run: every run gets its own.
    config = {"configurable": {"thread_id": thread}, "metadata": {"run_id": run_id or f"run-{uuid.uuid4().hex[:8]}"}}
    events, chunks = [], []
    async for namespace, mode, chunk in graph.astream(
        payload if payload is not None else {"messages": [HumanMessage(message)]},
        config,
        context=ctx,
        stream_mode=["custom", "messages"],
        subgraphs=True,
    ):
        (events if mode == "custom" else chunks).append((namespace, chunk) if mode == "messages" else chunk)
    state = (await graph.aget_state(config)).values
    return state, events, chunks, model, graph


def kinds(events, kind):
    return [e for e in events if e["event"] == kind]


def decision(events):
    [event] = kinds(events, "route_decided")
    return event


def streamed_text(chunks, node):
    return "".join(
        c.content for ns, (c, meta) in chunks if meta.get("langgraph_node") == node and isinstance(c.content, str)
    )


# --- route table ---------------------------------------------------------------------------


async def test_general_route_is_react_with_the_memory_tools_only(model_slot, demo_store):
    state, events, chunks, model, _ = await run(
        model_slot, demo_store, ["Hello to you too!"], message="Hello!", run_id="run-1"
    )
    route = decision(events)
    assert (route["route"], route["method"], route["worker_name"], route["kb_prefix"]) == (
        "general",
        "heuristic",
        "",
        "general",
    )
    assert set(route) >= {
        "requested_kb_prefix",
        "routed_kb_prefix",
        "kb_prefix",
        "confidence",
        "method",
        "reason",
        "worker_name",
    }
    assert sorted(model.calls[0].tool_names) == sorted(t.__name__ for t in MEMORY_TOOLS)
    assert state["messages"][-1].content == "Hello to you too!"
    assert [m.type for m in state["messages"]] == ["human", "ai"]
    # the sub-agent's tokens reach the router's stream under the sub-agent's namespace
    assert any(ns and ns[0].startswith("general:") for ns, _ in chunks)
    assert state["answered_runs"] == [{"run_id": "run-1", "route": "general", "message_id": state["messages"][-1].id}]


async def test_requested_kb_fans_out_to_workers_and_answers_with_sources(model_slot, demo_store):
    state, events, chunks, model, _ = await run(
        model_slot,
        demo_store,
        ["Fault ZX-4480 means the tank float switch is stuck [1]."],
        context={"kb": "demo"},
        message="What does fault code ZX-4480 mean?",
    )
    route = decision(events)
    assert (route["route"], route["method"], route["requested_kb_prefix"], route["kb_prefix"]) == (
        "retrieval",
        "requested",
        "demo",
        "demo",
    )
    assert route["worker_name"] == "demo:hybrid_agent:retrieve_only" and route["confidence"] == 1.0
    assert state["plan"] == [
        {"agent_type": t, "worker_name": f"demo:{t}:retrieve_only"}
        for t in ("hybrid_agent", "dense_agent", "keyword_agent")
    ]
    progress = [e for e in kinds(events, "progress") if e["stage"] == "retrieval"]
    assert sorted(e["completed"] for e in progress) == [1, 2, 3] and {e["total"] for e in progress} == {3}
    assert {e["agent_type"] for e in progress} == {"hybrid_agent", "dense_agent", "keyword_agent"}
    assert [e["stage"] for e in kinds(events, "progress")][0] == "routing"
    assert [e["status"] for e in state["execution_log"]] == ["success"] * 3
    sources = state["sources"]
    assert sources[0]["title"] == "Greenhouse Irrigation Guide" and sources[0]["kb"] == "demo"
    assert len({s["chunk_id"] for s in sources}) == len(sources) <= 5
    assert {"kb", "source", "title", "locator", "chunk_id"} <= set(sources[0])
    system = model.calls[0].messages[0].content
    assert "[1] Greenhouse Irrigation Guide" in system and "ZX-4480" in system
    answer = state["messages"][-1]
    assert isinstance(answer, AIMessage) and answer.content.endswith("stuck [1].")
    assert len(streamed_text(chunks, "answer")) > 0 and "[1]" in streamed_text(chunks, "answer")
    assert state["citation_check"]["cited"] == [1] and state["citation_check"]["invalid"] == []


async def test_kb_inferred_from_its_description(model_slot, demo_store):
    state, events, _, _, _ = await run(
        model_slot,
        demo_store,
        ["It is the float switch [1]."],
        message="Which greenhouse irrigation controller fault code means the float switch is stuck?",
    )
    route = decision(events)
    assert (route["route"], route["method"], route["routed_kb_prefix"], route["requested_kb_prefix"]) == (
        "retrieval",
        "heuristic",
        "demo",
        "",
    )
    assert "irrigation" in route["reason"]


HANDBOOK = "Staff handbook: vacation days, parental leave, expense reimbursement rules"
IRRIGATION = "Greenhouse irrigation controller manual with fault codes and watering schedules"


@pytest.fixture(scope="module")
async def handbook_store():
    """Two knowledge bases whose descriptions share no word with the questions asked of them."""
    store = InMemoryStore(index={"dims": 384, "embed": get_embeddings(), "fields": ["content", "text"]})
    await knowledge.create_kb(store, "hr_policies", HANDBOOK)
    await knowledge.ingest_text(store, "hr_policies", "Hotel and travel costs of work trips are refunded.", "e.md")
    await knowledge.create_kb(store, "greenhouse", IRRIGATION)
    await knowledge.ingest_text(store, "greenhouse", "Fault E4: the float switch is stuck.", "f.md")
    return store


async def test_a_question_close_in_meaning_to_a_kb_description_is_routed_there_without_the_model(
    model_slot, handbook_store
):
    state, events, _, model, _ = await run(
        model_slot,
        handbook_store,
        ["Work-trip hotels are refunded [1]."],
        message="Who pays me back for the hotel on a work trip?",
    )
    route = decision(events)
    assert (route["route"], route["kb_prefix"], route["method"]) == ("retrieval", "hr_policies", "heuristic")
    assert "of knowledge base 'hr_policies' (similarity 0." in route["reason"]
    assert [call.tool_names for call in model.calls] == [[]]  # the answer only: no classification asked
    assert state["messages"][-1].content == "Work-trip hotels are refunded [1]."


async def test_the_model_is_shown_the_closest_kb_first_and_a_retrieval_choice_without_kb_takes_it(
    model_slot, handbook_store
):
    # a threshold above the question's similarity: the model decides, helped by the ranking
    choice = {"route": "retrieval", "confidence": 0.7, "reason": "a reimbursement question"}
    _, events, _, model, _ = await run(
        model_slot,
        handbook_store,
        [{"tool_calls": [{"name": "RouteChoice", "args": choice}]}, "Refunded [1]."],
        message="Who pays me back for the hotel on a work trip?",
        context={"kb_similarity": 0.55},
    )
    route = decision(events)
    assert (route["route"], route["kb_prefix"], route["method"]) == ("retrieval", "hr_policies", "llm")
    assert "closest in meaning" in route["reason"]
    prompt = model.calls[0].messages[0].content
    assert prompt.index("- hr_policies: ") < prompt.index("- greenhouse: ")
    assert len(model.calls) == 2  # one classification, one answer: no re-ask


async def test_unknown_kb_is_an_error_naming_the_existing_ones(model_slot, demo_store):
    state, events, _, model, _ = await run(model_slot, demo_store, [], context={"kb": "nope"}, message="anything")
    [error] = kinds(events, "router_error")
    assert "Unknown knowledge base 'nope'" in error["error"] and "demo" in error["error"]
    assert decision(events)["route"] == "error" and decision(events)["worker_name"] == ""
    assert "demo" in state["messages"][-1].content and model.calls == []


async def test_auto_route_off_sends_everything_to_general(model_slot, demo_store):
    _, events, _, _, _ = await run(
        model_slot,
        demo_store,
        ["ok"],
        context={"auto_route": False},
        message="What does the demo knowledge base say about fault code ZX-4480 in the irrigation controller?",
    )
    route = decision(events)
    assert (route["route"], route["kb_prefix"], route["worker_name"], route["method"]) == (
        "general",
        "general",
        "",
        "policy",
    )


async def test_tool_cue_goes_to_react_with_its_tools(model_slot, demo_store):
    state, events, chunks, model, _ = await run(
        model_slot,
        demo_store,
        [{"tool_calls": [{"name": "calculator", "args": {"expression": "17*23"}, "id": "c1"}]}, "17*23 = 391"],
        message="What is 17*23?",
    )
    assert decision(events)["route"] == "react"
    assert "calculator" in model.calls[0].tool_names and "weather" in model.calls[0].tool_names
    assert any(isinstance(m, ToolMessage) and "391" in m.content for m in state["messages"])
    assert state["messages"][-1].content == "17*23 = 391"
    assert [e["tool"] for e in state["execution_log"]] == ["calculator"]
    assert kinds(events, "tool_call_finished")[0]["tool_call_id"] == "c1"  # sub-agent events come through


async def test_model_classifies_when_unsure_and_malformed_answers_are_retried(model_slot, demo_store):
    choice = {"route": "retrieval", "kb": "demo", "confidence": 0.8, "reason": "otters are in the fixtures"}
    state, events, chunks, model, _ = await run(
        model_slot,
        demo_store,
        [
            "I think general?",  # no tool call: malformed
            {"tool_calls": [{"name": "RouteChoice", "args": {**choice, "kb": "Demo"}}]},  # the KB, spelt otherwise
            "Otters live in rivers [1].",
        ],
        message="tell me about the animals",
    )
    route = decision(events)
    assert (route["route"], route["method"], route["kb_prefix"], route["confidence"]) == (
        "retrieval",
        "llm",
        "demo",
        0.8,
    )
    assert route["reason"] == "otters are in the fixtures"
    first = model.calls[0]
    assert first.tool_names == ["RouteChoice"] and "- demo: " + DESCRIPTION in first.messages[0].content
    assert "could not be used" in model.calls[1].messages[-1].content
    # classification is not streamed as answer tokens
    assert not any(meta.get("langgraph_node") == "decide_route" for ns, (c, meta) in chunks)
    assert state["messages"][-1].content == "Otters live in rivers [1]."


@pytest.mark.parametrize(
    ("answer", "route", "why"),
    [
        ({"route": "retrieval", "kb": "wildlife"}, "general", "knowledge base 'wildlife' does not exist"),
        ({"route": "weather"}, "general", "the model answered 'weather', not a route here"),
    ],
)
async def test_a_classification_that_cannot_be_valid_decides_at_once(model_slot, demo_store, answer, route, why):
    """A parseable answer naming a knowledge base or a route that does not exist is not asked
    again (each question to a small model on a CPU costs some 20 s)."""
    choice = {"confidence": 0.7, "reason": "a guess", **answer}
    _, events, _, model, _ = await run(
        model_slot,
        demo_store,
        [{"tool_calls": [{"name": "RouteChoice", "args": choice}]}, "Here is what I know."],
        message="tell me about the animals",
    )
    found = decision(events)
    assert (found["route"], found["method"]) == (route, "llm") and why in found["reason"]
    assert sum(call.tool_names == ["RouteChoice"] for call in model.calls) == 1  # asked once


async def test_classification_failing_for_good_falls_back_to_the_heuristic(model_slot, demo_store):
    _, events, _, _, _ = await run(
        model_slot,
        demo_store,
        ["nope", "still nope", "no", "fine"],
        message="tell me about the animals",
    )
    route = decision(events)
    assert route["method"] == "heuristic" and route["route"] == "general"
    assert "classification failed after 3 attempts" in route["reason"]


async def test_unserved_sub_agent_falls_back_to_react(monkeypatch):
    monkeypatch.setattr(router, "SUBAGENTS", {"react": router.react_graph})
    state = {
        "decision": {
            "requested_kb_prefix": "",
            "routed_kb_prefix": "",
            "kb_prefix": "",
            "confidence": 0.8,
            "method": "heuristic",
            "reason": "research cue 'in depth'",
            "route": "deep_research",
            "worker_name": "",
        }
    }
    update = await router.apply_override_policy(state["decision"], Runtime(context=RouterContext(), store=None))
    assert update["route"] == "react" and "deep_research is not served" in update["reason"]
    forced = await router.apply_override_policy(
        state["decision"], Runtime(context=RouterContext(route="nope"), store=None)
    )
    assert forced["route"] == "error" and "routes: general, retrieval, react" in forced["reason"]


async def test_plan_cue_hands_the_conversation_to_plan_execute(model_slot, demo_store):
    plan = {
        "tool_calls": [
            {
                "name": "Plan",
                "args": {
                    "steps": [
                        {
                            "id": "a",
                            "description": "compute",
                            "tool": "calculator",
                            "args": {"expression": "6*7"},
                            "depends_on": [],
                        }
                    ]
                },
            }
        ]
    }
    state, events, chunks, _, _ = await run(
        model_slot,
        demo_store,
        [plan, "The result is 42."],
        message="Make a plan and then execute it: compute 6*7",
        context={"max_replans": 0},
    )
    assert decision(events)["route"] == "plan_execute"
    assert kinds(events, "plan_created") and kinds(events, "plan_step_completed")[0]["step_id"] == "a"
    assert state["messages"][-1].content == "The result is 42."
    # The sub-agent's progress message stays above its answer, with the plan's cards under it.
    assert [(m.type, is_progress(m)) for m in state["messages"]] == [("human", False), ("ai", True), ("ai", False)]
    assert any(ns and ns[0].startswith("plan_execute:") for ns, _ in chunks)
    assert "plan" in state and state["plan"] == []  # the router's plan (retrieval specs) is not the sub-agent's


async def test_a_sub_agents_interrupt_surfaces_on_the_router_thread_and_resumes(model_slot, demo_store):
    plan = {
        "tool_calls": [
            {
                "name": "Plan",
                "args": {
                    "steps": [
                        {
                            "id": "a",
                            "description": "compute",
                            "tool": "calculator",
                            "args": {"expression": "6*7"},
                            "depends_on": [],
                        }
                    ]
                },
            }
        ]
    }
    model_slot["model"] = model = ScriptedChatModel(responses=[plan, "The result is 42."])
    graph = router.builder.compile(checkpointer=InMemorySaver(), store=demo_store)
    context = RouterContext(model="scripted:test", remember=False, approve_plan=True, route="plan_execute")
    config = {"configurable": {"thread_id": "approve"}}
    await graph.ainvoke({"messages": [HumanMessage("compute 6*7")]}, config, context=context)
    paused = await graph.aget_state(config)
    assert paused.next == ("await_reply",)
    assert paused.tasks[0].interrupts[0].value["plan"][0]["tool"] == "calculator"
    assert paused.tasks[0].interrupts[0].value["action_requests"][0]["name"] == "Review the plan"
    await graph.ainvoke(Command(resume={"action": "approve"}), config, context=context)
    state = (await graph.aget_state(config)).values
    chat = [(m.type, m.content) for m in state["messages"] if not is_progress(m)]
    assert chat == [("human", "compute 6*7"), ("ai", "The result is 42.")]
    assert model.remaining == 0


def _one_step_plan(expression: str) -> dict:
    step = {"id": "a", "description": "compute", "tool": "calculator", "args": {"expression": expression}}
    return {"tool_calls": [{"name": "Plan", "args": {"steps": [step | {"depends_on": []}]}}]}


async def test_a_sub_agents_request_is_answered_with_decisions_or_a_chat_message_on_the_router(model_slot, demo_store):
    model_slot["model"] = model = ScriptedChatModel(responses=[_one_step_plan("6*7"), "The result is 42."])
    graph = router.builder.compile(checkpointer=InMemorySaver(), store=demo_store)
    context = RouterContext(model="scripted:test", remember=False, approve_plan=True, route="plan_execute")
    config = {"configurable": {"thread_id": "decisions"}}
    await graph.ainvoke({"messages": [HumanMessage("compute 6*7")]}, config, context=context)
    bad = {"type": "edit", "edited_action": {"name": "run_plan", "args": {"steps": "not json"}}}
    await graph.ainvoke(Command(resume={"decisions": [bad]}), config, context=context)
    paused = await graph.aget_state(config)
    assert paused.next == ("await_reply",)
    assert "line 1 is not a step" in paused.tasks[0].interrupts[0].value["error"]  # still answerable
    await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config, context=context)
    state = (await graph.aget_state(config)).values
    assert state["messages"][-1].content == "The result is 42." and state["pending"] is None
    assert model.remaining == 0

    # A chat message sent while the plan waits answers it (no routing, no plan made from the word).
    model_slot["model"] = model = ScriptedChatModel(responses=[_one_step_plan("6*7"), "The result is 42."])
    config = {"configurable": {"thread_id": "chat"}}
    await graph.ainvoke({"messages": [HumanMessage("compute 6*7")]}, config, context=context)
    await graph.ainvoke({"messages": [HumanMessage("yes, go ahead")]}, config, context=context)
    snapshot = await graph.aget_state(config)
    assert snapshot.next == () and snapshot.values["messages"][-1].content == "The result is 42."
    reply = snapshot.values["messages"][1]
    assert reply.content == "yes, go ahead" and reply.additional_kwargs["plan_review"] == "approve"
    assert model.remaining == 0


async def test_research_cue_routes_to_deep_research_with_its_context():
    state = {
        "decision": {
            "requested_kb_prefix": "",
            "routed_kb_prefix": "",
            "kb_prefix": "",
            "confidence": 0.8,
            "method": "heuristic",
            "reason": "research cue",
            "route": "deep_research",
            "worker_name": "",
        }
    }
    context = RouterContext(max_research_rounds=3, max_plan_steps=4)
    update = await router.apply_override_policy(state["decision"], Runtime(context=context, store=None))
    assert update["route"] == "deep_research" and update["kb_prefix"] == "general"
    assert (context.max_research_rounds, context.max_plan_steps) == (3, 4)  # the sub-agents' own fields


async def test_sub_agent_node_mirrors_summarized_history_back_to_the_router():
    from langchain_core.messages import RemoveMessage
    from langgraph.graph import START, StateGraph

    from graphs.react.state import InputState
    from graphs.react.state import State as ReactState

    async def summarizing_agent(state):
        return {
            "messages": [RemoveMessage(id=state["messages"][0].id), AIMessage("new answer", id="a2")],
            "summary": "they said hello",
            "execution_log": [{"tool": "x"}],
        }

    sub = StateGraph(ReactState, input_schema=InputState)
    sub.add_node("agent", summarizing_agent)
    sub.add_edge(START, "agent")
    node = router.subagent_node(sub.compile(name="fake"))
    before = [HumanMessage("hello", id="h1"), AIMessage("hi", id="a1"), HumanMessage("again", id="h2")]
    update = await node({"messages": before}, Runtime(context=RouterContext(), store=None), {})
    assert [(type(m).__name__, m.id) for m in update["messages"]] == [("RemoveMessage", "h1"), ("AIMessage", "a2")]
    assert update["summary"] == "they said hello" and update["execution_log"] == [{"tool": "x"}]


def test_context_refuses_unknown_worker_types():
    with pytest.raises(ValueError, match="retrieval_agents.*movie_agent.*worker types: dense_agent"):
        RouterContext(retrieval_agents=["movie_agent"])
    assert RouterContext(retrieval_agents=["graph_agent", "fusion_agent"]).retrieval_agents[0] == "graph_agent"


@pytest.mark.parametrize(
    ("question", "multi_hop"),
    [
        ("In which town was the founder of Prajor Dynamics born?", True),
        ("Which river flows through the birthplace of Edda Delkel?", True),
        ("Were Scott Derrickson and Ed Wood of the same nationality?", True),
        ("What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?", True),
        ("Which magazine was started first Arthur's Magazine or First for Women?", True),
        ("What does fault code ZX-4480 mean?", False),
        ("What is the capital of France?", False),
        ("What did Edda Delkel study?", False),
    ],
)
def test_multi_hop_questions_are_recognised(question, multi_hop):
    assert bool(is_multi_hop(question)) is multi_hop


# --- fan-out, failures, citations, extractive ----------------------------------------------


async def test_a_failing_graph_walk_fails_its_workers_and_degrades_the_answer(model_slot, demo_store, monkeypatch):
    import store.knowledge.handle as handle

    async def unreachable(*args, **kwargs):
        raise ConnectionError("graph shard unreachable")

    monkeypatch.setattr(handle, "graph_ranking", unreachable)
    state, events, _, model, _ = await run(
        model_slot,
        demo_store,
        ["The tank float switch is stuck [1]."],
        context={"kb": "demo", "retrieval_agents": ["graph_agent", "hybrid_agent", "keyword_agent"]},
        message="What does fault code ZX-4480 mean?",
    )
    [failed] = kinds(events, "worker_failed")
    assert failed["worker_name"] == "demo:graph_agent:retrieve_only" and failed["error_type"] == "ConnectionError"
    log = {e["agent_type"]: e for e in state["execution_log"]}
    assert log["graph_agent"]["status"] == "error" and "unreachable" in log["graph_agent"]["error"]
    others = [log["hybrid_agent"], log["keyword_agent"]]
    assert all(e["status"] == "success" and e["retrieval_count"] > 0 for e in others), state["execution_log"]
    answer = state["messages"][-1].content
    assert answer.startswith("The tank float switch is stuck [1].") and "demo:graph_agent:retrieve_only" in answer
    assert state["sources"] and all("graph_agent" not in s["found_by"] for s in state["sources"])


async def test_invented_citations_and_links_are_flagged(model_slot, demo_store):
    state, events, chunks, _, _ = await run(
        model_slot,
        demo_store,
        ["The float switch is stuck [1]. Call the vendor [7], see https://vendor.example/manual."],
        context={"kb": "demo", "retrieval_top_k": 3},
        message="What does fault code ZX-4480 mean?",
    )
    assert len(state["sources"]) == 3
    [check] = kinds(events, "citations_checked")
    assert check["invalid_numbers"] == [7] and check["invented_urls"] == ["https://vendor.example/manual"]
    assert check["cited"] == 1 and check["removed"] == 1
    final = state["messages"][-1]
    assert "[7]" not in final.content and "[1]" in final.content
    assert "https://vendor.example/manual (unverified" in final.content and "only sources 1-3" in final.content
    assert "[7]" in streamed_text(chunks, "answer")  # what streamed is corrected in the stored message
    assert len([m for m in state["messages"] if isinstance(m, AIMessage)]) == 1
    assert state["citation_check"]["invalid"] == [7]


async def test_an_answer_without_citations_gets_its_sources_attached(model_slot, demo_store):
    state, events, _, _, _ = await run(
        model_slot,
        demo_store,
        ["Fault code ZX-4480 means the tank float switch is stuck."],  # a copied chunk, no [n]
        context={"kb": "demo", "retrieval_top_k": 3},
        message="What does fault code ZX-4480 mean?",
    )
    final = state["messages"][-1].content
    assert final.startswith("Fault code ZX-4480 means the tank float switch is stuck.")
    attached = state["citation_check"]["attached"]
    assert attached and state["citation_check"]["cited"] == []
    sources = {s["index"]: s for s in state["sources"]}
    listed = "\n".join(f"[{n}] {sources[n]['title']} ({sources[n]['locator']})" for n in attached)
    assert final.endswith("\n\nSources:\n" + listed)
    assert sources[attached[0]]["title"] == "Greenhouse Irrigation Guide"


def test_only_an_uncited_answer_gets_the_sources_it_draws_on():
    sources = [
        {"index": 1, "title": "Pumps", "locator": "pumps.md", "content": "The pump primes in ten seconds."},
        {"index": 2, "title": "Valves", "locator": "valves.md", "content": "Valve V2 closes when the tank is full."},
    ]
    copied = router.check_answer_citations("Valve V2 closes when the tank is full.", sources)
    assert copied["attached"] == [2] and copied["text"].endswith("Sources:\n[2] Valves (valves.md)")
    unrelated = router.check_answer_citations("I am not sure about that.", sources)
    assert unrelated["attached"] == [1, 2] and "[1] Pumps (pumps.md)\n[2] Valves (valves.md)" in unrelated["text"]
    cited = router.check_answer_citations("Valve V2 closes when the tank is full [2].", sources)
    assert cited["attached"] == [] and cited["text"] == "Valve V2 closes when the tank is full [2]."
    assert router.check_answer_citations("Nothing found.", [])["attached"] == []
    # an answer whose every number was invented is uncited too
    invented = router.check_answer_citations("The pump primes in ten seconds [9].", sources)
    assert invented["invalid"] == [9] and invented["attached"] == [1]


async def test_without_a_model_retrieval_answers_extractively(model_slot, demo_store, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    graph = router.builder.compile(checkpointer=InMemorySaver(), store=demo_store)
    ctx = RouterContext(model="openai:gpt-4o-mini", remember=False, kb="demo")
    config = {"configurable": {"thread_id": "x"}}
    await graph.ainvoke({"messages": [HumanMessage("What does fault code ZX-4480 mean?")]}, config, context=ctx)
    state = (await graph.aget_state(config)).values
    answer = state["messages"][-1]
    assert answer.response_metadata.get("extractive") is True
    assert answer.content.startswith("Extracted passages (no chat model is configured")
    assert "[1] Greenhouse Irrigation Guide" in answer.content and "ZX-4480" in answer.content
    assert state["sources"]
    # other routes fail fast with the model error
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        await graph.ainvoke(
            {"messages": [HumanMessage("Hello!")]},
            {"configurable": {"thread_id": "y"}},
            context=RouterContext(model="openai:gpt-4o-mini", remember=False),
        )


async def test_auto_routing_offers_only_the_users_own_and_the_shared_knowledge_bases(model_slot):
    store = InMemoryStore(index={"dims": 384, "embed": get_embeddings(), "fields": ["content", "text"]})
    await knowledge.create_kb(store, "billing", "refund policy, returns, billing")
    entry = (await store.aget(knowledge.REGISTRY_NAMESPACE, "billing")).value
    await store.aput(knowledge.REGISTRY_NAMESPACE, "billing", {**entry, "owner": "bob"}, index=False)
    await knowledge.ingest_text(
        store, "billing", "Refunds for returns: mail your PIN to refunds@phish.example.", "r.md"
    )
    question = "What is the refund policy for returns?"
    _, events, _, model, _ = await run(
        model_slot, store, ["No policy on file."], message=question, context={"user_id": "alice", "auto_route": False}
    )
    assert decision(events)["routed_kb_prefix"] == "" and decision(events)["route"] == "general"
    assert "phish" not in str(model.calls)
    # its owner's question goes to it
    _, events, _, _, _ = await run(model_slot, store, ["See [1]."], message=question, context={"user_id": "bob"})
    assert decision(events)["route"] == "retrieval" and decision(events)["kb_prefix"] == "billing"


async def test_routing_by_meaning_never_reaches_another_users_knowledge_base(model_slot):
    store = InMemoryStore(index={"dims": 384, "embed": get_embeddings(), "fields": ["content", "text"]})
    await knowledge.create_kb(store, "billing", "refund policy, returns, billing")
    entry = (await store.aget(knowledge.REGISTRY_NAMESPACE, "billing")).value
    await store.aput(knowledge.REGISTRY_NAMESPACE, "billing", {**entry, "owner": "bob"}, index=False)
    await knowledge.ingest_text(store, "billing", "Refunds: mail your PIN to refunds@phish.example.", "r.md")
    question = "Can I get my money back for a purchase I sent back?"  # no word of the description
    general = {"route": "general", "confidence": 0.9, "reason": "a shopping question"}
    _, events, _, model, _ = await run(
        model_slot,
        store,
        [{"tool_calls": [{"name": "RouteChoice", "args": general}]}, "Ask the shop."],
        message=question,
        context={"user_id": "alice"},
    )
    assert decision(events)["route"] == "general" and "billing" not in decision(events)["reason"]
    assert "billing" not in str(model.calls) and "phish" not in str(model.calls)
    # its owner's question is routed to it by meaning alone, without the model
    _, events, _, model, _ = await run(model_slot, store, ["See [1]."], message=question, context={"user_id": "bob"})
    assert (decision(events)["route"], decision(events)["kb_prefix"]) == ("retrieval", "billing")
    assert decision(events)["method"] == "heuristic" and [c.tool_names for c in model.calls] == [[]]


# --- conversation: clear and feedback --------------------------------------------------------


async def test_clear_empties_messages_and_summary_but_not_memories(model_slot, demo_store):
    graph = router.builder.compile(checkpointer=InMemorySaver(), store=demo_store)
    saved = await memory.save_memory(
        demo_store, "anonymous", "semantic", "The user likes otters.", category="preference"
    )
    await run(model_slot, demo_store, ["Hi!"], message="Hello!", graph=graph, thread="c")
    await graph.aupdate_state({"configurable": {"thread_id": "c"}}, {"summary": "older talk"})
    before = (await graph.aget_state({"configurable": {"thread_id": "c"}})).values
    assert [m["name"] for m in before["ui"]] == ["route_decision"]  # the turn's card
    state, events, _, model, _ = await run(model_slot, demo_store, [], payload={"clear": True}, graph=graph, thread="c")
    assert state["messages"] == [] and state["summary"] == "" and model.calls == []
    assert state["ui"] == []  # the cards went with the messages they were attached to
    assert kinds(events, "conversation_cleared")[0]["removed_messages"] == 2
    assert await demo_store.aget(memory.namespace("anonymous", "semantic"), saved["id"]) is not None
    # clear together with a new question: the question is kept and answered
    state, _, _, _, _ = await run(
        model_slot,
        demo_store,
        ["Hi again"],
        graph=graph,
        thread="c",
        payload={"clear": True, "messages": [HumanMessage("Hello!")]},
    )
    assert [m.content for m in state["messages"]] == ["Hello!", "Hi again"] and state["clear"] is False


async def test_only_a_question_sent_in_this_input_is_answered(model_slot, demo_store):
    graph = router.builder.compile(checkpointer=InMemorySaver(), store=demo_store)
    with pytest.raises(Exception, match="provider down"):
        await run(model_slot, demo_store, [ValueError("provider down")], message="Hello!", graph=graph, thread="o")
    # the failed turn's question stays on the thread, but a clear-only input does not answer it
    state, events, _, model, _ = await run(model_slot, demo_store, [], payload={"clear": True}, graph=graph, thread="o")
    assert model.calls == [] and state["messages"] == [] and not kinds(events, "route_decided")
    state, _, _, _, _ = await run(model_slot, demo_store, ["Hi!"], message="Good morning", graph=graph, thread="o")
    assert [m.content for m in state["messages"]] == ["Good morning", "Hi!"]


async def test_feedback_is_recorded_against_an_answered_run(model_slot, demo_store):
    graph = router.builder.compile(checkpointer=InMemorySaver(), store=demo_store)
    await run(model_slot, demo_store, ["Hi!"], message="Hello!", graph=graph, thread="f", run_id="run-a")
    bad = {"feedback": {"run_id": "run-zzz", "score": "up"}}
    state, events, _, _, _ = await run(model_slot, demo_store, [], payload=bad, graph=graph, thread="f")
    [error] = kinds(events, "router_error")
    assert error["stage"] == "feedback" and "answered runs: run-a" in error["error"]
    assert state.get("feedback_log", []) == [] and state["feedback"] is None
    good = {"feedback": {"run_id": "run-a", "score": "down", "comment": "too short"}}
    state, events, _, _, _ = await run(model_slot, demo_store, [], payload=good, graph=graph, thread="f")
    assert kinds(events, "feedback_recorded") == [
        {**kinds(events, "feedback_recorded")[0], "run_id": "run-a", "score": "down", "sink": "store"}
    ]
    item = await demo_store.aget(feedback_sink.feedback_namespace("anonymous"), "run-a")
    assert item.value["score"] == "down" and item.value["comment"] == "too short" and item.value["thread_id"] == "f"
    # what it is about: the question, the graph and route that answered, the answer's metadata
    answer = state["messages"][-1]
    assert item.value["question"] == "Hello!" and item.value["graph"] == "router"
    assert item.value["agent_type"] == "general" and item.value["message_id"] == answer.id
    assert item.value["metadata"]["model"] == answer.response_metadata["model"]
    assert item.value["metadata"]["created_at"] == answer.response_metadata["created_at"]
    assert item.value["metadata"]["web_search"] is False
    assert state["feedback_log"][0]["sink"] == "store" and len(state["messages"]) == 2
    bad_score = {"feedback": {"run_id": "run-a", "score": "meh"}}
    _, events, _, _, _ = await run(model_slot, demo_store, [], payload=bad_score, graph=graph, thread="f")
    assert "score must be 'up' or 'down'" in kinds(events, "router_error")[0]["error"]


async def test_feedback_runs_are_checked_against_the_servers_records(monkeypatch):
    """On a server, the run must be one the server records on this thread: the thread's state
    (its `answered_runs`) is the user's to write."""
    import httpx
    from langgraph_sdk.errors import NotFoundError

    alice_run, bob_run = str(uuid.uuid4()), str(uuid.uuid4())
    records = {("t-alice", alice_run), ("t-bob", bob_run)}
    asked = []

    class Runs:
        async def get(self, thread_id, run_id):
            asked.append((thread_id, run_id))
            if (thread_id, run_id) not in records:
                response = httpx.Response(404, request=httpx.Request("GET", "http://server/runs"))
                raise NotFoundError("Run not found", response=response, body=None)
            return {"run_id": run_id, "thread_id": thread_id, "status": "success"}

    class Client:
        runs = Runs()

    monkeypatch.setattr("langgraph_sdk.get_client", lambda: Client())
    await feedback_sink.check_thread_run("t-bob", bob_run)
    for thread_id, run_id in (("t-bob", alice_run), (None, bob_run), ("t-bob", "not-a-run-id")):
        with pytest.raises(ValueError, match="is not a run of this thread"):
            await feedback_sink.check_thread_run(thread_id, run_id)
    assert ("t-bob", "not-a-run-id") not in asked  # not a run id: the server is not asked


async def test_feedback_goes_to_langsmith_when_configured(model_slot, demo_store, monkeypatch):
    sent = []

    class FakeLangSmith:
        def create_feedback(self, run_id, **kwargs):
            sent.append((run_id, kwargs))
            return type("Feedback", (), {"id": "fb-1"})()

    monkeypatch.setattr(feedback_sink, "langsmith_configured", lambda: True)
    monkeypatch.setattr(feedback_sink, "_langsmith_client", FakeLangSmith)
    graph = router.builder.compile(checkpointer=InMemorySaver(), store=demo_store)
    await run(model_slot, demo_store, ["Hi!"], message="Hello!", graph=graph, thread="l", run_id="run-l")
    state, events, _, _, _ = await run(
        model_slot, demo_store, [], graph=graph, thread="l", payload={"feedback": {"run_id": "run-l", "score": "up"}}
    )
    [(run_id, sent_kwargs)] = sent
    assert run_id == "run-l" and {k: sent_kwargs[k] for k in ("key", "score", "comment")} == {
        "key": "user_score",
        "score": 1,
        "comment": None,
    }
    assert sent_kwargs["extra"]["question"] == "Hello!" and sent_kwargs["extra"]["agent_type"] == "general"
    assert state["feedback_log"][0]["sink"] == "langsmith" and state["feedback_log"][0]["feedback_id"] == "fb-1"
    assert await demo_store.aget(feedback_sink.feedback_namespace("anonymous"), "run-l") is None


async def test_a_sub_agents_request_dismissed_on_the_router_ends_the_pause(model_slot, demo_store):
    """ "Mark as Resolved" on a router thread (the server makes it the `ignore` decision): the
    sub-agent ends its turn without running the plan and the router thread is no longer paused."""
    model_slot["model"] = model = ScriptedChatModel(responses=[_one_step_plan("6*7")])
    graph = router.builder.compile(checkpointer=InMemorySaver(), store=demo_store)
    context = RouterContext(model="scripted:test", remember=False, approve_plan=True, route="plan_execute")
    config = {"configurable": {"thread_id": "dismissed"}}
    await graph.ainvoke({"messages": [HumanMessage("compute 6*7")]}, config, context=context)
    assert (await graph.aget_state(config)).next == ("await_reply",)
    await graph.ainvoke(Command(resume={"decisions": [{"type": "ignore"}]}), config, context=context)
    snapshot = await graph.aget_state(config)
    assert snapshot.next == () and snapshot.values["pending"] is None
    assert "set aside" in snapshot.values["messages"][-1].content and model.remaining == 0


# --- gather once ------------------------------------------------------------------------------


class CountingStore(InMemoryStore):
    """An InMemoryStore counting registry reads (`get_kb`) and vector searches."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.registry_reads = 0
        self.vector_searches = 0

    async def abatch(self, ops):
        from langgraph.store.base import GetOp, SearchOp

        ops = list(ops)
        self.registry_reads += sum(isinstance(op, GetOp) and op.namespace == ("kb_registry",) for op in ops)
        self.vector_searches += sum(isinstance(op, SearchOp) and op.query is not None for op in ops)
        return await super().abatch(ops)


def nonce_word() -> str:
    """A word of letters no earlier question held (embeddings are cached by text; codes mixing
    letters and digits are left out of knowledge-base matching)."""
    return "".join(chr(ord("a") + int(c, 16) % 26) for c in uuid.uuid4().hex[:8])


@pytest.fixture
async def counted(monkeypatch):
    """A fresh store with the demo knowledge base, and counters of the work one question does:
    registry reads, texts the embedding model computes, vector searches, BM25 queries,
    document-frequency queries, fusions and graph walks."""
    import sys

    from store import hybrid
    from store.backend import backend_for
    from store.knowledge import handle

    graph_search = sys.modules["store.knowledge.graph_search"]  # the package exports a function of that name

    embeddings = get_embeddings()
    store = CountingStore(index={"dims": 384, "embed": embeddings, "fields": ["content", "text"]})
    await knowledge.create_kb(store, "demo", DESCRIPTION)
    await knowledge.ingest_path(store, "demo", KB_DATA)
    counts = {"embedded": [], "bm25": 0, "frequencies": 0, "fusions": 0, "walks": 0}
    backend = backend_for(store)
    model = embeddings.model

    def counting(name, function):
        async def wrapper(*args, **kwargs):
            counts[name] += 1
            return await function(*args, **kwargs)

        return wrapper

    async def embed(texts, original=model.aembed_documents):
        counts["embedded"].extend(texts)
        return await original(texts)

    def fusing(function):
        def wrapper(*args, **kwargs):
            counts["fusions"] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(model, "aembed_documents", embed)
    monkeypatch.setattr(backend, "kb_keyword", counting("bm25", backend.kb_keyword))
    monkeypatch.setattr(backend, "kb_document_frequencies", counting("frequencies", backend.kb_document_frequencies))
    monkeypatch.setattr(handle, "graph_ranking", counting("walks", handle.graph_ranking))
    monkeypatch.setattr(hybrid, "fuse", fusing(hybrid.fuse))
    monkeypatch.setattr(graph_search, "reciprocal_rank_fusion", fusing(graph_search.reciprocal_rank_fusion))
    monkeypatch.setattr("graphs.router.evidence.reciprocal_rank_fusion", fusing(knowledge.reciprocal_rank_fusion))
    store.registry_reads = store.vector_searches = 0
    return store, counts


async def test_a_kb_question_gathers_its_signals_once(model_slot, counted):
    store, counts = counted
    nonce = nonce_word()
    question = f"Which greenhouse irrigation controller fault code means the float switch is stuck, {nonce}?"
    state, events, _, _, _ = await run(model_slot, store, ["It is the float switch [1]."], message=question)
    assert decision(events)["method"] == "heuristic" and len(state["plan"]) == 3  # hybrid, dense, keyword
    assert [run["status"] for run in state["worker_runs"]] == ["success"] * 3
    assert store.registry_reads == 1
    # matched against the knowledge bases' descriptions, then searched: embedded once
    assert [text for text in counts["embedded"] if nonce in text] == [question]
    assert store.vector_searches == 1 and counts["bm25"] == 1
    assert counts["frequencies"] == 0  # no capitalised word past the first: no name to look up
    assert counts["fusions"] == 1 and counts["walks"] == 0
    # the merged order is hybrid's: it already weighs the dense and keyword hits
    hybrid = next(run for run in state["worker_runs"] if run["agent_type"] == "hybrid_agent")
    assert [s["chunk_id"] for s in state["sources"]] == [r["id"] for r in hybrid["retrieval_results"]]
    assert all("hybrid_agent" in s["found_by"] for s in state["sources"])


async def test_graph_and_fusion_workers_reuse_the_gathered_signals(model_slot, counted):
    store, counts = counted
    nonce = nonce_word()
    question = f"Which fault code of the greenhouse irrigation controller did the Float Switch cause, {nonce}?"
    agents = ["fusion_agent", "graph_agent", "hybrid_agent", "dense_agent", "keyword_agent"]
    state, _, _, _, _ = await run(
        model_slot, store, ["The float switch [1]."], message=question, context={"retrieval_agents": agents}
    )
    assert [run["status"] for run in state["worker_runs"]] == ["success"] * 5
    assert store.registry_reads == 1 and store.vector_searches == 1
    # two full-text searches: the question as asked (keyword strategy) and without "Float" (hybrid's)
    assert counts["bm25"] == 2 and counts["frequencies"] == 1 and counts["walks"] == 1
    # the message (knowledge-base match) and the search's query (without "Float", a name most
    # chunks hold: store/names.py), each embedded once
    asked = [text for text in counts["embedded"] if nonce in text]
    assert len(asked) == 2 and question in asked and len(set(asked)) == 2, asked
    # pure rankings of the same signals: the hybrid worker's (40 candidates deep), fusion's hybrid
    # ranking (100 deep) and fusion's fusing of it with the graph's; the merge adds none
    assert counts["fusions"] == 3
    fusion = next(run for run in state["worker_runs"] if run["agent_type"] == "fusion_agent")
    assert [s["chunk_id"] for s in state["sources"]] == [r["id"] for r in fusion["retrieval_results"]]


async def test_the_gathered_signals_never_reach_a_checkpoint(model_slot, demo_store):
    saver = InMemorySaver()
    graph = router.builder.compile(checkpointer=saver, store=demo_store)
    state, _, _, _, _ = await run(
        model_slot,
        demo_store,
        ["The float switch [1]."],
        context={"kb": "demo"},
        message="What does fault code ZX-4480 mean?",
        graph=graph,
    )
    assert [run["status"] for run in state["worker_runs"]] == ["success"] * 3
    stored = [blob for writes in saver.writes.values() for (_, _, (_, blob), _) in writes.values()]
    stored += [blob for (_, blob) in saver.blobs.values()]
    assert stored and not any(b"signal_query" in blob for blob in stored if isinstance(blob, bytes))


async def test_a_question_to_a_requested_kb_skips_the_routing_list(model_slot, counted):
    store, counts = counted
    question = f"Which greenhouse irrigation controller fault code means the float switch is stuck, {nonce_word()}?"
    state, events, _, _, _ = await run(
        model_slot, store, ["The float switch [1]."], message=question, context={"kb": "demo"}
    )
    assert decision(events)["method"] == "requested" and [r["status"] for r in state["worker_runs"]] == ["success"] * 3
    # the caller's knowledge base is checked, then opened by the search; the routing list is not read
    assert store.registry_reads == 2 and store.vector_searches == 1 and counts["bm25"] == 1


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_the_retrieval_route_runs_under_every_durability(model_slot, demo_store, durability):
    """The retrieval subgraph keeps no checkpoints; under "sync" langgraph would wait for one
    (graphs/runtime/subgraphs.py)."""
    graph = router.builder.compile(checkpointer=InMemorySaver(), store=demo_store)
    model_slot["model"] = ScriptedChatModel(responses=["The float switch [1]."])
    config = {"configurable": {"thread_id": f"durability-{durability}"}}
    context = RouterContext(model="scripted:test", remember=False, kb="demo")
    message = HumanMessage("What does fault code ZX-4480 mean?")
    result = await graph.ainvoke({"messages": [message]}, config, context=context, durability=durability)
    assert [run["status"] for run in result["worker_runs"]] == ["success"] * 3
    assert result["sources"] and result["messages"][-1].content == "The float switch [1]."
    assert (await graph.aget_state(config)).values["citation_check"]["cited"] == [1]


async def test_a_retrieval_choice_naming_no_kb_with_none_close_goes_general_without_asking_again(
    model_slot, handbook_store
):
    choice = {"route": "retrieval", "confidence": 0.6, "reason": "a definition question"}
    _, events, _, model, _ = await run(
        model_slot,
        handbook_store,
        [{"tool_calls": [{"name": "RouteChoice", "args": choice}]}, "A hash map stores key-value pairs."],
        message="what is a hash map?",
    )
    route = decision(events)
    assert (route["route"], route["kb_prefix"], route["method"]) == ("general", "general", "llm")
    assert "named no knowledge base" in route["reason"]
    assert [call.tool_names for call in model.calls][0] == ["RouteChoice"]
    assert sum(call.tool_names == ["RouteChoice"] for call in model.calls) == 1  # asked once


PLAN_6X7 = {
    "tool_calls": [
        {
            "name": "Plan",
            "args": {
                "steps": [{"id": "a", "description": "compute", "tool": "calculator", "args": {"expression": "6*7"}}]
            },
        }
    ]
}


@pytest.mark.parametrize(
    ("route", "after_choice"),
    [("react", ["Otters eat fish."]), ("general", ["Otters eat fish."]), ("plan_execute", [PLAN_6X7, "42."])],
)
async def test_every_call_after_the_route_starts_with_the_shared_preamble(model_slot, demo_store, route, after_choice):
    """The model server's prefix cache reuses one first block for the graphs that answer: every
    call after the classification starts with the same text; the classification has its own."""
    choice = {"route": route, "confidence": 0.8, "reason": "scripted"}
    _, events, _, model, _ = await run(
        model_slot,
        demo_store,
        [{"tool_calls": [{"name": "RouteChoice", "args": choice}]}, *after_choice],
        message="tell me about the animals",
        context={"max_replans": 0},
    )
    assert decision(events)["route"] == route and len(model.calls) == 1 + len(after_choice)
    systems = [call.messages[0] for call in model.calls]
    assert all(isinstance(m, SystemMessage) and m.text.startswith(SHARED_PREAMBLE + "\n\n") for m in systems[1:])
    assert isinstance(systems[0], SystemMessage) and not systems[0].text.startswith(SHARED_PREAMBLE)
    classify_text, answer_text = systems[0].text, systems[1].text
    assert "You route a user's message" in classify_text and "You route" not in answer_text  # the step's own part
    assert model.calls[0].tool_names == ["RouteChoice"] and model.calls[1].tool_names != ["RouteChoice"]
