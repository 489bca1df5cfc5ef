"""The `router` graph: the front door that picks the best answer path for each message.

prepare --(new question)--> decide_route --------------------------------------------+
   |                                                                                  |
   +--(clear / feedback only)--> END     retrieval: retrieve (subgraph: gather -> Send -> rank x
                                           workers; then merge_evidence) -> answer (ends the turn)
                                         general / react / other sub-agents -> finish_turn
                                         error (unknown KB) -> route_error -> finish_turn
"""

from __future__ import annotations

import difflib
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from pydantic import BaseModel, Field

from graphs.deep_research.graph import graph as deep_research_graph
from graphs.plan_execute.graph import graph as plan_execute_graph
from graphs.react.graph import graph as react_graph
from graphs.router import feedback as feedback_sink
from graphs.router.citations import check_citations as check_answer_citations
from graphs.router.context import RouterContext
from graphs.router.evidence import extractive_answer, passages_text
from graphs.router.intent import SIMILARITY_MARGIN, Guess, guess_route, is_multi_hop
from graphs.router.kb_match import KBMatch, rank_kbs
from graphs.router.prompts import (
    ANSWER_PROMPT,
    CLASSIFY_PROMPT,
    CLASSIFY_RETRY,
    DEGRADED_NOTE,
    EXTRACTIVE_EMPTY,
    EXTRACTIVE_HEADER,
    NO_PASSAGES,
    ROUTE_DESCRIPTIONS,
    SUMMARY_SECTION,
)
from graphs.router.protocol import GENERAL_KB, RouteDecision, worker_name_for
from graphs.router.retrieval import retrieve
from graphs.router.state import InputState, State, question_of
from graphs.router.workers import MULTI_HOP_AGENTS
from graphs.runtime.events import emit
from graphs.runtime.failures import explain_failures
from graphs.runtime.memory_schedule import remember_turn
from graphs.runtime.models import ModelConfigError, ainvoke_with_retries, load_chat_model, report_unmet_tool_choice
from graphs.runtime.prompts import with_preamble
from graphs.runtime.structured import StructuredOutputError, ainvoke_structured
from graphs.runtime.ui import deferred_state_writes, link_to_answer
from store import knowledge
from store.embeddings import embed_ahead
from tools.identity import run_kb_reader, run_user_id
from tools.memory import MEMORY_TOOLS

# Sub-agent graphs the router can hand a message to; each joins with one line.
SUBAGENTS: dict[str, CompiledStateGraph[Any, Any, Any, Any]] = {
    "react": react_graph,
    "plan_execute": plan_execute_graph,
    "deep_research": deep_research_graph,
}
GENERAL_TOOLS = [tool.__name__ for tool in MEMORY_TOOLS]
"""The general route is the react graph with only the user's memory tools."""
CLASSIFY_ATTEMPTS = 3


def available_routes() -> list[str]:
    """Every route this router serves."""
    return ["general", "retrieval", *SUBAGENTS]


def _run_id(config: RunnableConfig) -> str:
    metadata = config.get("metadata") or {}
    configurable = config.get("configurable") or {}
    return str(metadata.get("run_id") or configurable.get("run_id") or "")


# --- turn set-up: clear and feedback ------------------------------------------------------


def _new_messages(state: State) -> list[AnyMessage]:
    """The messages this run's input added: those after the last message the router saw."""
    messages = state.get("messages", [])
    seen = state.get("seen_message_id")
    ids = [m.id for m in messages]
    return messages[ids.index(seen) + 1 :] if seen in ids else list(messages)


