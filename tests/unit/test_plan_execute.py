"""The plan_execute graph driven by a scripted model that emits real (structured-output) tool calls."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import tools.registry as registry
from graphs.plan_execute.context import PlanExecuteContext, plan_context_fields
from graphs.plan_execute.graph import builder
from graphs.plan_execute.plan import PlanError, PlanStep, parse_steps, resolve_references, validate_steps
from graphs.runtime.ui import is_progress
from tests.fakes import ScriptedChatModel
from tools.errors import TransientToolError

ROOT = Path(__file__).resolve().parents[2]

spans: dict[str, tuple[float, float]] = {}
attempts: dict[str, int] = {}
arrived: list[str] = []
met = asyncio.Event()


@tool
async def meet(name: str) -> str:
    """Wait (bounded) until a second `meet` call is in flight, recording start and end times."""
    start = time.perf_counter()
    arrived.append(name)
    if len(arrived) >= 2:
        met.set()
    try:
        await asyncio.wait_for(met.wait(), 5)
        outcome = "met"
    except TimeoutError:
        outcome = "alone"
    spans[name] = (start, time.perf_counter())
    return f"{name}:{outcome}"


@tool
async def record(name: str) -> str:
    """Record start and end times of the call."""
    start = time.perf_counter()
    await asyncio.sleep(0)
    spans[name] = (start, time.perf_counter())
    return f"recorded {name}"


@tool
async def hang(seconds: float) -> str:
    """Sleeps `seconds`."""
    await asyncio.sleep(seconds)
    return "woke up"


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


@tool
async def flaky(key: str, fail_times: int) -> str:
    """Fails transiently `fail_times` times, then succeeds."""
    attempts[key] = attempts.get(key, 0) + 1
    if attempts[key] <= fail_times:
        raise TransientToolError("upstream answered 503")
    return f"ok after {attempts[key]} attempts"


@tool
def clock(zone: str) -> dict:
    """The time in a zone, as a JSON object (like current_time)."""
    return {"timezone": zone, "time": "2025-07-01T20:15:03+02:00", "weekday": "Tuesday", "dst": True}


@pytest.fixture(autouse=True)
def test_tools(monkeypatch):
    """The registry serves the calculator plus the test tools above; retries back off fast."""
    monkeypatch.setenv("AGENT_RETRY_BASE_DELAY", "0.01")
    for state in (spans, attempts):
        state.clear()
    arrived.clear()
    met.clear()
    extra = {t.name: t for t in (meet, record, explode, flaky, hang, clock)}

    async def available_tools():
        return {"calculator": registry.builtin_tools()["calculator"], **extra}, []

    monkeypatch.setattr(registry, "available_tools", available_tools)


def plan(*steps: dict) -> dict:
    """A scripted planner answer: a `Plan` function call."""
    return {"tool_calls": [{"name": "Plan", "args": {"steps": list(steps)}}]}


def replan(action: str, reason: str = "because", steps: list | None = None) -> dict:
    """A scripted replanner answer: a `Replan` function call."""
    args = {"action": action, "reason": reason}
    if steps is not None:
        args["steps"] = steps
    return {"tool_calls": [{"name": "Replan", "args": args}]}


def step(id: str, description: str = "", tool: str | None = None, args=None, depends_on=()) -> dict:
    return {
        "id": id,
        "description": description or f"do {id}",
        "tool": tool,
        "args": args or {},
        "depends_on": list(depends_on),
    }


class Run:
    """One graph (in-memory checkpointer) on one thread, streaming custom events and tokens."""

    def __init__(self, model_slot, responses, **context) -> None:
        self.model = ScriptedChatModel(responses=responses)
        model_slot["model"] = self.model
        self.graph = builder.compile(checkpointer=InMemorySaver())
        self.context = PlanExecuteContext(model="scripted:test", remember=False, **context)
        self.config = {"configurable": {"thread_id": "t1"}}
        self.events: list[dict] = []
        self.tokens: list[tuple] = []

    async def send(self, value) -> dict:
        """Run with `value` (input or Command); return the thread's state values."""
        async for mode, chunk in self.graph.astream(
            value, self.config, context=self.context, stream_mode=["custom", "messages"]
        ):
            (self.events if mode == "custom" else self.tokens).append(chunk)
        return (await self.graph.aget_state(self.config)).values

    async def ask(self, text: str = "do the task") -> dict:
        return await self.send({"messages": [HumanMessage(text)]})

    def kinds(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["event"] == kind]

    def log(self, state) -> dict[str, dict]:
        return {entry["step_id"]: entry for entry in state["execution_log"]}


