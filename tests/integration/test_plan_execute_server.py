"""The plan_execute graph served by a real `langgraph dev`, driven through langgraph-sdk."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.conftest import key, user, wait_status

pytestmark = pytest.mark.integration


def plan(*steps: dict) -> dict:
    """A scripted planner answer: a `Plan` function call."""
    return {"content": "", "tool_calls": [{"name": "Plan", "args": {"steps": list(steps)}}]}


async def test_streams_step_events_step_tokens_and_the_answer(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    openai_server.script(
        k,
        [
            plan(
                {"id": "a", "description": "6*7", "tool": "calculator", "args": {"expression": "6*7"}},
                {"id": "b", "description": "2**10", "tool": "calculator", "args": {"expression": "2**10"}},
                {"id": "c", "description": "add the two results", "depends_on": ["a", "b"]},
            ),
            {"content": "", "tool_calls": [{"name": "Replan", "args": {"action": "continue", "reason": "on track"}}]},
            {"content": "42 plus 1024 makes 1066", "delay_per_token": 0.01},
            {"content": "The sum of 6*7 and 2**10 is 1066.", "delay_per_token": 0.01},
        ],
    )
    thread = await client.threads.create()
    events: dict[str, list] = {}
    async for part in client.runs.stream(
        thread["thread_id"],
        "plan_execute",
        input=user(f"{k} add 6*7 and 2**10"),
        stream_mode=["messages-tuple", "custom", "updates"],
        stream_subgraphs=True,
    ):
        events.setdefault(part.event.split("|")[0], []).append((part.event, part.data))
    assert "error" not in events, events.get("error")
    custom = [data for _, data in events["custom"]]
    kinds = [e["event"] for e in custom]
    assert kinds.index("plan_created") < kinds.index("plan_step_started") < kinds.index("synthesis_started")
    completed = {e["step_id"]: e for e in custom if e["event"] == "plan_step_completed"}
    assert set(completed) == {"a", "b", "c"} and "42" in completed["a"]["result_preview"]
    assert "1024" in completed["b"]["result_preview"]
    # The react step's tokens arrive from its subgraph; the answer's from the synthesizer.
    messages = events["messages"]
    step_tokens = [d[0]["content"] for event, d in messages if "|run_step:" in event and d[0].get("content")]
    assert "".join(step_tokens) == "42 plus 1024 makes 1066"
    answer = [
        d[0]["content"]
        for event, d in messages
        if event == "messages" and d[1].get("langgraph_node") == "synthesizer" and d[0].get("content")
    ]
    assert len(answer) > 3 and "".join(answer) == "The sum of 6*7 and 2**10 is 1066."
    # The planner's only message is the empty progress message (the step cards show under it).
    planned = [d[0] for event, d in messages if d[1].get("langgraph_node") in ("planner", "replanner")]
    assert [(m["content"], m["id"].startswith("progress-")) for m in planned] == [("", True)]
    state = (await client.threads.get_state(thread["thread_id"]))["values"]
    assert [m["type"] for m in state["messages"]] == ["human", "ai", "ai"] and progress_ids(state)
    assert state["status"] == "completed" and state["final_answer"].endswith("1066.")
    assert [e["step_id"] for e in state["execution_log"]] == ["a", "b", "c"]
    # Structured output asked an OpenAI-compatible server for JSON-schema output (the scripted
    # server answers with a function call, which is read too).
    planner_request = next(r for r in openai_server.requests() if k in str(r.get("messages")))
    assert planner_request["response_format"]["json_schema"]["name"] == "Plan"
    assert planner_request["tools"] == []


async def test_plan_approval_interrupt_and_resume_with_an_edited_plan(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    openai_server.script(
        k,
        [
            plan({"id": "a", "description": "6*7", "tool": "calculator", "args": {"expression": "6*7"}}),
            "It is 81.",
        ],
    )
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "plan_execute", input=user(f"{k} compute"), context={"approve_plan": True})
    state = await client.threads.get_state(tid)
    interrupt = state["tasks"][0]["interrupts"][0]["value"]
    assert interrupt["plan"][0]["args"] == {"expression": "6*7"} and state["next"] == ["approve"]
    edited = [{"id": "e", "description": "9*9", "tool": "calculator", "args": {"expression": "9*9"}}]
    final = await client.runs.wait(
        tid, "plan_execute", command={"resume": {"action": "edit", "plan": edited}}, context={"approve_plan": True}
    )
    assert final["status"] == "completed" and final["messages"][-1]["content"] == "It is 81."
    assert [e["step_id"] for e in final["execution_log"]] == ["e"] and "81" in final["execution_log"][0]["result"]
    # One plan card: the reviewed plan replaced the one shown before the pause; all under the
    # progress message, above the answer.
    assert [m["props"]["status"] for m in final["ui"] if m["name"] == "plan"] == ["edit"]
    assert (
        {m["metadata"]["message_id"] for m in final["ui"]} == set(progress_ids(final)) == {final["messages"][-2]["id"]}
    )


async def test_cancelled_mid_execution_leaves_the_thread_usable(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    openai_server.script(
        k,
        [
            plan({"id": "slow", "description": "think at length"}),
            {"content": "a very slow thought " * 40, "delay_per_token": 0.2},
            plan(),
            "recovered fine",
        ],
    )
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "plan_execute", input=user(f"{k} first"))
    assert await wait_status(client, tid, run["run_id"], {"running"}) == "running"
    deadline = asyncio.get_running_loop().time() + 30
    while not any(
        k in str(r.get("messages")) and "think at length" in str(r.get("messages")) for r in openai_server.requests()
    ):
        assert asyncio.get_running_loop().time() < deadline, "the slow step never started"
        await asyncio.sleep(0.1)
    await client.runs.cancel(tid, run["run_id"], wait=True, action="interrupt")
    assert await wait_status(client, tid, run["run_id"], {"interrupted"}) == "interrupted"
    final = await client.runs.wait(tid, "plan_execute", input=user("second"))
    assert final["messages"][-1]["content"] == "recovered fine"
    assert final["status"] == "completed" and final["execution_log"] == [] and final["plan"] == []
    texts = " ".join(m["content"] for m in final["messages"] if isinstance(m["content"], str))
    assert "a very slow thought" not in texts


async def test_plan_approval_in_the_standard_hitl_shape_answered_with_decisions_or_a_chat_message(
    dev_server, openai_server
):
    """What agent-chat-ui does: it renders the request as Approve / Edit / Reject, sends every edited
    field back as text, and a message typed into the chat while the plan waits is a new run's input."""
    client = dev_server.client("alice")
    k = key()
    six = {"id": "a", "description": "6*7", "tool": "calculator", "args": {"expression": "6*7"}}
    openai_server.script(k, [plan(six), "It is 81.", plan(six), "It is 42."])
    context = {"approve_plan": True}
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "plan_execute", input=user(f"{k} compute"), context=context)
    state = await client.threads.get_state(tid)
    value = state["tasks"][0]["interrupts"][0]["value"]
    assert value["action_requests"][0]["name"] == "Review the plan" and value["plan"][0]["id"] == "a"
    assert value["action_requests"][0]["args"]["steps"] == '1. [a] 6*7\n   tool: calculator {"expression": "6*7"}'
    assert value["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    # A bad edit is refused with a clear error; the request stays answerable.
    bad = {"type": "edit", "edited_action": {"name": "run_plan", "args": {"steps": '[{"id": "e", "tool": "nope"}]'}}}
    await client.runs.wait(tid, "plan_execute", command={"resume": {"decisions": [bad]}}, context=context)
    value = (await client.threads.get_state(tid))["tasks"][0]["interrupts"][0]["value"]
    assert "nope" in value["error"] and value["action_requests"]
    edited = '[{"id": "e", "description": "9*9", "tool": "calculator", "args": {"expression": "9*9"}}]'
    edit = {"type": "edit", "edited_action": {"name": "run_plan", "args": {"steps": edited}}}
    final = await client.runs.wait(tid, "plan_execute", command={"resume": {"decisions": [edit]}}, context=context)
    assert final["status"] == "completed" and final["messages"][-1]["content"] == "It is 81."
    assert [e["step_id"] for e in final["execution_log"]] == ["e"]

    # "approve" typed as a chat message approves the waiting plan (no plan is made from the word).
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "plan_execute", input=user(f"{k} compute again"), context=context)
    final = await client.runs.wait(tid, "plan_execute", input=user("approve"), context=context)
    assert final["status"] == "completed" and final["messages"][-1]["content"] == "It is 42."
    assert [e["step_id"] for e in final["execution_log"]] == ["a"] and "42" in final["execution_log"][0]["result"]
    assert final["messages"][1]["additional_kwargs"]["plan_review"] == "approve"


