"""The react graph driven by a scripted model that emits real tool calls."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError

import tools.registry as registry
from graphs.react.graph import builder
from graphs.runtime.context import Context
from graphs.runtime.events import EVENT_FIELDS
from graphs.runtime.models import ModelCallError, ModelConfigError
from tests.fakes import ScriptedChatModel
from tools.errors import TransientToolError

ROOT = Path(__file__).resolve().parents[2]


class FakeServerError(Exception):
    """Shaped like openai.InternalServerError: a 5xx answer from the model API."""

    status_code = 503


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setenv("AGENT_RETRY_BASE_DELAY", "0.01")


attempts: dict[str, int] = {}


@tool
async def slow_echo(text: str, delay: float) -> str:
    """Echo `text` after `delay` seconds."""
    await asyncio.sleep(delay)
    return f"echo:{text}"


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


@tool
async def flaky(key: str, fail_times: int, hang: bool = False) -> str:
    """Fails transiently `fail_times` times (or hangs past the timeout), then succeeds."""
    attempts[key] = attempts.get(key, 0) + 1
    if attempts[key] <= fail_times:
        if hang:
            await asyncio.sleep(30)
        raise TransientToolError("upstream answered 503")
    return f"ok after {attempts[key]} attempts"


@pytest.fixture(autouse=True)
def test_tools(monkeypatch):
    """The registry serves the built-in calculator plus the test tools above."""
    attempts.clear()
    extra = {t.name: t for t in (slow_echo, explode, flaky)}

    async def available_tools():
        return {"calculator": registry.builtin_tools()["calculator"], **extra}, []

    monkeypatch.setattr(registry, "available_tools", available_tools)


async def run(model_slot, responses, context=None, message="hi", thread="t1"):
    """Run the graph once; return (final state, custom events, stream chunks, model)."""
    model = ScriptedChatModel(responses=responses)
    model_slot["model"] = model
    graph = builder.compile(checkpointer=InMemorySaver())
    ctx = Context(model="scripted:test", **(context or {}))
    events, tokens = [], []
    config = {"configurable": {"thread_id": thread}}
    async for mode, chunk in graph.astream(
        {"messages": [HumanMessage(message)]},
        config,
        context=ctx,
        stream_mode=["custom", "messages"],
    ):
        if mode == "custom":
            events.append(chunk)
        else:
            tokens.append(chunk)
    state = (await graph.aget_state(config)).values
    return state, events, tokens, model


def kinds(events, kind):
    return [e for e in events if e["event"] == kind]


async def test_parallel_tool_calls_run_concurrently_and_all_results_precede_the_answer(model_slot):
    calls = [
        {"name": "slow_echo", "args": {"text": "first", "delay": 0.3}, "id": "call_a"},
        {"name": "slow_echo", "args": {"text": "second", "delay": 0.01}, "id": "call_b"},
        {"name": "calculator", "args": {"expression": "6*7"}, "id": "call_c"},
    ]
    state, events, tokens, model = await run(model_slot, [{"content": "", "tool_calls": calls}, "Both done: 42"])
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in tool_messages] == ["call_a", "call_b", "call_c"]
    assert tool_messages[0].content == "echo:first" and tool_messages[1].content == "echo:second"
    assert "42" in tool_messages[2].content
    # The quick call finished before the slow one: they really ran at the same time.
    finished = [e["tool_call_id"] for e in kinds(events, "tool_call_finished")]
    assert finished.index("call_b") < finished.index("call_a")
    assert {e["tool_call_id"] for e in kinds(events, "tool_call_started")} == {"call_a", "call_b", "call_c"}
    started = kinds(events, "tool_call_started")
    assert started[0]["args"] == calls[0]["args"] or any(e["args"] == calls[0]["args"] for e in started)
    assert all(e["duration_ms"] >= 0 for e in kinds(events, "tool_call_finished"))
    # The second model call saw all three results.
    second_call = model.calls[1].messages
    assert sum(isinstance(m, ToolMessage) for m in second_call) == 3
    assert state["messages"][-1].content == "Both done: 42"
    assert [entry["tool"] for entry in state["execution_log"]] == ["slow_echo", "slow_echo", "calculator"]
    assert all(entry["status"] == "success" for entry in state["execution_log"])
    # Tokens of the answer streamed on the messages stream, in several chunks.
    text_chunks = [c[0].content for c in tokens if c[0].content and c[1].get("langgraph_node") == "call_model"]
    assert len(text_chunks) >= 2 and "".join(text_chunks).endswith("Both done: 42")
    assert [e["step"] for e in kinds(events, "step")] == [1, 2]


async def test_every_answer_says_when_and_by_which_model_it_was_produced(model_slot):
    from datetime import UTC, datetime

    before = datetime.now(UTC)
    state, _, _, _ = await run(
        model_slot,
        [{"tool_calls": [{"name": "calculator", "args": {"expression": "6*7"}, "id": "c1"}]}, "It is 42."],
    )
    answers = [m for m in state["messages"] if isinstance(m, AIMessage)]
    assert len(answers) == 2  # the tool call and the answer
    for message in answers:
        created = datetime.fromisoformat(message.response_metadata["created_at"])
        assert before <= created <= datetime.now(UTC) and message.response_metadata["model"] == "scripted"
        assert message.response_metadata["web_search"] is False  # no web_search tool offered
    [entry] = state["execution_log"]  # the tool call's record: result and times
    assert entry["result_preview"] == "42" and entry["started_at"] <= entry["finished_at"]
    assert datetime.fromisoformat(entry["finished_at"]) <= datetime.now(UTC)


async def test_an_answer_says_whether_the_model_could_search_the_web(model_slot, monkeypatch):
    web = registry.builtin_tools()["web_search"]

    async def available_tools():
        return {"calculator": registry.builtin_tools()["calculator"], "web_search": web}, []

    monkeypatch.setattr(registry, "available_tools", available_tools)
    state, _, _, model = await run(model_slot, ["Searched nothing."], message="search the web for otter news")
    assert "web_search" in str(model.calls[0])
    assert state["messages"][-1].response_metadata["web_search"] is True
    state, _, _, _ = await run(model_slot, ["Sums only."], context={"tools": ["calculator"]}, thread="t2")
    assert state["messages"][-1].response_metadata["web_search"] is False


async def test_raising_tool_becomes_error_message_and_agent_goes_on(model_slot):
    state, events, _, model = await run(
        model_slot,
        [
            {"tool_calls": [{"name": "explode", "args": {"reason": "disk full"}, "id": "x1"}]},
            "The tool failed, sorry.",
        ],
    )
    error = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert error.status == "error" and "boom: disk full" in error.content
    assert "call explode again" not in error.content  # nothing the model could correct
    failed = kinds(events, "tool_call_failed")
    assert failed[0]["tool_call_id"] == "x1" and failed[0]["error_type"] == "RuntimeError"
    assert failed[0]["attempts"] == 1  # not transient: not retried
    assert state["execution_log"][0]["status"] == "error"
    assert state["messages"][-1].content == "The tool failed, sorry."


async def test_bad_arguments_and_unknown_tool_are_answered_with_errors(model_slot):
    state, events, _, _ = await run(
        model_slot,
        [
            {
                "tool_calls": [
                    {"name": "calculator", "args": {"wrong": 1}, "id": "bad"},
                    {"name": "no_such_tool", "args": {}, "id": "ghost"},
                ]
            },
            "done",
        ],
    )
    results = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert results["bad"].status == "error" and "expression" in results["bad"].content
    assert "try again" in results["bad"].content  # LangGraph's own advice on arguments its schema refused
    assert results["ghost"].status == "error" and "no_such_tool" in results["ghost"].content
    assert len(kinds(events, "tool_call_failed")) == 2


async def test_a_tool_call_with_oversized_arguments_is_answered_with_an_error_and_not_run(model_slot, monkeypatch):
    monkeypatch.setenv("TOOL_ARGS_MAX_CHARS", "1000")
    huge = "x" * 5000
    state, events, _, _ = await run(
        model_slot,
        [
            {
                "tool_calls": [
                    {"name": "slow_echo", "args": {"text": huge, "delay": 0}, "id": "big"},
                    {"name": "slow_echo", "args": {"text": "small", "delay": 0}, "id": "ok"},
                ]
            },
            "done",
        ],
    )
    results = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert results["big"].status == "error" and "at most 1,000 are accepted" in results["big"].content
    assert "call slow_echo again" in results["big"].content
    assert results["ok"].content == "echo:small"
    # never run, and its arguments never went out in an event
    assert [e["tool_call_id"] for e in kinds(events, "tool_call_started")] == ["ok"]
    assert kinds(events, "tool_call_failed")[0]["tool_call_id"] == "big"


async def test_transient_tool_failure_is_retried_with_backoff(model_slot):
    state, events, _, _ = await run(
        model_slot,
        [{"tool_calls": [{"name": "flaky", "args": {"key": "k", "fail_times": 2}, "id": "f"}]}, "ok"],
        context={"tool_retries": 2},
    )
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert result.content == "ok after 3 attempts" and result.status == "success"
    assert [e["attempt"] for e in kinds(events, "tool_call_retrying")] == [1, 2]
    assert state["execution_log"][0]["attempts"] == 3


async def test_timing_out_tool_is_retried_then_reported(model_slot):
    state, events, _, _ = await run(
        model_slot,
        [
            {"tool_calls": [{"name": "flaky", "args": {"key": "t", "fail_times": 5, "hang": True}, "id": "t"}]},
            "It timed out.",
        ],
        context={"tool_timeout": 0.2, "tool_retries": 1},
    )
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert result.status == "error" and "timed out after 0.2 s" in result.content
    assert len(kinds(events, "tool_call_retrying")) == 1
    assert kinds(events, "tool_call_failed")[0]["attempts"] == 2
    assert attempts["t"] == 2


async def test_max_steps_ends_with_an_honest_answer_and_no_dangling_call(model_slot):
    loop_call = {"tool_calls": [{"name": "calculator", "args": {"expression": "1+1"}}]}
    state, events, _, model = await run(model_slot, [loop_call, loop_call, loop_call], context={"max_steps": 3})
    assert len(model.calls) == 3
    assert model.calls[-1].tools == []  # the last allowed call gets no tools
    assert "step limit" in model.calls[-1].messages[0].content
    final = state["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert "step limit (3 model calls)" in final.content
    assert kinds(events, "step_limit_reached")[0]["max_steps"] == 3
    called = {c["id"] for m in state["messages"] if isinstance(m, AIMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage)}
    assert called == answered


async def test_summary_never_separates_a_tool_call_from_its_result(model_slot):
    big = "x " * 400
    calls = [{"name": "slow_echo", "args": {"text": big, "delay": 0}, "id": f"s{i}"} for i in range(2)]
    responses = [
        {"content": "", "tool_calls": [calls[0]]},
        {"content": "", "tool_calls": [calls[1]]},
        "first answer",
        "Summary: the user asked for echoes.",
        "second answer",
    ]
    model = ScriptedChatModel(responses=responses)
    model_slot["model"] = model
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "sum"}}
    roomy = Context(model="scripted:test", context_window_tokens=100_000)
    await graph.ainvoke({"messages": [HumanMessage("echo twice")]}, config, context=roomy)
    assert len(model.calls) == 3  # no summary yet
    ctx = Context(model="scripted:test", context_window_tokens=600)
    events = []
    async for chunk in graph.astream(
        {"messages": [HumanMessage("and now?")]}, config, context=ctx, stream_mode="custom"
    ):
        events.append(chunk)
    state = (await graph.aget_state(config)).values
    assert state["summary"] == "Summary: the user asked for echoes."
    assert kinds(events, "history_summarized")
    messages = state["messages"]
    assert len(messages) < 8
    seen_calls = set()
    for m in messages:
        if isinstance(m, AIMessage):
            seen_calls |= {c["id"] for c in m.tool_calls}
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in seen_calls, "a tool result lost its call"
    # The summary reached the model in the system prompt of the answering call.
    assert "the user asked for echoes" in model.calls[-1].messages[0].content
    assert not isinstance(model.calls[-1].messages[1], ToolMessage)


async def test_transient_model_error_is_retried(model_slot):
    state, events, _, model = await run(model_slot, [FakeServerError("overloaded"), "hello"])
    assert state["messages"][-1].content == "hello"
    assert kinds(events, "model_retrying")[0]["error"] == "overloaded"


async def test_persistent_model_error_ends_the_run_with_an_error_event(model_slot):
    model = ScriptedChatModel(responses=[FakeServerError("down")] * 3)
    model_slot["model"] = model
    graph = builder.compile(checkpointer=InMemorySaver())
    events = []
    with pytest.raises(ModelCallError, match=r"FakeServerError, attempt 3\): down"):
        async for chunk in graph.astream(
            {"messages": [HumanMessage("hi")]},
            {"configurable": {"thread_id": "err"}},
            context=Context(model="scripted:test", model_retries=2),
            stream_mode="custom",
        ):
            events.append(chunk)
    assert len(kinds(events, "model_retrying")) == 2
    assert kinds(events, "model_error")[0]["error_type"] == "FakeServerError"


async def test_missing_model_key_fails_fast_with_a_clear_message(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    graph = builder.compile()
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        await asyncio.wait_for(
            graph.ainvoke({"messages": [HumanMessage("hi")]}, context=Context(model="openai:gpt-4o-mini")),
            timeout=10,
        )


async def test_reasoning_text_is_streamed_as_thinking_event(model_slot):
    _, events, _, _ = await run(model_slot, [{"content": "42", "reasoning": "6 times 7"}])
    assert kinds(events, "thinking")[0]["text"] == "6 times 7"


async def test_tool_selection_limits_bound_tools(model_slot):
    _, _, _, model = await run(model_slot, ["fine"], context={"tools": ["calculator"]})
    assert model.calls[0].tool_names == ["calculator"]


async def test_unknown_tool_selection_is_a_clear_error(model_slot):
    with pytest.raises(ValueError, match="Invalid context field `tools`: unknown tool.*nope.*available: calculator"):
        await run(model_slot, ["unused"], context={"tools": ["nope"]})


def test_every_event_kind_is_documented():
    doc = (ROOT / "docs" / "events.md").read_text()
    documented = set(re.findall(r"^### `([a-z_]+)`", doc, flags=re.M))
    assert documented == set(EVENT_FIELDS)
    for kind, fields in EVENT_FIELDS.items():
        section = doc.split(f"### `{kind}`", 1)[1].split("\n### ", 1)[0]
        for field in fields:
            assert f"`{field}`" in section, f"{kind}.{field} undocumented"


def _unanswered(messages) -> set[str]:
    called = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return called - {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}


async def test_a_run_cancelled_during_its_tools_commits_no_call_without_its_result(model_slot):
    slow = AIMessage("", id="a1", tool_calls=[{"name": "slow_echo", "args": {"text": "x", "delay": 0.5}, "id": "s1"}])
    model_slot["model"] = ScriptedChatModel(responses=[slow, "echoed x"])
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "stopped"}}
    context = Context(model="scripted:test", remember=False)
    started = asyncio.Event()

    async def consume():
        async for chunk in graph.astream(
            {"messages": [HumanMessage("echo x")]}, config, context=context, stream_mode="custom"
        ):
            if chunk["event"] == "tool_call_started":
                started.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    snapshot = await graph.aget_state(config)
    assert _unanswered(snapshot.values["messages"]) == set()
    assert snapshot.next == ("tools",) and snapshot.values["pending_tool_calls"].tool_calls[0]["id"] == "s1"
    # Resumed with no input, the kept request runs and joins the messages with its result.
    final = await graph.ainvoke(None, config, context=context)
    assert [type(m).__name__ for m in final["messages"]] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert final["messages"][2].content == "echo:x" and final["pending_tool_calls"] is None
    # One card per tool call: a chat client shows the call and its result from `messages`; the
    # graph adds no card of its own for it.
    assert not [m for m in final.get("ui") or [] if m["name"] == "tool_progress"]


async def test_the_recursion_limit_commits_no_call_without_its_result_and_a_new_message_goes_on(model_slot):
    call = AIMessage("", id="a1", tool_calls=[{"name": "calculator", "args": {"expression": "1+1"}, "id": "k1"}])
    model = ScriptedChatModel(responses=[call, "a fresh answer"])
    model_slot["model"] = model
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "limited"}, "recursion_limit": 1}
    context = Context(model="scripted:test", remember=False)
    with pytest.raises(GraphRecursionError):
        await graph.ainvoke({"messages": [HumanMessage("add")]}, config, context=context)
    snapshot = await graph.aget_state(config)
    assert _unanswered(snapshot.values["messages"]) == set() and snapshot.next == ("tools",)
    final = await graph.ainvoke(
        {"messages": [HumanMessage("never mind")]}, {"configurable": {"thread_id": "limited"}}, context=context
    )
    assert final["messages"][-1].content == "a fresh answer" and _unanswered(final["messages"]) == set()
    assert not any(isinstance(m, ToolMessage) for m in model.calls[-1].messages)  # nothing to repair