async def test_independent_steps_run_concurrently_and_a_dependent_step_sees_their_results(model_slot):
    run = Run(
        model_slot,
        [
            plan(
                step("a", "meet as a", "meet", {"name": "a"}),
                step("b", "meet as b", "meet", {"name": "b"}),
                step("c", "combine a and b", depends_on=["a", "b"]),
            ),
            replan("continue", "all good"),
            "c combined a:met and b:met",  # the react agent doing step c
            "Final: both met and were combined.",
        ],
    )
    state = await run.ask("coordinate a and b")
    (a_start, a_end), (b_start, b_end) = spans["a"], spans["b"]
    assert a_start < b_end and b_start < a_end, "the two independent tool steps overlapped in time"
    log = run.log(state)
    assert log["a"]["result"] == "a:met" and log["b"]["result"] == "b:met"
    assert [log[i]["wave"] for i in "abc"] == [1, 1, 2]
    assert all(log[i]["status"] == "completed" for i in "abc")
    # Step c went to the react agent with the results of a and b in its prompt.
    react_call = run.model.calls[2]
    prompt = react_call.messages[-1].text
    assert "combine a and b" in prompt and "a:met" in prompt and "b:met" in prompt
    assert log["c"]["result"] == "c combined a:met and b:met"
    # The planner got the tools as a `Plan` function (structured output through tool calling).
    assert run.model.calls[0].tool_names == ["Plan"] and run.model.calls[1].tool_names == ["Replan"]
    assert "meet" in run.model.calls[0].messages[0].text
    # The answer is the last AI message, streamed as tokens; planning tokens never reach the stream.
    # The progress message, with the steps' cards, stays above the answer: nothing moves at the end.
    assert [(m.type, is_progress(m)) for m in state["messages"]] == [("human", False), ("ai", True), ("ai", False)]
    assert state["messages"][-1].content == state["final_answer"] == "Final: both met and were combined."
    assert state["status"] == "completed"
    # The planner's only message is the empty progress message (the steps' cards show under it).
    assert [(c.content, is_progress(c)) for c, meta in run.tokens if meta["langgraph_node"] == "planner"] == [
        ("", True)
    ]
    nodes = {meta["langgraph_node"] for c, meta in run.tokens if not is_progress(c)}
    assert "planner" not in nodes and "replanner" not in nodes
    answer = [c.content for c, meta in run.tokens if meta["langgraph_node"] == "synthesizer" and c.content]
    assert len(answer) > 2 and "".join(answer) == state["final_answer"]
    synth_prompt = run.model.calls[3].messages[0].text
    assert "a:met" in synth_prompt and "c combined" in synth_prompt
    kinds = [e["event"] for e in run.events if e["event"].startswith(("plan", "replan", "synthesis"))]
    assert kinds[0] == "plan_created" and kinds[-1] == "synthesis_started"
    assert {e["step_id"] for e in run.kinds("plan_step_started")} == {"a", "b", "c"}
    assert len(run.kinds("tool_call_started")) == 2


async def test_transient_tool_failure_is_recovered_by_retry(model_slot):
    run = Run(
        model_slot,
        [
            plan(step("f", "fetch", "flaky", {"key": "k", "fail_times": 1})),
            "fetched fine",
        ],
        tool_retries=2,
    )
    state = await run.ask()
    entry = run.log(state)["f"]
    assert (entry["status"], entry["recovery"], entry["attempts"]) == ("completed", "retry", 2)
    assert entry["result"] == "ok after 2 attempts"
    assert [e["recovery"] for e in run.kinds("plan_step_recovered")] == ["retry"]
    assert len(run.kinds("tool_call_retrying")) == 1
    assert state["status"] == "completed"


async def test_failing_tool_is_recovered_by_the_model_without_the_tool(model_slot):
    run = Run(
        model_slot,
        [
            plan(step("x", "compute the answer", "explode", {"reason": "disk full"})),
            "The answer is probably 42 (estimated without the tool).",
            "Answer: about 42; step x was estimated by the model because its tool failed.",
        ],
    )
    state = await run.ask()
    entry = run.log(state)["x"]
    assert (entry["status"], entry["recovery"]) == ("recovered", "model")
    assert "boom: disk full" in entry["tool_error"] and "42" in entry["result"]
    fallback = run.model.calls[1]
    assert fallback.tools == [] and "boom: disk full" in fallback.messages[-1].text
    recovered = run.kinds("plan_step_recovered")
    assert recovered[0]["step_id"] == "x" and recovered[0]["recovery"] == "model"
    assert "recovered by model" in run.model.calls[2].messages[0].text
    assert state["status"] == "completed"