async def prepare(state: State, runtime: Runtime[RouterContext], config: RunnableConfig) -> dict:
    """Start a turn: apply a `clear` or `feedback` input, reset the per-turn evidence."""
    update: dict[str, Any] = {"clear": False, "feedback": None, "worker_runs": None}
    if state.get("clear"):
        update["pending"] = None  # a cleared conversation answers nothing
    messages = state.get("messages", [])
    new = _new_messages(state)
    question = bool(new) and isinstance(new[-1], HumanMessage)
    if state.get("clear"):
        kept = new if question else []  # a question sent along with `clear` is kept and answered
        update.update(
            messages=[RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept],
            summary="",
            sources=[],
            citation_check={},
            decision={},
            plan=[],
            ui=[{"type": "remove-ui", "id": m["id"]} for m in state.get("ui", []) if m.get("type") == "ui"],
        )
        emit("conversation_cleared", removed_messages=len(messages) - len(kept))
        messages = kept
    update["seen_message_id"] = messages[-1].id if messages else None
    update["answering"] = question
    if (request := state.get("feedback")) is not None:
        thread_id = (config.get("configurable") or {}).get("thread_id")
        try:
            checked = feedback_sink.validate(request, state.get("answered_runs", []))
            if runtime.server_info is not None:  # the state is the user's to write: the server decides
                caller = getattr(runtime.server_info.user, "identity", None) or None
                await feedback_sink.check_thread_run(thread_id, checked["run_id"], act_as=caller)
            about = feedback_sink.about_answer(messages, state.get("answered_runs", []), checked["run_id"])
            record = await feedback_sink.record_feedback(runtime.store, run_user_id(runtime), thread_id, checked, about)
        except Exception as exc:
            emit("router_error", stage="feedback", error=str(exc) or type(exc).__name__)
        else:
            emit("feedback_recorded", run_id=record["run_id"], score=record["score"], sink=record["sink"])
            update["feedback_log"] = [record]
    return update


def after_prepare(state: State) -> str:
    """Route a question this input brought; a clear- or feedback-only input ends here. A message
    sent while a sub-agent waits for the user's answer goes to that sub-agent, which reads it as
    the answer (see `subagent_node`)."""
    if not state.get("answering"):
        return END
    pending = state.get("pending")
    return pending["route"] if pending else "decide_route"


# --- the route decision (seed 003 RouterGraph) -------------------------------------------


class RouteChoice(BaseModel):
    """The route for the user's message."""

    route: str = Field(description="One of the routes listed in the instructions.")
    kb: str | None = Field(default=None, description="For the retrieval route: the knowledge base name.")
    confidence: float = Field(ge=0, le=1, description="How sure you are, 0 to 1.")
    reason: str = Field(description="One sentence: why this route.")


def _kb_named(name: str | None, names: list[str]) -> str | None:
    """The knowledge base of `names` the model meant by `name`: the same name, in any case, or
    one spelled within a letter or two of it (a small model writes "Handbook" or "hand-book")."""
    wanted = (name or "").strip()
    if not wanted:
        return None
    if wanted in names:
        return wanted
    folded = {known.casefold(): known for known in names}
    close = difflib.get_close_matches(wanted.casefold(), list(folded), n=1, cutoff=0.85)
    return folded[close[0]] if close else None


