"""The `plan_execute` graph: plan a DAG of steps, run ready steps in parallel waves, recover, replan,
synthesize.

planner --> [approve] --> run_step x N (Send, one wave) --> replanner --> run_step ... --> synthesizer
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NamedTuple, TypeVar

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Overwrite, Send, interrupt
from pydantic import BaseModel

from graphs.plan_execute.context import PlanExecuteContext
from graphs.plan_execute.plan import (
    OK_STATUSES,
    Plan,
    PlanError,
    Replan,
    blocked_steps,
    parse_plan,
    pending_steps,
    ready_steps,
    validate_steps,
)
from graphs.plan_execute.plan_text import looks_like_plan_text, parse_plan_text, plan_text
from graphs.plan_execute.prompts import (
    ANSWER_FALLBACK_MESSAGE,
    PLAN_DISMISSED_MESSAGE,
    PLAN_FAILED_MESSAGE,
    PLAN_REJECTED_MESSAGE,
    PLAN_RETRY_PROMPT,
    PLANNER_PROMPT,
    REPLANNER_PROMPT,
    SYNTHESIZER_PROMPT,
)
from graphs.plan_execute.state import InputState, State
from graphs.plan_execute.steps import log_entry, run_step
from graphs.runtime import hitl
from graphs.runtime.events import emit
from graphs.runtime.failures import explain_failures
from graphs.runtime.memory_schedule import finish_turn
from graphs.runtime.models import ModelCallError, ainvoke_with_retries, load_chat_model, report_unmet_tool_choice
from graphs.runtime.prompts import with_preamble
from graphs.runtime.readable import readable
from graphs.runtime.structured import StructuredOutputError, ainvoke_structured
from graphs.runtime.ui import chat_messages, start_progress
from tools.registry import select_tools

PLAN_ATTEMPTS = 3
"""Model calls the planner (and each replan) gets to produce a plan that passes validation."""
REVIEW_KEY = "plan_review"
"""`additional_kwargs` key marking a chat message that answered a plan approval (its decision)."""
CHANGES_NOTE = "\n\nChanges asked for when the plan was reviewed: {changes}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _task(state: State) -> str:
    """The request: the last human message that is not a reply to a plan approval, plus the changes
    asked for in replies after it."""
    changes: list[str] = []
    for message in reversed(state["messages"]):
        if isinstance(message, HumanMessage):
            kind = message.additional_kwargs.get(REVIEW_KEY)
            if kind == "feedback":
                changes.insert(0, message.text)
            elif not kind:
                return message.text + (CHANGES_NOTE.format(changes="; ".join(changes)) if changes else "")
    raise ValueError("plan_execute needs a user message: send {'messages': [{'role': 'user', 'content': ...}]}")


async def _tools(context: PlanExecuteContext) -> tuple[set[str], str]:
    """Names of the tools steps may call, and their descriptions for the planner."""
    tools = await select_tools(context.tools)
    lines = [
        f"- {t.name}: {next(iter((t.description or '').strip().splitlines()), '')} "
        f"args: {json.dumps(t.args, ensure_ascii=False)}"
        for t in tools
    ]
    return {t.name for t in tools}, "\n".join(lines)


def _log_text(log: list[dict]) -> str:
    if not log:
        return "(no steps were run)"
    lines = []
    for entry in log:
        how = f", tool {entry['tool']}" if entry.get("tool") else ""
        if entry.get("recovery"):
            how += f", recovered by {entry['recovery']}"
        # Results as people read them: a model copies what it is shown, raw JSON included.
        outcome = readable(entry.get("result", "")) if entry["status"] in OK_STATUSES else entry.get("error", "")
        shown = textwrap.indent(outcome, "  ")
        lines.append(f"- {entry['step_id']} [{entry['status']}{how}] {entry['description']}\n{shown}")
    return "\n".join(lines)


def _fallback_answer(log: list[dict], reason: str) -> str:
    """The answer when the model wrote none: each step's result (rendered for people) or failure."""
    lines = []
    for entry in log:
        if entry["status"] in OK_STATUSES:
            found = readable(entry.get("result", ""), limit=1500)
        else:
            found = f"{entry['status']}: {readable(entry.get('error', ''), limit=300)}"
        found = textwrap.indent(found, "  ").lstrip() if "\n" in found else found
        lines.append(f"- {entry['description']}: {found}")
    return ANSWER_FALLBACK_MESSAGE.format(reason=reason, results="\n".join(lines) or "(no steps were run)")


SchemaT = TypeVar("SchemaT", bound=BaseModel)
CheckedT = TypeVar("CheckedT")