CLIENT_STREAM = ["values", "messages-tuple", "custom"]
"""What agent-chat-ui streams a run with."""


def progress_ids(values: dict) -> list[str]:
    return [m["id"] for m in values.get("messages", []) if m["type"] == "ai" and m["id"].startswith("progress-")]


async def test_step_cards_show_under_a_progress_message_while_the_run_goes_on(dev_server, openai_server):
    """agent-chat-ui shows a card only under the AI message its `metadata.message_id` names: the
    cards of a running plan name the run's progress message, which is in the thread's messages
    while the steps run; at the end they name the answer and the progress message is gone."""
    client = dev_server.client("alice")
    k = key()
    openai_server.script(
        k,
        [
            plan(
                {"id": "a", "description": "6*7", "tool": "calculator", "args": {"expression": "6*7"}},
                {"id": "b", "description": "think it over", "depends_on": ["a"]},
            ),
            {"content": "", "tool_calls": [{"name": "Replan", "args": {"action": "continue", "reason": "on track"}}]},
            {"content": "b thought it over", "delay": 1.5},
            "Both steps are done.",
        ],
    )
    thread = await client.threads.create()
    values: list[dict] = []
    ui_events: list[dict] = []
    async for part in client.runs.stream(
        thread["thread_id"], "plan_execute", input=user(f"{k} plan it"), stream_mode=CLIENT_STREAM
    ):
        assert part.event != "error", part.data
        if part.event == "values":
            values.append(part.data)
        elif part.event == "custom" and part.data.get("event") == "ui":
            ui_events.append(part.data)
    # While step b ran, the thread showed step a done, under the progress message.
    live = [v for v in values if progress_ids(v)]
    assert live, "no state with a progress message was streamed"
    [progress] = {p for v in live for p in progress_ids(v)}
    seen_live = {
        (m["name"], m["props"].get("step_id"), m["props"].get("status"))
        for v in live
        for m in v.get("ui", [])
        if m["metadata"].get("message_id") == progress
    }
    assert {("plan", None, "planned"), ("plan_step", "a", "completed")} <= seen_live
    # The streamed UI messages (agent-chat-ui merges them into `ui` as they come, between two
    # states) name the progress message too: step b shows as running while it runs.
    assert {e["metadata"]["message_id"] for e in ui_events} == {progress}
    streamed = [(e["name"], e["props"].get("step_id"), e["props"].get("status")) for e in ui_events]
    assert streamed.index(("plan_step", "b", "running")) < streamed.index(("plan_step", "b", "completed"))
    # At the end the cards stay under the progress message, above the answer: nothing moves (the
    # answer streamed below them and stays there).
    final = (await client.threads.get_state(thread["thread_id"]))["values"]
    assert [m["type"] for m in final["messages"]] == ["human", "ai", "ai"] and progress_ids(final) == [progress]
    answer = final["messages"][-1]
    assert answer["content"] == "Both steps are done." and final["messages"][1]["id"] == progress
    assert {m["metadata"]["message_id"] for m in final["ui"]} == {progress}
    steps = {m["props"]["step_id"]: m["props"]["status"] for m in final["ui"] if m["name"] == "plan_step"}
    assert steps == {"a": "completed", "b": "completed"}