async def test_unrecoverable_step_forces_a_replan_and_nothing_is_dropped_silently(model_slot):
    run = Run(
        model_slot,
        [
            plan(step("x", "get data", "explode", {"reason": "gone"}), step("y", "use data", depends_on=["x"])),
            "CANNOT_COMPLETE: no way to know without the tool",
            replan(
                "revise",
                "x failed; compute instead",
                [step("z", "compute instead", "calculator", {"expression": "6*7"})],
            ),
            "The answer is 42 (computed after the first source failed).",
        ],
    )
    state = await run.ask()
    log = run.log(state)
    assert log["x"]["status"] == "failed" and log["x"]["recovery"] == "replan"
    assert log["y"]["status"] == "dropped" and "replan 1" in log["y"]["error"]
    assert log["z"]["status"] == "completed" and "42" in log["z"]["result"]
    assert [s["id"] for s in state["plan"]] == ["x", "z"]
    assert run.kinds("replan")[0]["action"] == "revise" and run.kinds("replan")[0]["failed_steps"] == ["x"]
    assert run.kinds("plan_step_failed")[0]["step_id"] == "x"
    assert state["replans"] == 1 and state["status"] == "completed"
    # The replanner saw the failure.
    assert "CANNOT_COMPLETE" in run.model.calls[2].messages[0].text


async def test_without_replans_a_failure_skips_its_dependents_and_the_answer_is_partial(model_slot):
    run = Run(
        model_slot,
        [
            plan(
                step("x", "get data", "explode", {"reason": "gone"}),
                step("y", "use data", depends_on=["x"]),
                step("w", "other", "calculator", {"expression": "1+1"}),
            ),
            "CANNOT_COMPLETE: no",
            "Partial answer: 2; step x failed and y was skipped.",
        ],
        max_replans=0,
    )
    state = await run.ask()
    log = run.log(state)
    assert [log[i]["status"] for i in "xyw"] == ["failed", "skipped", "completed"]
    assert run.kinds("replan") == []
    assert state["status"] == "partial"
    assert run.kinds("synthesis_started")[0]["failed_steps"] == ["x", "y"]
    synth = run.model.calls[-1].messages[0].text
    assert "Outcome: partial" in synth and "x [failed" in synth and "y [skipped" in synth


async def test_malformed_and_cyclic_plans_are_sent_back_then_a_valid_one_runs(model_slot):
    run = Run(
        model_slot,
        [
            "I think we should first...",  # no function call
            plan(step("a", depends_on=["b"]), step("b", depends_on=["a"])),
            plan(step("a", "add", "calculator", {"expression": "2+2"})),
            "4",
        ],
    )
    state = await run.ask()
    invalid = run.kinds("plan_invalid")
    assert [e["attempt"] for e in invalid] == [1, 2] and "no `Plan` function call" in invalid[0]["error"]
    assert "cycle: a -> b -> a" in invalid[1]["error"]
    assert run.kinds("plan_created")[0]["attempts"] == 3
    # A text answer is followed by the error as a user message.
    assert isinstance(run.model.calls[1].messages[-1], HumanMessage)
    assert "no `Plan` function call" in run.model.calls[1].messages[-1].text
    assert state["status"] == "completed" and "4" in run.log(state)["a"]["result"]


async def test_planner_that_never_makes_a_valid_plan_ends_with_a_clear_message(model_slot):
    run = Run(
        model_slot,
        [
            {"tool_calls": [{"name": "Plan", "args": {"steps": "not a list"}}]},
            plan(step("a", "x", "no_such_tool")),
            plan(step("a", depends_on=["ghost"])),
        ],
    )
    state = await run.ask()
    assert state["status"] == "failed" and state["execution_log"] == []
    assert "do not match the schema" in run.kinds("plan_invalid")[0]["error"]
    assert "unknown tool 'no_such_tool'" in run.kinds("plan_invalid")[1]["error"]
    failed = run.kinds("plan_failed")
    assert failed and "unknown step 'ghost'" in failed[0]["error"]
    assert (
        isinstance(state["messages"][-1], AIMessage) and "could not make a valid plan" in state["messages"][-1].content
    )
    # Each re-ask answered the function call with the error (valid tool-call history).
    retry = run.model.calls[1].messages
    assert isinstance(retry[-1], ToolMessage) and "schema" in retry[-1].content
    assert run.model.remaining == 0 and run.kinds("plan_step_started") == []