async def _structured(
    schema: type[SchemaT],
    messages: list[AnyMessage],
    check: Callable[[SchemaT], CheckedT],
    context: PlanExecuteContext,
    config: RunnableConfig,
    step: int,
) -> tuple[CheckedT, int]:
    """Ask for `schema` (graphs/runtime/structured.py), re-asking with the error until `check` passes.

    Returns (checked value, attempts); raises PlanError with the last problem after PLAN_ATTEMPTS.
    """
    model = load_chat_model(context.model, temperature=context.temperature, timeout=context.model_timeout)

    def invalid(attempt: int, error: str) -> None:
        emit("plan_invalid", stage=schema.__name__.lower(), attempt=attempt, error=error)

    try:
        # Planning is not part of the answer: its tokens stay off the chat stream (the helper's tags).
        result = await ainvoke_structured(
            model,
            schema,
            messages,
            config,
            retries=context.model_retries,
            timeout=context.model_timeout,
            step=step,
            attempts=PLAN_ATTEMPTS,
            check=check,
            on_invalid=invalid,
            retry_prompt=PLAN_RETRY_PROMPT,
            tags=[f"plan_execute_{schema.__name__.lower()}"],
        )
    except StructuredOutputError as exc:
        raise PlanError(exc.error) from None
    return result.value, result.attempts


async def planner(state: State, runtime: Runtime[PlanExecuteContext], config: RunnableConfig) -> dict:
    """Make a validated plan for the latest request, or end the turn explaining why none could be made."""
    context = runtime.context
    _task(state)  # a clear error when there is no user message
    names, described = await _tools(context)
    prompt = with_preamble(PLANNER_PROMPT.format(max_steps=context.max_plan_steps, tools=described, now=_now()))

    def check(plan: Plan) -> list[dict]:
        return validate_steps(plan.steps, names, context.max_plan_steps)

    fresh = {"execution_log": Overwrite([]), "replans": 0, "waves": 0, "final_answer": ""}
    try:
        steps, attempts = await _structured(
            Plan, [SystemMessage(prompt), *chat_messages(state["messages"])], check, context, config, step=0
        )
    except PlanError as exc:
        emit("plan_failed", error=str(exc), attempts=PLAN_ATTEMPTS)
        message = PLAN_FAILED_MESSAGE.format(attempts=PLAN_ATTEMPTS, error=exc)
        return fresh | {"plan": [], "status": "failed", "final_answer": message, "messages": [AIMessage(message)]}
    emit("plan_created", steps=steps, attempts=attempts)
    update = fresh | {"plan": steps, "status": "running", "awaiting": None, "reply": None, "review": ""}
    if context.approve_plan:
        # Kept in the state before the approval interrupt, so a chat message sent while the run
        # waits is read as the answer (approve_or_plan) instead of a new request.
        update["awaiting"] = _approval_request(_task(state), steps, None)
        update["awaiting_since"] = state["messages"][-1].id
        return update
    return start_progress(state, update)  # the steps' cards show under it while they run


PLAN_ACTION = "Review the plan"
"""The approval request's action name: the title agent-chat-ui and Agent Inbox show above it."""


def _approval_request(task: str, plan: list[dict], error: str | None) -> dict:
    """The approval interrupt: the standard HITL request (Approve / Edit / Reject in agent-chat-ui),
    with `task`, `plan`, `error` and `resume` beside it for SDK clients.

    The form's one field, `steps`, is the plan as numbered text (plan_text.py): a chat client
    shows it as it is, in an editable text box beside the buttons, and sends the edited text back.
    The description, which clients render as markdown, is escaped so that `17*23` stays `17*23`.
    """
    count = f"{len(plan)} step{'s' if len(plan) != 1 else ''}"
    description = f"Plan for: {task}\n\n{count}; approve it, edit the steps, or reject it."
    if error:
        description += f"\n\nThe last answer could not be used: {error}"
    return hitl.request(
        PLAN_ACTION,
        {"steps": plan_text(plan)},
        hitl.markdown_text(description),
        ["approve", "edit", "reject", "respond"],
        task=task,
        plan=plan,
        error=error,
        resume=(
            "{'decisions': [{'type': 'approve'} | {'type': 'edit', 'edited_action': {'name': '"
            + PLAN_ACTION
            + "', 'args': {'steps': <numbered text, or a list of steps>}}} | {'type': 'reject', 'message': "
            "'...'} | {'type': 'respond', 'message': 'changes to make'} | {'type': 'ignore'}]} "
            "(or {'action': 'approve' | 'edit' | 'reject', 'plan': [...]})"
        ),
    )