async def classify(
    message: str,
    kbs: list[dict],
    context: RouterContext,
    config: RunnableConfig,
    similar: Sequence[KBMatch] = (),
    fallback: Guess | None = None,
) -> Guess:
    """Ask the model for a route (graphs/runtime/structured.py: asked again only when the answer
    is malformed).

    An answer that parses is used at once, asking again being slow on a small model and rarely
    better: `similar` ranks `kbs` by meaning (graphs/router/kb_match.py), the prompt lists the
    knowledge bases closest first, and a `retrieval` answer whose knowledge base is missing or
    does not exist (after `_kb_named`) takes the closest one when it is near the similarity
    threshold (a small model often leaves `kb` out), else routes to `general`; a route that is
    not served takes `fallback` (the heuristic's guess).
    Raises ModelConfigError without a usable model and ValueError after repeated malformed answers.
    """
    routes = [r for r in available_routes() if r != "retrieval" or kbs]
    order = {match.name: index for index, match in enumerate(similar)}
    kbs = sorted(kbs, key=lambda kb: order.get(kb["name"], len(order)))
    names = [kb["name"] for kb in kbs]
    near = similar[0] if similar and similar[0].similarity >= context.kb_similarity - SIMILARITY_MARGIN else None
    # Not with the shared preamble: its list of a turn's steps ("routing ..., planning, calling
    # tools ...") swayed a small model's route (real model: router-joke to react, router-report
    # to plan_execute; both right without it). The calls after the route share it.
    prompt = CLASSIFY_PROMPT.format(
        routes="\n".join(f"- {r}: {ROUTE_DESCRIPTIONS.get(r, 'a sub-agent')}" for r in routes),
        kbs="\n".join(f"- {kb['name']}: {kb.get('description') or '(no description)'}" for kb in kbs) or "(none)",
    )
    model = load_chat_model(context.model, temperature=0, timeout=context.model_timeout)

    def check(choice: RouteChoice) -> Guess:
        confidence = float(choice.confidence)
        if choice.route not in routes:
            served = fallback or Guess("general", "", 0.0, "no heuristic guess")
            return replace(served, reason=f"{served.reason} (the model answered {choice.route!r}, not a route here)")
        if choice.route != "retrieval":
            return Guess(choice.route, "", confidence, choice.reason)
        if named := _kb_named(choice.kb, names):
            return Guess("retrieval", named, confidence, choice.reason)
        if near is not None:
            reason = f"{choice.reason} (knowledge base {near.name!r}: the closest in meaning, {near.similarity:.2f})"
            return Guess("retrieval", near.name, confidence, reason)
        what = (
            f"knowledge base {choice.kb!r} does not exist" if (choice.kb or "").strip() else "named no knowledge base"
        )
        return Guess(
            "general", "", confidence, f"{choice.reason} (retrieval {what} and none is close in meaning: general)"
        )

    messages: list[AnyMessage] = [SystemMessage(prompt), HumanMessage(message)]
    try:
        result = await ainvoke_structured(
            model,
            RouteChoice,
            messages,
            config,
            retries=context.model_retries,
            timeout=context.model_timeout,
            attempts=CLASSIFY_ATTEMPTS,
            check=check,
            retry_prompt=CLASSIFY_RETRY,
            tags=["router_classify"],
        )
    except StructuredOutputError as exc:
        raise ValueError(f"route classification failed after {CLASSIFY_ATTEMPTS} attempts: {exc.error}") from None
    return result.value


async def detect_intent(message: str, runtime: Runtime[RouterContext], config: RunnableConfig) -> dict:
    """The route the message itself asks for: heuristics first (KB names/descriptions in words and
    in meaning, cue words); the model classifies when unsure.
    The candidates are the knowledge bases of the user the run acts for and the shared ones:
    nobody else's knowledge base can catch this user's questions. A caller who requested a
    knowledge base decides the route (see `apply_override_policy`): then the routing list is not
    read at all."""
    context = runtime.context
    store = runtime.store
    if context.kb and store is not None and not context.route:
        embed_ahead(store, message)  # a question to a named knowledge base: its search embeds it next
    kbs = await knowledge.list_kbs(store, reader=run_user_id(runtime)) if store is not None and not context.kb else []
    choosing = context.auto_route and not context.kb and not context.route
    similar = await rank_kbs(message, kbs) if choosing else []
    guess = guess_route(message, kbs, similar, context.kb_similarity)
    method = "heuristic"
    unsure = guess.confidence < context.route_confidence
    if unsure and choosing:
        try:
            guess = await classify(message, kbs, context, config, similar, fallback=guess)
            method = "llm"
        except (ModelConfigError, ValueError) as exc:
            guess = replace(guess, reason=f"{guess.reason}; model classification unavailable: {exc}")
    return {
        "requested_kb_prefix": context.kb or "",
        "routed_kb_prefix": guess.kb,
        "kb_prefix": guess.kb,
        "confidence": round(guess.confidence, 3),
        "method": method,
        "reason": guess.reason,
        "route": guess.route,
        "worker_name": "",
    }