async def test_limits_plan_length_and_parallelism(model_slot):
    run = Run(
        model_slot,
        [
            plan(*(step(f"s{i}", tool="record", args={"name": f"s{i}"}) for i in range(3))),  # too long
            plan(step("a", tool="record", args={"name": "a"}), step("b", tool="record", args={"name": "b"})),
            replan("continue"),
            "done",
        ],
        max_plan_steps=2,
        max_parallel_steps=1,
    )
    state = await run.ask()
    assert "at most 2 are allowed" in run.kinds("plan_invalid")[0]["error"]
    log = run.log(state)
    assert (log["a"]["wave"], log["b"]["wave"]) == (1, 2)
    (_a_start, a_end), (b_start, _b_end) = spans["a"], spans["b"]
    assert a_end <= b_start, "with max_parallel_steps=1 the steps did not overlap"
    assert state["waves"] == 2 and state["status"] == "completed"


async def test_a_step_over_step_timeout_fails_into_recovery(model_slot):
    run = Run(
        model_slot,
        [
            plan(step("h", "wait", "hang", {"seconds": 30})),
            "CANNOT_COMPLETE: the tool is needed",
            replan("finish", "nothing else to try"),
            "Sorry: step h timed out.",
        ],
        step_timeout=0.2,
        tool_timeout=60,
    )
    state = await run.ask()
    entry = run.log(state)["h"]
    assert entry["status"] == "failed" and "step timed out after 0.2 s" in entry["error"]
    assert "step timed out after 0.2 s" in run.model.calls[1].messages[-1].text  # the fallback was told
    assert state["status"] == "partial" and run.kinds("replan")[0]["action"] == "finish"


async def test_replanner_may_finish_early_and_the_remaining_steps_are_logged_as_dropped(model_slot):
    run = Run(
        model_slot,
        [
            plan(
                step("a", tool="calculator", args={"expression": "2*3"}),
                step("b", tool="calculator", args={"expression": "1"}, depends_on=["a"]),
            ),
            replan("finish", "a already answers it"),
            "6",
        ],
    )
    state = await run.ask()
    log = run.log(state)
    assert log["b"]["status"] == "dropped" and "a already answers it" in log["b"]["error"]
    assert state["status"] == "completed"


async def test_approval_interrupt_then_edited_plan_runs(model_slot):
    run = Run(
        model_slot,
        [
            plan(step("a", "add", "calculator", {"expression": "2+2"})),
            "edited plan ran: 9",
        ],
        approve_plan=True,
    )
    state = await run.ask()
    snapshot = await run.graph.aget_state(run.config)
    payload = snapshot.tasks[0].interrupts[0].value
    assert payload["plan"][0]["id"] == "a" and payload["error"] is None
    assert "final_answer" not in state or not state["final_answer"]
    # A bad edit is refused and asked again; the edited plan then runs instead of the planned one.
    await run.send(Command(resume={"action": "edit", "plan": [step("e", tool="nope")]}))
    payload = (await run.graph.aget_state(run.config)).tasks[0].interrupts[0].value
    assert "unknown tool 'nope'" in payload["error"]
    state = await run.send(
        Command(resume={"action": "edit", "plan": [step("e", "multiply", "calculator", {"expression": "3*3"})]})
    )
    assert list(run.log(state)) == ["e"] and "9" in run.log(state)["e"]["result"]
    assert [e["action"] for e in run.kinds("plan_reviewed")] == ["edit"]
    assert state["plan"][0]["id"] == "e" and state["status"] == "completed"


async def test_rejected_plan_runs_nothing(model_slot):
    run = Run(model_slot, [plan(step("a", "add", "calculator", {"expression": "2+2"}))], approve_plan=True)
    await run.ask()
    state = await run.send(Command(resume={"action": "reject"}))
    assert state["status"] == "rejected" and state["execution_log"] == []
    assert state["messages"][-1].content == "The plan was rejected, so nothing was run."
    assert run.model.remaining == 0