def _edited_steps(steps: object, names: set[str], context: PlanExecuteContext) -> list[dict]:
    """An edited plan, checked: numbered text (the approval form's), a list of steps, or its JSON."""
    if looks_like_plan_text(steps):
        assert isinstance(steps, str)
        raw: object = parse_plan_text(steps)
    else:
        try:
            raw = hitl.json_arg(steps, "steps")
        except hitl.ReplyError as exc:
            raise PlanError(str(exc)) from None
    return parse_plan(raw, names, context.max_plan_steps)


def _review(answer: object, names: set[str], context: PlanExecuteContext) -> tuple[str, list[dict] | None, str]:
    """Read a client's answer: (approve | edit | reject | ignore | feedback, edited steps, message).

    Takes the standard `{"decisions": [...]}`, the older `{"action": ..., "plan": [...]}` and text
    ("approve", "yes", "no", or changes wanted: feedback, planned again). PlanError when unusable.
    """
    try:
        decision = hitl.decision(answer)
        if decision is not None:
            if decision.type == "edit":
                steps = (decision.args or {}).get("steps")
                if steps is None:
                    raise PlanError("an edit needs the new plan in edited_action.args.steps")
                return "edit", _edited_steps(steps, names, context), ""
            if decision.type == "respond":
                if not decision.message:
                    raise PlanError("a 'respond' decision needs a message: the changes to make to the plan")
                return "feedback", None, decision.message
            return decision.type, None, decision.message
    except hitl.ReplyError as exc:
        raise PlanError(str(exc)) from None
    if isinstance(answer, str):
        if answer.strip() in ("approve", "edit", "reject"):
            answer = {"action": answer.strip()}
        else:
            kind = hitl.reply_kind(answer)
            if kind == "other" and not answer.strip():
                raise PlanError("the answer was empty")
            return ("feedback" if kind == "other" else kind), None, answer.strip() if kind == "other" else ""
    if not isinstance(answer, dict) or answer.get("action") not in ("approve", "edit", "reject"):
        raise PlanError(
            "resume with {'decisions': [{'type': 'approve' | 'edit' | 'reject' | 'respond', ...}]} "
            "or {'action': 'approve' | 'edit' | 'reject', 'plan': [...] for edit}"
        )
    if answer["action"] != "edit":
        return answer["action"], None, ""
    if "plan" not in answer:
        raise PlanError("an edit needs the new plan under 'plan'")
    return "edit", _edited_steps(answer["plan"], names, context), ""


def _chat_reply(state: State) -> HumanMessage | None:
    """A chat message sent while the plan waited for approval (a new run's input), if any."""
    last = state["messages"][-1] if state.get("messages") else None
    if (
        state.get("awaiting")
        and isinstance(last, HumanMessage)
        and last.id != state.get("awaiting_since")
        and not last.additional_kwargs.get(REVIEW_KEY)
    ):
        return last
    return None


def start(state: State) -> str:
    """A new input while a plan waits for approval answers it; anything else is a new request."""
    return "approve" if state.get("reply") is not None or _chat_reply(state) else "planner"


async def approve(state: State, runtime: Runtime[PlanExecuteContext]) -> dict:
    """Wait for the client to approve, edit or reject the plan (an interrupt; asks again on a bad answer).

    The answer may also come as the input's `reply` or as a chat message sent while the run
    waited (see `start`): approve-like text approves, reject-like text rejects, and anything else is
    a change request: the plan is made again from the conversation and waits for approval again.
    """
    names, _ = await _tools(runtime.context)
    pending = state.get("awaiting") or {}
    plan = pending.get("plan") or state["plan"]
    task = pending.get("task") or _task(state)
    chat = _chat_reply(state) if state.get("reply") is None else None
    update: dict = {"plan": plan, "awaiting": None, "reply": None}
    if state.get("reply") is not None:
        answer = state["reply"]
    elif chat is not None:
        answer = chat.text
    else:
        answer = interrupt(_approval_request(task, plan, None))
    while True:
        try:
            action, edited, message = _review(answer, names, runtime.context)
            break
        except PlanError as exc:
            chat = None  # a chat message that could not be read stays an ordinary message
            answer = interrupt(_approval_request(task, plan, str(exc)))
    update["review"] = action
    if chat is not None:
        update["messages"] = [
            chat.model_copy(update={"additional_kwargs": {**chat.additional_kwargs, REVIEW_KEY: action}})
        ]
    elif action == "feedback":
        update["messages"] = [HumanMessage(message, additional_kwargs={REVIEW_KEY: "feedback"})]
    if action == "feedback":
        emit("plan_reviewed", action=action, steps=plan)
        return update
    if action in ("reject", "ignore"):
        emit("plan_reviewed", action=action, steps=plan)
        text = (
            PLAN_DISMISSED_MESSAGE
            if action == "ignore"
            else PLAN_REJECTED_MESSAGE + (f" ({message})" if message else "")
        )
        return update | {
            "status": "rejected",
            "final_answer": text,
            "messages": [*update.get("messages", []), AIMessage(text)],
        }
    emit("plan_reviewed", action=action, steps=edited or plan)
    edit = {"plan": edited} if edited is not None else {}
    return start_progress(state, update | edit, replaced=("plan",))  # the plan card just pushed replaces the first