async def apply_override_policy(decision: dict, runtime: Runtime[RouterContext]) -> dict:
    """Apply the caller's choices to `decision` (a new dict is returned): requested KB, forced
    route, auto-routing off, served routes."""
    context = runtime.context
    decision = dict(decision)
    if context.route:
        if context.route not in available_routes():
            decision.update(
                route="error",
                method="forced",
                reason=f"route {context.route!r} is not served; routes: {', '.join(available_routes())}",
            )
            return decision
        decision.update(
            route=context.route,
            method="forced",
            confidence=1.0,
            reason=f"route {context.route!r} requested by the caller",
        )
    if context.kb:
        try:
            if runtime.store is None:
                raise ValueError("knowledge bases need a store; this graph runs without one")
            await knowledge.get_kb(runtime.store, context.kb, reader=run_kb_reader(runtime))
        except ValueError as exc:
            decision.update(route="error", kb_prefix=context.kb, method="requested", reason=str(exc))
            return decision
        if not context.route or context.route == "retrieval":
            decision.update(
                route="retrieval",
                kb_prefix=context.kb,
                method="requested",
                confidence=1.0,
                reason=f"knowledge base {context.kb!r} requested by the caller",
            )
    elif not context.auto_route and not context.route:
        decision.update(
            route="general",
            kb_prefix=GENERAL_KB,
            method="policy",
            reason="auto-routing is off and no knowledge base was requested",
        )
    if decision["route"] == "retrieval" and not decision["kb_prefix"]:
        decision.update(route="error", reason="the retrieval route needs a knowledge base (context `kb`)")
    if decision["route"] not in (*available_routes(), "error"):
        wanted = decision["route"]
        decision.update(route="react", reason=f"{decision['reason']}; {wanted} is not served here, react handles it")
    if decision["route"] != "retrieval" and decision["route"] != "error":
        decision["kb_prefix"] = GENERAL_KB
    return decision


def select_workers(decision: dict, message: str, context: RouterContext) -> tuple[dict, list[dict]]:
    """The worker name and the retrieval plan of `decision` (a new dict is returned)."""
    decision = dict(decision)
    plan: list[dict] = []
    if decision["route"] == "retrieval":
        agent_types = context.retrieval_agents
        if cue := is_multi_hop(message):  # graph walk and fusion first
            agent_types = [*MULTI_HOP_AGENTS, *(t for t in agent_types if t not in MULTI_HOP_AGENTS)]
            decision["reason"] = f"{decision['reason']}; multi-hop cue {cue!r}: graph and fusion workers"
        decision["worker_name"] = worker_name_for(decision["kb_prefix"], agent_types[0])
        plan = [{"agent_type": t, "worker_name": worker_name_for(decision["kb_prefix"], t)} for t in agent_types]
    else:
        decision["worker_name"] = ""
    return decision, plan


async def decide_route(state: State, runtime: Runtime[RouterContext], config: RunnableConfig) -> dict:
    """Decide the route in one step (`detect_intent` -> `apply_override_policy` ->
    `select_workers`, as functions: each step of a graph costs a checkpoint): what the message asks
    for, the caller's choices over it, then the workers of the retrieval route; stream the
    decision."""
    emit("progress", stage="routing", completed=0, total=0, agent_type="", retrieval_count=None, error=None)
    message = question_of(state["messages"])
    decision = await detect_intent(message, runtime, config)
    decision = await apply_override_policy(decision, runtime)
    decision, plan = select_workers(decision, message, runtime.context)
    final = RouteDecision(**decision)
    emit("route_decided", **final.as_dict())
    return {"decision": final.as_dict(), "plan": plan, "sources": [], "citation_check": {}}


def route_after_decision(state: State) -> str:
    """The retrieval route's node (its subgraph fans out to the workers), or the route's node."""
    route = state["decision"]["route"]
    if route == "retrieval":
        return "retrieve"
    return "route_error" if route == "error" else route


def _history(messages: list[AnyMessage], budget_tokens: int) -> list[AnyMessage]:
    """The conversation's text turns (no tool traffic), newest kept within the budget."""
    turns = [
        m
        for m in messages
        if isinstance(m, HumanMessage) or (isinstance(m, AIMessage) and not m.tool_calls and m.text.strip())
    ]
    kept: list[AnyMessage] = []
    used = 0
    for message in reversed(turns):
        cost = count_tokens_approximately([message])
        if kept and used + cost > budget_tokens:
            break
        kept.insert(0, message)
        used += cost
    return kept


async def answer(state: State, runtime: Runtime[RouterContext], config: RunnableConfig) -> dict:
    """Answer from the merged passages with numbered citations (streamed as tokens), or, with no
    chat model configured, with the top passages themselves, labelled as extracted; then check
    the citations (`check_citations`) and end the turn (`finish_turn`, in this step: every step
    of a graph costs a checkpoint). The cards this step pushes join its update, so that the end
    of the turn places them under the answer like the earlier ones."""
    with deferred_state_writes() as cards:
        checked = await _answer(state, runtime, config)
    [message] = checked["messages"]
    if not message.id:  # the id the turn's records refer to (the reducer would give it one later)
        message = message.model_copy(update={"id": str(uuid.uuid4())})
    after = {**state, "messages": [*state["messages"], message], "ui": [*(state.get("ui") or []), *cards]}
    ended = await finish_turn(after, runtime, config)  # type: ignore[arg-type]
    return {
        **checked,
        **ended,
        "messages": [message, *ended.get("messages", [])],
        "ui": [*cards, *ended.get("ui", [])],
    }