async def test_approval_is_a_standard_hitl_request_answered_with_decisions(model_slot):
    run = Run(model_slot, [plan(step("a", "add", "calculator", {"expression": "2+2"})), "ran: 9"], approve_plan=True)
    await run.ask()
    payload = (await run.graph.aget_state(run.config)).tasks[0].interrupts[0].value
    [request] = payload["action_requests"]
    assert request["name"] == "Review the plan"
    assert request["args"] == {"steps": '1. [a] add\n   tool: calculator {"expression": "2+2"}'}
    assert payload["plan"][0]["id"] == "a" and "1 step;" in request["description"]
    assert payload["review_configs"] == [
        {"action_name": "Review the plan", "allowed_decisions": ["approve", "edit", "reject", "respond"]}
    ]
    # agent-chat-ui sends edited fields back as text: a JSON string is parsed; bad JSON is refused
    # and the same request is asked again, with the error.
    edit = {"type": "edit", "edited_action": {"name": "run_plan", "args": {"steps": "[{'id': 1"}}}
    await run.send(Command(resume={"decisions": [edit]}))
    payload = (await run.graph.aget_state(run.config)).tasks[0].interrupts[0].value
    assert "'steps' is not valid JSON" in payload["error"] and payload["action_requests"]
    edited = json.dumps([step("e", "multiply", "calculator", {"expression": "3*3"})])
    edit["edited_action"]["args"]["steps"] = edited
    state = await run.send(Command(resume={"decisions": [edit]}))
    assert list(run.log(state)) == ["e"] and state["status"] == "completed"
    assert [e["action"] for e in run.kinds("plan_reviewed")] == ["edit"]


async def test_a_rejection_with_a_message_and_a_respond_decision_that_replans(model_slot):
    run = Run(model_slot, [plan(step("a", "add", "calculator", {"expression": "2+2"}))], approve_plan=True)
    await run.ask()
    state = await run.send(Command(resume={"decisions": [{"type": "reject", "message": "too slow"}]}))
    assert state["status"] == "rejected" and "too slow" in state["final_answer"] and state["execution_log"] == []

    run = Run(
        model_slot,
        [
            plan(step("a", "add", "calculator", {"expression": "2+2"})),
            plan(step("b", "multiply", "calculator", {"expression": "2*2"})),
            "4",
        ],
        approve_plan=True,
    )
    await run.ask("compute something")
    await run.send(Command(resume={"decisions": [{"type": "respond", "message": "multiply instead"}]}))
    payload = (await run.graph.aget_state(run.config)).tasks[0].interrupts[0].value
    assert payload["plan"][0]["id"] == "b" and payload["task"].startswith("compute something")
    assert "multiply instead" in payload["task"]  # the change request goes with the task
    assert [m.text for m in run.model.calls[1].messages[1:]] == ["compute something", "multiply instead"]
    state = await run.send(Command(resume={"decisions": [{"type": "approve"}]}))
    assert list(run.log(state)) == ["b"] and state["status"] == "completed"


async def test_a_chat_message_sent_while_the_plan_waits_answers_the_approval(model_slot):
    # "approve" typed into the chat approves the waiting plan: no new plan is made from the word.
    run = Run(model_slot, [plan(step("a", "add", "calculator", {"expression": "2+2"})), "4"], approve_plan=True)
    await run.ask("add 2 and 2")
    state = await run.ask("approve")
    assert list(run.log(state)) == ["a"] and state["status"] == "completed" and run.model.remaining == 0
    assert len(run.model.calls) == 2  # the planner once, then the answer
    assert run.kinds("plan_reviewed")[0]["action"] == "approve"
    reply = [m for m in state["messages"] if m.text == "approve"][0]
    assert reply.additional_kwargs["plan_review"] == "approve"
    # "no" rejects it.
    run = Run(model_slot, [plan(step("a", "add", "calculator", {"expression": "2+2"}))], approve_plan=True)
    await run.ask("add 2 and 2")
    state = await run.ask("No, cancel it")
    assert state["status"] == "rejected" and run.model.remaining == 0
    # Anything else asks for changes: a new plan from the conversation, waiting for approval again.
    run = Run(
        model_slot,
        [
            plan(step("a", "add", "calculator", {"expression": "2+2"})),
            plan(step("b", "m", "calculator", {"expression": "3*3"})),
        ],
        approve_plan=True,
    )
    await run.ask("add 2 and 2")
    await run.ask("use 3*3 instead")
    snapshot = await run.graph.aget_state(run.config)
    assert snapshot.next == ("approve",) and snapshot.tasks[0].interrupts[0].value["plan"][0]["id"] == "b"
    assert "use 3*3 instead" in snapshot.tasks[0].interrupts[0].value["task"]