def after_approve(state: State, runtime: Runtime[PlanExecuteContext]) -> list[Send] | str:
    """Plan again after a change request, else run the (approved or edited) plan."""
    return "planner" if state.get("review") == "feedback" else dispatch(state, runtime)


def dispatch(state: State, runtime: Runtime[PlanExecuteContext]) -> list[Send] | str:
    """The next wave: one `run_step` task per ready step (at most `max_parallel_steps`), else the answer."""
    if state.get("status") in ("failed", "rejected"):
        return END
    log = state.get("execution_log", [])
    wave = ready_steps(state.get("plan", []), log)[: runtime.context.max_parallel_steps]
    if not wave:
        return "synthesizer"
    results = {entry["step_id"]: entry for entry in log}
    task, number = _task(state), state.get("waves", 0) + 1
    return [
        Send(
            "run_step",
            {
                "step": step,
                "task": task,
                "wave": number,
                "dependencies": [results[dep] for dep in step["depends_on"]],
            },
        )
        for step in wave
    ]


def route_after_planner(state: State, runtime: Runtime[PlanExecuteContext]) -> list[Send] | str:
    """Approval first when the context asks for it, else straight to the first wave."""
    if state.get("status") == "running" and runtime.context.approve_plan:
        return "approve"
    return dispatch(state, runtime)


async def replanner(state: State, runtime: Runtime[PlanExecuteContext], config: RunnableConfig) -> dict:
    """After a wave: continue, revise the remaining steps, or finish; then skip what can no longer run."""
    context = runtime.context
    plan, log = state["plan"], state.get("execution_log", [])
    waves, replans = state.get("waves", 0) + 1, state.get("replans", 0)
    update: dict = {"waves": waves}
    changed: list[dict] = []
    failed = [e for e in log if e["status"] == "failed" and not e.get("recovery")]
    pending = pending_steps(plan, log)
    failed_now = any(e["wave"] == waves for e in failed)
    if (pending or failed_now) and replans < context.max_replans:
        decision = await _ask_replanner(state, pending, replans, context, config, waves)
        if decision.action == "revise":
            replans += 1
            new_steps = decision.steps
            kept = {step["id"] for step in new_steps}
            reason = f"removed by replan {replans}: {decision.reason}"
            changed += [_skipped(s, "dropped", reason, waves) for s in pending if s["id"] not in kept]
            changed += [e | {"recovery": "replan"} for e in failed]
            logged = {e["step_id"] for e in log}
            plan = [s for s in plan if s["id"] in logged] + new_steps
            update.update(plan=plan, replans=replans)
        elif decision.action == "finish":
            reason = f"not needed (the replanner finished early): {decision.reason}"
            changed += [_skipped(s, "dropped", reason, waves) for s in pending]
        emit(
            "replan",
            replan=replans,
            action=decision.action,
            reason=decision.reason,
            steps=decision.steps if decision.action == "revise" else [],
            failed_steps=[e["step_id"] for e in failed],
        )
    # Steps behind a failed step can never run: log them as skipped (transitively).
    current = log + changed
    while blocked := blocked_steps(plan, current):
        for step, deps in blocked:
            entry = _skipped(step, "skipped", f"depends on {', '.join(deps)}, which did not succeed", waves)
            current.append(entry)
            changed.append(entry)
    if changed:
        update["execution_log"] = changed
    return update


def _skipped(step: dict, status: str, reason: str, wave: int) -> dict:
    emit("plan_step_skipped", step_id=step["id"], status=status, reason=reason)
    return log_entry(step, wave, status=status, error=reason, attempts=0, duration_ms=0.0)


class _Decision(NamedTuple):
    action: str
    reason: str
    steps: list[dict]