async def _answer(state: State, runtime: Runtime[RouterContext], config: RunnableConfig) -> dict:
    """`answer`'s answer, its citations checked: {"messages": [the answer], "citation_check"}."""
    context = runtime.context
    sources = state.get("sources", [])
    kb = state["decision"]["kb_prefix"]
    failed = [run["worker_name"] for run in state.get("worker_runs", []) if run["status"] == "error"]
    emit("progress", stage="generation", completed=0, total=1, agent_type="", retrieval_count=len(sources), error=None)
    try:
        model = load_chat_model(context.model, **context.sampling(), timeout=context.model_timeout)
        report_unmet_tool_choice(context.tool_choice, context.model)
    except ModelConfigError:
        text = extractive_answer(sources, EXTRACTIVE_HEADER.format(kb=kb), EXTRACTIVE_EMPTY.format(kb=kb))
        response = AIMessage(content=text, response_metadata={"extractive": True})
    else:
        system = with_preamble(ANSWER_PROMPT.format(kb=kb, passages=passages_text(sources) or NO_PASSAGES))
        if summary := state.get("summary"):
            system += SUMMARY_SECTION.format(summary=summary)
        prompt = [SystemMessage(system), *_history(state["messages"], context.context_window_tokens)]
        response = await ainvoke_with_retries(
            model, prompt, config, retries=context.model_retries, step=1, timeout=context.model_timeout
        )
    if failed:
        response = response.model_copy(
            update={"content": response.text + DEGRADED_NOTE.format(workers=", ".join(failed))}
        )
    emit("progress", stage="generation", completed=1, total=1, agent_type="", retrieval_count=len(sources), error=None)
    return check_citations(response, sources)


def check_citations(message: AIMessage, sources: list[dict]) -> dict:
    """Remove the citations of `message` that match no source of this run and flag links that
    are not sources; the state update with the checked message."""
    result = check_answer_citations(message.text, sources)
    emit(
        "citations_checked",
        cited=len(result["cited"]),
        removed=len(result["invalid"]),
        invented_urls=result["unknown_urls"],
        invalid_numbers=result["invalid"],
        sources=[
            {k: source.get(k) for k in ("index", "kb", "title", "source", "locator", "section")} for source in sources
        ],
    )
    if result["text"] != message.text:
        message = message.model_copy(update={"content": result["text"]})
    return {"messages": [message], "citation_check": {k: v for k, v in result.items() if k != "text"}}


# --- other routes -------------------------------------------------------------------------


def subagent_node(subgraph: CompiledStateGraph[Any, Any, Any, Any], tools: list[str] | None = None):
    """A node that hands the conversation to `subgraph` (its tokens and events stream through,
    under the subgraph's namespace) and takes back its messages, summary and execution log.

    When the sub-agent stops to ask the user (plan approval, a clarifying question), the request is
    kept in the router's `pending` and asked again by `await_reply` on the router thread; the answer
    (a resume value, or a chat message sent meanwhile) is handed back to the sub-agent as its
    `reply` input with the request it answers.
    """

    async def run_subagent(state: State, runtime: Runtime[RouterContext], config: RunnableConfig) -> dict:
        context = runtime.context.restricted_to(tools) if tools is not None else None
        before = state["messages"]
        payload: dict[str, Any] = {"messages": before}
        pending = state.get("pending")
        if pending and pending["route"] == subgraph.name:
            value = pending["value"]
            payload.update(awaiting=value, clarification=value.get("question") or "")
            if "reply" in pending:
                payload["reply"] = pending["reply"]
        try:
            result = await subgraph.ainvoke(payload, config, context=context)
        except GraphInterrupt as exc:
            [first, *_] = exc.args[0]
            return {"pending": {"route": subgraph.name, "value": first.value}}
        after = result.get("messages", [])
        kept = {m.id for m in after}
        known = {m.id: m for m in before}
        # Messages the sub-agent summarized away are removed here too; new or changed ones are taken.
        removed = [RemoveMessage(id=m.id) for m in before if m.id and m.id not in kept]
        update: dict[str, Any] = {"messages": [*removed, *(m for m in after if known.get(m.id) != m)], "pending": None}
        if result.get("summary"):
            update["summary"] = result["summary"]
        if result.get("execution_log"):
            update["execution_log"] = result["execution_log"]
        if result.get("ui"):
            update["ui"] = result["ui"]  # the sub-agent's cards, already attached to its answer
        return update

    run_subagent.__name__ = f"run_{subgraph.name}"
    return run_subagent