async def test_a_second_turn_starts_a_fresh_plan_and_sees_the_conversation(model_slot):
    run = Run(
        model_slot,
        [
            plan(step("a", tool="calculator", args={"expression": "2+2"})),
            "4",
            plan(step("b", tool="calculator", args={"expression": "3+3"})),
            "6",
        ],
    )
    await run.ask("first")
    state = await run.ask("second")
    assert list(run.log(state)) == ["b"] and state["final_answer"] == "6"
    planner_input = run.model.calls[2].messages
    assert isinstance(planner_input[0], SystemMessage) and [m.text for m in planner_input[1:]] == [
        "first",
        "4",
        "second",
    ]


def test_validation_names_every_problem():
    steps = [
        PlanStep(id="a", description="x", tool="ghost", depends_on=["a"]),
        PlanStep(id="b", description="y", depends_on=["c"]),
        PlanStep(id="b", description="z"),
    ]
    with pytest.raises(PlanError, match="the plan has 3 steps; at most 2 are allowed"):
        validate_steps(steps, {"calculator"}, 2)  # refused on its length before anything else
    with pytest.raises(PlanError) as info:
        validate_steps(steps, {"calculator"}, 3)
    message = str(info.value)
    for part in (
        "'b' is used more than once",
        "unknown tool 'ghost'",
        "depends on itself",
        "unknown step 'c'",
    ):
        assert part in message
    # A revision may depend on finished steps that succeeded, never reuse their ids or use failed ones.
    done = {"a": "completed", "f": "failed"}
    assert validate_steps([PlanStep(id=3, description="d", depends_on=["a"])], set(), 5, done)[0]["id"] == "3"
    with pytest.raises(PlanError, match="which failed"):
        validate_steps([PlanStep(id="n", description="d", depends_on=["f"])], set(), 5, done)
    with pytest.raises(PlanError, match="used more than once"):
        validate_steps([PlanStep(id="a", description="d")], set(), 5, done)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_parallel_steps": 0},
        {"max_plan_steps": 0},
        {"max_replans": -1},
        {"step_timeout": 0},
        {"approve_plan": "maybe"},
    ],
)
def test_invalid_limits_are_refused(bad):
    """Out-of-range limits fail when the run starts, naming the field."""
    with pytest.raises(ValueError, match=f"`{next(iter(bad))}`"):
        PlanExecuteContext(**bad)


def test_plan_fields_are_described_and_documented():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    names = [name for name, _ in plan_context_fields()]
    assert names == ["approve_plan", "max_plan_steps", "max_parallel_steps", "max_replans", "step_timeout"]
    for name, description in plan_context_fields():
        assert description and f"| `{name}` |" in doc, name


async def test_the_answered_turn_is_recorded_in_the_users_chat_history(model_slot, store, monkeypatch):
    from graphs.runtime.memory_schedule import wait_for_local_extractions
    from store import memory

    monkeypatch.setenv("MEMORY_EXTRACTION_DELAY", "600")
    nothing = {"tool_calls": [{"name": "MemoryExtraction", "args": {"episodic": [], "semantic": []}}]}
    model_slot["model"] = model = ScriptedChatModel(
        responses=[
            plan(step("a", "add", "calculator", {"expression": "2+2"})),
            "Two plus two is 4.",
            nothing,
        ]
    )
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    context = PlanExecuteContext(model="scripted:test", user_id="carol")
    await graph.ainvoke(
        {"messages": [HumanMessage("what is 2+2?")]}, {"configurable": {"thread_id": "rec"}}, context=context
    )
    await wait_for_local_extractions(now=True)
    chat = await store.asearch(memory.namespace("carol", "chat"), limit=10)
    assert sorted(item.value["text"] for item in chat) == ["Two plus two is 4.", "what is 2+2?"]
    assert model.remaining == 0  # the extraction ran on the recorded turn


