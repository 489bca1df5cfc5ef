"""The `deep_research` graph: clarify, plan, parallel researchers with `Send`, cited report.

clarify --(ambiguous)--> ask_user (interrupt) --> plan --(plan_only)--> END
   \\-------------------------------------------> plan --> supervise --Send x N--> researcher --> supervise
supervise --(round done)--> reflect --(gaps, rounds left)--> supervise ... --> write_report --> END

While `plan` asks the model for the plan, a connection check to the search providers runs beside
it; when none can be reached the run ends there with a clear answer (plan --> END), whatever the
model's speed.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, get_buffer_string
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, Overwrite, Send, interrupt
from pydantic import BaseModel, Field

from graphs.deep_research.budget import approx_tokens, fit_texts, fit_to_budget, invoke_fitted
from graphs.deep_research.citations import cite_notes, number_sources, validate_report
from graphs.deep_research.context import ResearchContext
from graphs.deep_research.prompts import (
    CLARIFY_PROMPT,
    MODEL_FAILED_HINT,
    MODEL_FAILED_LOG,
    NOTHING_FOUND_HINT,
    PLAN_ANSWER,
    PLAN_PROMPT,
    REFLECT_PROMPT,
    REPORT_PROMPT,
    REPORT_RESEARCH_FAILED,
    SEARCH_FAILED_HINT,
    SEARCH_FAILED_LOG,
)
from graphs.deep_research.researcher import research, search_unreachable
from graphs.deep_research.state import InputState, ResearcherInput, State, SubQuestion
from graphs.runtime import hitl
from graphs.runtime.events import emit
from graphs.runtime.failures import explain_failures
from graphs.runtime.memory_schedule import finish_turn
from graphs.runtime.models import load_chat_model, report_unmet_tool_choice
from graphs.runtime.readable import summarize_errors
from graphs.runtime.structured import ainvoke_structured
from graphs.runtime.ui import chat_messages, start_progress

STRUCTURED_ATTEMPTS = 3
REPORT_OUTPUT_RESERVE = 0.25

logger = logging.getLogger(__name__)


class ClarifyDecision(BaseModel):
    """Whether the request needs a clarifying question before research."""

    need_clarification: bool = Field(description="True only if the request is genuinely ambiguous.")
    question: str = Field(default="", description="The one question to ask the user; empty when none.")


class PlannedQuestion(BaseModel):
    """A sub-question and the web searches that answer it."""

    question: str = Field(description="A specific, self-contained sub-question.")
    queries: list[str] = Field(description="1-3 web search queries for it.")


class ResearchPlan(BaseModel):
    """The research brief and the sub-questions researched in parallel."""

    brief: str = Field(description="The research brief: question, audience, constraints.")
    sub_questions: list[PlannedQuestion] = Field(description="Independent sub-questions, most important first.")


class Reflection(BaseModel):
    """Gaps left after a research round."""

    gaps: list[PlannedQuestion] = Field(default_factory=list, description="New sub-questions; empty when done.")


def _today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


async def structured(
    schema: type[BaseModel],
    prompt: str,
    role: str,
    runtime: Runtime[ResearchContext],
    config: RunnableConfig,
    *,
    step: int = 0,
) -> Any:
    """Ask the `role` model for `schema` (graphs/runtime/structured.py); retry a malformed answer, then fail clearly."""
    context = runtime.context
    model = load_chat_model(context.model_for(role), temperature=context.temperature, timeout=context.model_timeout)
    result = await ainvoke_structured(
        model,
        schema,
        [HumanMessage(prompt)],
        config,
        retries=context.model_retries,
        timeout=context.model_timeout,
        step=step,
        attempts=STRUCTURED_ATTEMPTS,
        model_name=context.model_for(role),
    )
    return result.value


async def clarify(state: State, runtime: Runtime[ResearchContext], config: RunnableConfig) -> dict:
    """Decide whether to ask the user a clarifying question (only when the context allows it).

    When the thread still waits for the answer to an earlier question (a run paused there, then a
    new input came), the input's `reply`, or else its new chat message, is that answer.
    """
    pending = state.get("clarification")
    last = state["messages"][-1] if state.get("messages") else None
    if pending and (state.get("reply") is not None or isinstance(last, HumanMessage)):
        if state.get("reply") is not None:
            try:
                answer = _answer_text(state["reply"])
            except hitl.ReplyError:
                answer = ""
            if answer is None:  # dismissed: research the request as it is
                return {"clarification": "", "reply": None}
            if answer:
                return {"clarification": "", "reply": None, "messages": [AIMessage(pending), HumanMessage(answer)]}
            return {"clarification": pending, "reply": None}  # asked again by ask_user
        assert isinstance(last, HumanMessage)
        # The chat message answers the question: the thread reads question, then answer.
        answer_message = HumanMessage(last.content, additional_kwargs=last.additional_kwargs)
        removed = [RemoveMessage(id=last.id)] if last.id else []
        return {"clarification": "", "reply": None, "messages": [*removed, AIMessage(pending), answer_message]}
    if not runtime.context.allow_clarification:
        return {"clarification": "", "reply": None}
    prompt = CLARIFY_PROMPT.format(today=_today(), conversation=get_buffer_string(chat_messages(state["messages"])))
    decision = await structured(ClarifyDecision, prompt, "research", runtime, config)
    question = decision.question.strip() if decision.need_clarification else ""
    if question:
        emit("clarification_requested", question=question)
    return {"clarification": question, "reply": None}


def _answer_text(value: Any) -> str | None:
    """The answer in a resume value: the standard `{"decisions": [{"type": "respond", "message"}]}`
    (or an `edit` of the `answer` field, what agent-chat-ui's form sends), `{"answer": ...}`, or text;
    None when the question was dismissed (`ignore`: the research goes on without an answer)."""
    decision = hitl.decision(value)
    if decision is not None:
        if decision.type == "ignore":
            return None
        if decision.type == "respond":
            return decision.message
        if decision.type == "edit":
            return str((decision.args or {}).get("answer") or "").strip()
        raise hitl.ReplyError(f"a clarifying question is answered with 'respond' or 'edit', not {decision.type!r}")
    if isinstance(value, dict):
        value = value.get("answer") or value.get("content") or ""
    return str(value or "").strip()


def _question_request(question: str, error: str | None = None) -> dict:
    """The clarifying question as a standard HITL request: a form with an `answer` field
    (agent-chat-ui: edit) or a reply (Agent Inbox: respond); `question` beside it for SDK clients."""
    extra: dict[str, Any] = {"question": question}
    if error:
        extra["error"] = error
    description = question + (f"\n\n{error}" if error else "")
    return hitl.request(
        "clarifying_question", {"question": question, "answer": ""}, description, ["edit", "respond"], **extra
    )


def ask_user(state: State) -> dict:
    """Interrupt with the question; resume with the answer (`{"decisions": [{"type": "respond",
    "message": "..."}]}`, text, or `{"answer": "..."}`). An empty or unreadable answer asks again;
    `{"decisions": [{"type": "ignore"}]}` goes on without one."""
    question = state["clarification"]
    error: str | None = None
    while True:
        try:
            answer = _answer_text(interrupt(_question_request(question, error)))
        except hitl.ReplyError as exc:
            answer, error = "", str(exc)
        else:
            error = "The answer was empty."
        if answer is None:
            return {"clarification": ""}
        if answer:
            break
    return {"messages": [AIMessage(question), HumanMessage(answer)], "clarification": ""}


_URL_QUERY = re.compile(r"^\s*(?:https?|kb)://", re.IGNORECASE)
"""A source's address given as a search query (a small model copies them from the notes): not searched."""


def _sub_questions(planned: list[PlannedQuestion]) -> list[SubQuestion]:
    """The planned sub-questions, each once, with at most 3 queries (none that is an address: the
    sub-question itself is searched when none is left)."""
    found: list[SubQuestion] = []
    for item in planned:
        question = item.question.strip()
        if question and question not in (q["question"] for q in found):
            queries = [q.strip() for q in item.queries if q.strip() and not _URL_QUERY.search(q)]
            found.append({"question": question, "queries": queries[:3]})
    return found


async def plan(state: State, runtime: Runtime[ResearchContext], config: RunnableConfig) -> dict:
    """Write the research brief and the sub-questions; answer with the plan in plan-only mode."""
    context = runtime.context
    prompt = PLAN_PROMPT.format(
        today=_today(),
        conversation=get_buffer_string(chat_messages(state["messages"])),
        max_sub_questions=context.max_sub_questions,
    )
    asked = structured(ResearchPlan, prompt, "research", runtime, config)
    if context.plan_only or context.knowledge_bases:  # no search needed, or sources without it
        result = await asked
    else:
        planned, unreachable = await _unless_search_is_unreachable(asked, context)
        if planned is None or unreachable:
            return _search_unreachable(unreachable)
        result = planned
    questions = _sub_questions(result.sub_questions)
    if not questions:
        questions = [{"question": result.brief, "queries": []}]
    kept, dropped = questions[: context.max_sub_questions], questions[context.max_sub_questions :]
    emit("research_brief", brief=result.brief)
    emit(
        "research_plan",
        sub_questions=[q["question"] for q in kept],
        queries=[q["queries"] for q in kept],
        dropped=[q["question"] for q in dropped],
    )
    update: dict = {
        "brief": result.brief,
        "plan": [q["question"] for q in kept],
        "pending": kept,
        "wave": [],
        "round": 1,
        "waves": 0,
        "report": "",
        "notes": Overwrite([]),
        "sources": Overwrite([]),
        "research_log": Overwrite([]),
    }
    if context.plan_only:
        steps = "\n".join(
            f"{n}. {q['question']}" + (f" (searches: {'; '.join(q['queries'])})" if q["queries"] else "")
            for n, q in enumerate(kept, 1)
        )
        update["messages"] = [AIMessage(PLAN_ANSWER.format(brief=result.brief, steps=steps))]
        return update
    return start_progress(state, update)  # the researchers' cards show under it while they run


async def _unless_search_is_unreachable(
    asked: Awaitable[ResearchPlan], context: ResearchContext
) -> tuple[ResearchPlan | None, list[str]]:
    """The plan, and why web search cannot be reached ([] when it can). The connection check runs
    beside the planning call; when it finds every provider unreachable first, the planning call
    is cancelled (None): a slow model is not waited for when no search could follow it."""
    planning = asyncio.ensure_future(asked)
    check = asyncio.ensure_future(search_unreachable(context))
    try:
        done, _ = await asyncio.wait({planning, check}, return_when=asyncio.FIRST_COMPLETED)
        if check in done and check.result():
            return None, check.result()
        result = await planning
        return result, await check
    finally:
        for task in (planning, check):
            if not task.done():
                task.cancel()


def _search_unreachable(errors: list[str]) -> dict:
    """End the turn before any research: no search provider can be reached. The answer names
    the first provider's error and counts the others, as when every search failed."""
    detail = f"web search cannot be reached: {summarize_errors(errors)}"
    emit("research_failed", error=detail, failures=len(errors))
    logger.warning("deep_research: %s; %s", detail, SEARCH_FAILED_LOG)
    return {
        "brief": "",
        "plan": [],
        "pending": [],
        "wave": [],
        "report": "",
        "notes": Overwrite([]),
        "sources": Overwrite([]),
        "research_log": Overwrite([]),
        "messages": [AIMessage(REPORT_RESEARCH_FAILED.format(reason=detail, hint=SEARCH_FAILED_HINT))],
    }


def after_plan(state: State, runtime: Runtime[ResearchContext]) -> str:
    """Finish the turn with the plan in plan-only mode, or when there is nothing to research
    (web search unreachable), else research."""
    return "finish_turn" if runtime.context.plan_only or not state.get("plan") else "supervise"


def supervise(state: State, runtime: Runtime[ResearchContext]) -> dict:
    """Take the next wave of at most `max_concurrent_research_units` pending sub-questions."""
    limit = runtime.context.max_concurrent_research_units
    pending = state.get("pending", [])
    wave, rest = pending[:limit], pending[limit:]
    if not wave:
        return {"wave": []}
    waves = state.get("waves", 0) + 1
    emit(
        "research_round",
        round=state.get("round", 1),
        wave=waves,
        sub_questions=[q["question"] for q in wave],
        pending=len(rest),
    )
    return {"wave": wave, "pending": rest, "waves": waves}


def dispatch(state: State) -> list[Send] | str:
    """Fan the wave out to researchers, one `Send` each; an empty wave ends the round."""
    wave = state.get("wave", [])
    if not wave:
        return "reflect"
    return [
        Send(
            "researcher",
            ResearcherInput(
                researcher_id=f"r{state['waves']}.{n}",
                round=state.get("round", 1),
                question=q["question"],
                queries=q["queries"],
                brief=state.get("brief", ""),
            ),
        )
        for n, q in enumerate(wave, 1)
    ]


def _notes_texts(state: State) -> list[str]:
    return [f"### {note['question']}\n{note['text']}" for note in state.get("notes", [])]


async def reflect(state: State, runtime: Runtime[ResearchContext], config: RunnableConfig) -> Command:
    """Find gaps in the notes and start another round while rounds are left."""
    context, current = runtime.context, state.get("round", 1)
    if not state.get("sources") or current >= context.max_research_rounds:
        return Command(goto="write_report")
    limit = context.max_concurrent_research_units
    template = REFLECT_PROMPT.format(today=_today(), brief=state["brief"], questions="", notes="", max_gaps=limit)
    notes, _ = fit_texts(_notes_texts(state), int(context.context_window_tokens * 0.75) - approx_tokens(template))
    prompt = REFLECT_PROMPT.format(
        today=_today(),
        brief=state["brief"],
        questions="\n".join(f"- {q}" for q in state.get("plan", [])),
        notes="\n\n".join(notes),
        max_gaps=limit,
    )
    result = await structured(Reflection, prompt, "research", runtime, config, step=current)
    gaps = [q for q in _sub_questions(result.gaps) if q["question"] not in state.get("plan", [])]
    kept, dropped = gaps[:limit], gaps[limit:]
    emit(
        "research_reflection",
        round=current,
        gaps=[q["question"] for q in kept],
        dropped=[q["question"] for q in dropped],
    )
    if not kept:
        return Command(goto="write_report")
    return Command(
        goto="supervise",
        update={
            "pending": kept,
            "round": current + 1,
            "plan": [*state.get("plan", []), *(q["question"] for q in kept)],
        },
    )


def _failure(state: State) -> dict:
    """Nothing was retrieved: an error event and an answer naming the cause, never an empty report."""
    log = state.get("research_log", [])
    errors = [entry["error"] for entry in log if entry.get("error")]
    searches_failed = all(entry.get("sources_found", 0) == 0 for entry in log)
    reason = "every web search failed" if searches_failed else "every researcher failed"
    # Each search's own error (researchers' lists) when there are, else each researcher's: the
    # first one and a count, never every error one after the other.
    each = [error for entry in log for error in entry.get("errors") or []] if searches_failed else []
    if searches_failed and not each:  # the searches worked and found nothing: no outage to report
        detail = "the web searches found no sources for it"
        emit("research_failed", error=detail, failures=len(errors))
        return {
            "report": "",
            "messages": [AIMessage(REPORT_RESEARCH_FAILED.format(reason=detail, hint=NOTHING_FOUND_HINT))],
        }
    summary = summarize_errors(each or errors)
    detail = f"{reason}: {summary}" if summary else reason
    emit("research_failed", error=detail, failures=len(errors))
    hint = SEARCH_FAILED_HINT if searches_failed else MODEL_FAILED_HINT
    logger.warning("deep_research: %s; %s", detail, SEARCH_FAILED_LOG if searches_failed else MODEL_FAILED_LOG)
    return {"report": "", "messages": [AIMessage(REPORT_RESEARCH_FAILED.format(reason=detail, hint=hint))]}


async def write_report(state: State, runtime: Runtime[ResearchContext], config: RunnableConfig) -> dict:
    """Write the markdown report (streamed), then keep only citations of retrieved sources, citing
    from the notes what the report states without a citation (`validate_report`)."""
    context = runtime.context
    if not state.get("sources"):
        return _failure(state)
    catalog = number_sources(state["sources"])
    sources_text = "\n".join(f"[{s['n']}] {s['title']}: {s['url']}" for s in catalog)
    texts = [cite_notes(text, catalog) for text in _notes_texts(state)]
    template = REPORT_PROMPT.format(today=_today(), brief=state["brief"], notes="", sources=sources_text)
    budget = int(context.context_window_tokens * (1 - REPORT_OUTPUT_RESERVE)) - approx_tokens(template)
    fitted = fit_to_budget(texts, budget, stage="report")
    emit("report_writing", sources=len(catalog), notes=len(texts), notes_tokens=sum(map(approx_tokens, fitted)))
    model = load_chat_model(context.model_for("report"), **context.sampling(), timeout=context.model_timeout)
    report_unmet_tool_choice(context.tool_choice, context.model_for("report"))
    response = await invoke_fitted(
        model,
        lambda fitted: REPORT_PROMPT.format(
            today=_today(), brief=state["brief"], notes="\n\n".join(fitted), sources=sources_text
        ),
        fitted,
        config,
        context,
        stage="report",
        step=state.get("round", 1) + 1,
    )
    check = validate_report(response.text, catalog, notes=texts)
    emit(
        "citations_checked",
        cited=len(check.cited),
        removed=check.removed,
        invented_urls=check.invented_urls,
        invalid_numbers=check.removed_numbers,
        attributed=check.attributed,
    )
    # The report keeps its model call's metadata (model, time, token usage); it was written from the web.
    report = AIMessage(
        check.report,
        id=response.id,
        response_metadata={**response.response_metadata, "web_search": True},
        usage_metadata=response.usage_metadata,
    )
    return {"report": check.report, "messages": [report]}


# Nodes take (state, runtime, config), which LangGraph runs but add_node's overloads do not type
# (langgraph 1.2 has no runtime + config protocol): hence the `type: ignore`s on add_node below
# (mypy reports the first such call as call-overload, later ones as arg-type).
builder = StateGraph(State, input_schema=InputState, context_schema=ResearchContext)
builder.add_node("clarify", clarify)  # type: ignore[call-overload, arg-type]
builder.add_node("ask_user", ask_user)
builder.add_node("plan", plan)  # type: ignore[call-overload, arg-type]
builder.add_node("supervise", supervise)
builder.add_node("researcher", research)  # type: ignore[call-overload, arg-type]
builder.add_node("reflect", reflect, destinations=("supervise", "write_report"))  # type: ignore[call-overload, arg-type]
builder.add_node("write_report", write_report)  # type: ignore[call-overload, arg-type]
builder.add_node("finish_turn", finish_turn)  # type: ignore[call-overload, arg-type]
builder.add_edge(START, "clarify")
builder.add_conditional_edges(
    "clarify", lambda s: "ask_user" if s.get("clarification") else "plan", ["ask_user", "plan"]
)
builder.add_edge("ask_user", "plan")
builder.add_conditional_edges("plan", after_plan, ["supervise", "finish_turn"])
builder.add_conditional_edges("supervise", dispatch, ["researcher", "reflect"])
builder.add_edge("researcher", "supervise")
builder.add_edge("write_report", "finish_turn")
builder.add_edge("finish_turn", END)

graph = explain_failures(builder).compile(name="deep_research")