def after_subagent(state: State) -> str:
    """Wait for the user when the sub-agent asked something, else finish the turn."""
    return "await_reply" if state.get("pending") else "finish_turn"


def await_reply(state: State) -> dict:
    """Pause the router thread on the sub-agent's request (the same interrupt value: a standard HITL
    request); the resume value goes back to the sub-agent."""
    pending = state["pending"] or {}
    return {"pending": {**pending, "reply": interrupt(pending["value"])}}


def after_reply(state: State) -> str:
    """Back to the sub-agent that asked."""
    return (state.get("pending") or {})["route"]


async def route_error(state: State) -> dict:
    """The message cannot be routed as asked (e.g. unknown knowledge base): say so."""
    decision = state["decision"]
    emit("router_error", stage="routing", error=decision["reason"])
    return {"messages": [AIMessage(content=f"I could not route this request: {decision['reason']}")]}


async def finish_turn(state: State, runtime: Runtime[RouterContext], config: RunnableConfig) -> dict:
    """Note which run answered (feedback refers to it); record a retrieval turn in the chat history
    (the retrieval route ends its turn in `answer`, one step fewer)."""
    decision = state["decision"]
    last = state["messages"][-1]
    update = {
        "answered_runs": [{"run_id": _run_id(config), "route": decision["route"], "message_id": last.id}],
        "seen_message_id": last.id,
        "answering": False,
    }
    # Sub-agents record their own turns; the router records the answers it generated itself.
    if decision["route"] == "retrieval":
        await remember_turn(state["messages"], runtime, config, extract=not last.response_metadata.get("extractive"))
    return update | link_to_answer(state, config)


# Nodes take (state, runtime, config), which LangGraph runs but add_node's overloads do not type
# (langgraph 1.2 has no runtime + config protocol): hence the `type: ignore`s on add_node below
# (mypy reports the first such call as call-overload, later ones as arg-type).
builder = StateGraph(State, input_schema=InputState, context_schema=RouterContext)
builder.add_node("prepare", prepare)  # type: ignore[call-overload, arg-type]
builder.add_node("decide_route", decide_route)  # type: ignore[call-overload, arg-type]
builder.add_node("retrieve", retrieve)  # type: ignore[call-overload, arg-type]
builder.add_node("answer", answer)  # type: ignore[call-overload, arg-type]
builder.add_node("general", subagent_node(react_graph, tools=GENERAL_TOOLS))
for _name, _subgraph in SUBAGENTS.items():
    builder.add_node(_name, subagent_node(_subgraph))
builder.add_node("await_reply", await_reply)
builder.add_node("route_error", route_error)
builder.add_node("finish_turn", finish_turn)  # type: ignore[call-overload, arg-type]

builder.add_edge(START, "prepare")
builder.add_conditional_edges("prepare", after_prepare, ["decide_route", END, *SUBAGENTS])
builder.add_conditional_edges("decide_route", route_after_decision, ["retrieve", "general", "route_error", *SUBAGENTS])
builder.add_edge("retrieve", "answer")
builder.add_edge("answer", END)
for _name in ("general", "route_error"):
    builder.add_edge(_name, "finish_turn")
for _name in SUBAGENTS:
    builder.add_conditional_edges(_name, after_subagent, ["await_reply", "finish_turn"])
builder.add_conditional_edges("await_reply", after_reply, list(SUBAGENTS))
builder.add_edge("finish_turn", END)

graph = explain_failures(builder).compile(name="router")