async def test_a_step_uses_an_earlier_result_through_a_reference(model_slot):
    run = Run(
        model_slot,
        [
            plan(
                step("s1", "the share", "calculator", {"expression": "17% of 2340"}),
                # the reference alone makes s1 a dependency, even with depends_on left empty
                step("s2", "add 12", "calculator", {"expression": "{s1} + 12"}),
            ),
            replan("continue"),
            "17% of 2340 is 397.8; plus 12 that is 409.8.",
        ],
    )
    state = await run.ask("What is 17% of 2340, plus 12?")
    log = run.log(state)
    assert [s["depends_on"] for s in state["plan"]] == [[], ["s1"]]
    assert (log["s1"]["wave"], log["s2"]["wave"]) == (1, 2)
    assert log["s2"]["args"] == {"expression": "397.8 + 12"}
    assert log["s2"]["status"] == "completed" and log["s2"]["result"] == "409.8"
    assert state["status"] == "completed"


async def test_a_bare_or_unknown_step_reference_is_sent_back_to_the_planner(model_slot):
    run = Run(
        model_slot,
        [
            plan(
                step("s1", "a number", "calculator", {"expression": "6*7"}),
                step("s2", "add 12", "calculator", {"expression": "s1 + 12"}),
            ),
            plan(
                step("s1", "a number", "calculator", {"expression": "6*7"}),
                step("s2", "add 12", "calculator", {"expression": "{s3} + 12"}),
            ),
            plan(
                step("s1", "a number", "calculator", {"expression": "6*7"}),
                step("s2", "add 12", "calculator", {"expression": "{s1} + 12"}, depends_on=["s1"]),
            ),
            replan("continue"),
            "54",
        ],
    )
    state = await run.ask()
    errors = [e["error"] for e in run.kinds("plan_invalid")]
    assert len(errors) == 2
    assert "'s1' as plain text" in errors[0] and "{s1}" in errors[0]
    assert "there is no step 's3'" in errors[1]
    # the planner is re-asked with the error
    assert "write {s1}" in run.model.calls[1].messages[-1].text
    assert run.log(state)["s2"]["result"] == "54" and state["status"] == "completed"


def test_reference_validation_and_substitution():
    done = {"a1": "completed", "f1": "failed"}
    steps = validate_steps(
        [
            PlanStep(id="n1", description="wait {a1} seconds", tool="hang", args={"seconds": "{a1}"}),
            PlanStep(id="n2", description="d", tool="calculator", args={"expression": "{{n1}} * 2"}),
            PlanStep(id="n3", description="d", tool="calculator", args={"expression": "1 + 2", "note": "{the}"}),
            PlanStep(id="4", description="d", tool="calculator", args={"expression": "4 * 4"}),
        ],
        {"hang", "calculator"},
        5,
        done,
    )
    assert [s["depends_on"] for s in steps] == [["a1"], ["n1"], [], []]
    for bad, problem in [
        (PlanStep(id="n", description="d", args={"x": "{f1}"}), "which failed"),
        (PlanStep(id="n", description="use {n}"), "its own result"),
        (PlanStep(id="n", description="d", tool="calculator", args={"expression": "a1 * 2"}), "write {a1}"),
    ]:
        with pytest.raises(PlanError, match=problem):
            validate_steps([bad], {"calculator"}, 5, done)
    with pytest.raises(PlanError, match="cycle"):
        validate_steps([PlanStep(id="x1", description="{y1}"), PlanStep(id="y1", description="{x1}")], set(), 5)
    resolved = resolve_references(
        {"seconds": "{a1}", "text": "it was {a1} and {zz}", "nested": ["${a1}"], "n": 3},
        {"a1": "2.5"},
    )
    assert resolved == {"seconds": "2.5", "text": "it was 2.5 and {zz}", "nested": ["2.5"], "n": 3}
    assert resolve_references({"q": "{a1}"}, {"a1": "Paris, 21 °C"}) == {"q": "Paris, 21 °C"}


async def test_json_results_reach_the_answer_rendered_for_people(model_slot):
    run = Run(
        model_slot,
        [
            plan(step("t", "time in Berlin", "clock", {"zone": "Europe/Berlin"})),
            "It is 20:15 in Berlin.",
        ],
    )
    state = await run.ask("What time is it in Berlin?")
    assert '"timezone"' in run.log(state)["t"]["result"]  # the state keeps the tool's own result
    synth_prompt = run.model.calls[-1].messages[0].text
    assert "timezone: Europe/Berlin" in synth_prompt and "dst: yes" in synth_prompt
    assert '{"' not in synth_prompt