async def _ask_replanner(
    state: State, pending: list[dict], replans: int, context: PlanExecuteContext, config: RunnableConfig, wave: int
) -> _Decision:
    """The replanner's validated decision; 'continue' when it cannot produce a valid one."""
    log = state.get("execution_log", [])
    names, described = await _tools(context)
    finished = {e["step_id"]: e["status"] for e in log}
    prompt = with_preamble(
        REPLANNER_PROMPT.format(
            max_steps=context.max_plan_steps,
            replans_left=context.max_replans - replans,
            tools=described,
            task=_task(state),
            log=_log_text(log),
            remaining=json.dumps(pending, ensure_ascii=False, indent=1) if pending else "(none)",
        )
    )

    def check(decision: Replan) -> _Decision:
        steps = []
        if decision.action == "revise":
            steps = validate_steps(decision.steps, names, context.max_plan_steps, finished)
        return _Decision(decision.action, decision.reason, steps)

    messages: list[AnyMessage] = [SystemMessage(prompt), HumanMessage(f"{_task(state)}\n\nDecide by calling `Replan`.")]
    try:
        decision, _ = await _structured(Replan, messages, check, context, config, step=wave)
    except PlanError as exc:
        return _Decision("continue", f"no valid revision ({exc}); continuing with the plan as it is", [])
    return decision


def outcome(log: list[dict]) -> str:
    """completed, or partial when a failure was never replanned around or a step was skipped."""
    unresolved = any(
        (e["status"] == "failed" and e.get("recovery") != "replan") or e["status"] == "skipped" for e in log
    )
    return "partial" if unresolved else "completed"


async def synthesizer(state: State, runtime: Runtime[PlanExecuteContext], config: RunnableConfig) -> dict:
    """Write the final answer from the execution log (streamed as tokens; an AI message in `messages`)."""
    context = runtime.context
    log = state.get("execution_log", [])
    status = outcome(log)
    emit(
        "synthesis_started",
        status=status,
        failed_steps=[e["step_id"] for e in log if e["status"] in ("failed", "skipped")],
    )
    model = load_chat_model(context.model, **context.sampling(), timeout=context.model_timeout)
    report_unmet_tool_choice(context.tool_choice, context.model)
    prompt = with_preamble(SYNTHESIZER_PROMPT.format(status=status, log=_log_text(log), now=_now()))
    try:
        response = await ainvoke_with_retries(
            model,
            [SystemMessage(prompt), *chat_messages(state["messages"])],
            config,
            retries=context.model_retries,
            timeout=context.model_timeout,
            step=state.get("waves", 0) + 1,
        )
    except ModelCallError as exc:
        return _unsynthesized(log, str(exc))
    if not response.text.strip():
        return _unsynthesized(log, "the model answered with no text")
    return {"messages": [response], "final_answer": response.text, "status": status}


def _unsynthesized(log: list[dict], error: str) -> dict:
    """End the turn with the steps' results when the model could not write the answer (a failed
    call was reported as `model_error`)."""
    answer = _fallback_answer(log, error)
    return {"messages": [AIMessage(answer)], "final_answer": answer, "status": "partial"}


# Nodes take (state, runtime, config), which LangGraph runs but add_node's overloads do not type
# (langgraph 1.2 has no runtime + config protocol): hence the `type: ignore`s on add_node below
# (mypy reports the first such call as call-overload, later ones as arg-type).
builder = StateGraph(State, input_schema=InputState, context_schema=PlanExecuteContext)
builder.add_node("planner", planner)  # type: ignore[call-overload, arg-type]
builder.add_node("approve", approve)
builder.add_node("run_step", run_step)  # type: ignore[call-overload, arg-type]
builder.add_node("replanner", replanner)  # type: ignore[call-overload, arg-type]
builder.add_node("synthesizer", synthesizer)  # type: ignore[call-overload, arg-type]
builder.add_node("finish_turn", finish_turn)  # type: ignore[call-overload, arg-type]
builder.add_conditional_edges(START, start, ["approve", "planner"])
builder.add_conditional_edges("planner", route_after_planner, ["approve", "run_step", "synthesizer", END])
builder.add_conditional_edges("approve", after_approve, ["planner", "run_step", "synthesizer", END])
builder.add_edge("run_step", "replanner")
builder.add_conditional_edges("replanner", dispatch, ["run_step", "synthesizer"])
builder.add_edge("synthesizer", "finish_turn")
builder.add_edge("finish_turn", END)

graph = explain_failures(builder).compile(name="plan_execute")