async def test_a_run_cancelled_mid_stream_leaves_the_thread_answering(dev_server, openai_server):
    """A client streaming a run on its thread cancels it through the API half-way: the next message
    on the thread runs and answers, and the state holds the chat with every card under an answer."""
    client = dev_server.client("alice")
    k = key()
    openai_server.script(
        k,
        [
            plan({"id": "slow", "description": "think at length"}),
            {"content": "a very slow thought " * 40, "delay_per_token": 0.2},
            plan({"id": "m", "description": "6*7", "tool": "calculator", "args": {"expression": "6*7"}}),
            "It is 42.",
        ],
    )
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run_id = None
    async for part in client.runs.stream(tid, "plan_execute", input=user(f"{k} first"), stream_mode=CLIENT_STREAM):
        if part.event == "metadata":
            run_id = part.data["run_id"]
        if part.event == "custom" and part.data.get("event") == "plan_step_started":
            await client.runs.cancel(tid, run_id, wait=True, action="interrupt")
            break
    assert run_id is not None and await wait_status(client, tid, run_id, {"interrupted"}) == "interrupted"
    final = await client.runs.wait(tid, "plan_execute", input=user("second"))
    assert final["status"] == "completed" and final["messages"][-1]["content"] == "It is 42."
    assert [e["step_id"] for e in final["execution_log"]] == ["m"]
    state = await client.threads.get_state(tid)
    assert state["next"] == [] and (await client.threads.get(tid))["status"] == "idle"
    messages = state["values"]["messages"]
    chat = [m["type"] for m in messages if not m["id"].startswith("progress-")]
    assert chat == ["human", "human", "ai"]
    ai_ids = {m["id"] for m in messages if m["type"] == "ai"}  # each run's progress message too
    assert {m["metadata"]["message_id"] for m in state["values"]["ui"]} <= ai_ids