@pytest.mark.parametrize("failure", [ValueError("model server exploded"), ""])
async def test_without_a_written_answer_the_steps_results_are_the_answer(model_slot, failure):
    run = Run(
        model_slot,
        [
            plan(
                step("t", "time in Berlin", "clock", {"zone": "Europe/Berlin"}),
                step("c", "the sum", "calculator", {"expression": "2+2"}),
            ),
            failure,
        ],
        model_retries=0,
    )
    state = await run.ask("What time is it in Berlin, and 2+2?")
    answer = state["final_answer"]
    assert state["messages"][-1].content == answer and state["status"] == "partial"
    assert "could not write a full answer" in answer
    assert "- time in Berlin: timezone: Europe/Berlin" in answer and "- the sum: 4" in answer
    assert "{" not in answer
    assert bool(run.kinds("model_error")) == bool(failure)


async def test_a_reference_feeds_a_numeric_parameter(model_slot):
    run = Run(
        model_slot,
        [
            plan(
                step("z1", "no wait", "calculator", {"expression": "1 - 1"}),
                step("w1", "wait that long", "hang", {"seconds": "{z1}"}),
            ),
            replan("continue"),
            "Waited 0 seconds.",
        ],
    )
    state = await run.ask()
    entry = run.log(state)["w1"]
    assert entry["args"] == {"seconds": "0"} and entry["depends_on"] == ["z1"]
    assert (entry["status"], entry["result"]) == ("completed", "woke up")


async def test_progress_also_streams_as_generative_ui_messages(model_slot):
    run = Run(model_slot, [plan(step("a", "add", "calculator", {"expression": "2+2"})), "4"])
    await run.ask()
    ui = [e for e in run.events if e.get("type") == "ui"]
    assert all(e["event"] == "ui" and e["metadata"]["merge"] is True for e in ui)
    cards = {}
    for message in ui:  # what a client's UI-message reducer keeps: one card per id, props merged
        cards.setdefault(message["id"], {"name": message["name"]})["props"] = {
            **cards.get(message["id"], {}).get("props", {}),
            **message["props"],
        }
    by_name = {}
    for card in cards.values():
        by_name.setdefault(card["name"], []).append(card["props"])
    assert by_name["plan"][0]["steps"][0]["id"] == "a"
    [step_card] = by_name["plan_step"]
    assert step_card["step_id"] == "a" and step_card["status"] == "completed" and "4" in step_card["result_preview"]
    # The step's card shows the call it makes; the call has no second card of its own.
    assert step_card["tool"] == "calculator" and step_card["args"] == {"expression": "2+2"}
    assert "tool_progress" not in by_name
    # The thread keeps the cards (a chat client renders `values.ui`) under the progress message,
    # which stays above the answer: the answer does not jump above them when the run ends.
    state = (await run.graph.aget_state(run.config)).values
    progress, answer = state["messages"][-2:]
    assert is_progress(progress) and answer.content == "4"
    kept = {m["name"]: m for m in state["ui"]}
    assert kept["plan_step"]["props"]["status"] == "completed" and kept["plan"]["props"]["steps"][0]["id"] == "a"
    assert all(m["metadata"]["message_id"] == progress.id for m in state["ui"])


def test_a_plan_over_the_limit_is_refused_on_its_length_before_its_steps_are_read():
    """Thousands of steps (from a client's edit or the planner) cost one count, not a check per
    pair of steps: the malformed steps here are never read, the named references never matched."""
    with pytest.raises(PlanError, match="the plan has 5000 steps; at most 8 are allowed"):
        parse_steps([{"no": "id"}] * 5000, 8)
    steps = [PlanStep(id=f"s{n}", description=f"s{n - 1} + 1", tool="calculator") for n in range(5000)]
    with pytest.raises(PlanError, match="the plan has 5000 steps; at most 8 are allowed"):
        validate_steps(steps, {"calculator"}, 8)
    # Within the limit every step id written as plain text is still found, once.
    plain = [
        PlanStep(id="s1", description="a", tool="calculator", args={"expression": "6*7"}),
        PlanStep(id="step_2", description="b", tool="calculator", args={"expression": "s1 + s1", "x": ["step_2"]}),
    ]
    with pytest.raises(PlanError) as info:
        validate_steps(plain, {"calculator"}, 8)
    assert str(info.value).count("'s1' as plain text") == 1 and "'step_2' as plain" not in str(info.value)
