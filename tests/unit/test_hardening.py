"""Bounded runs and valid threads: context checks, model timeouts and safe errors, history repair,
input checks, NUL cleaning, and the auth rules that keep ownership with its owner."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import Auth

from graphs.react.graph import builder
from graphs.runtime.context import Context
from graphs.runtime.history import CANCELLED_TOOL_RESULT, repair_tool_history
from graphs.runtime.models import ModelCallError, ainvoke_with_retries
from graphs.runtime.state import check_input_messages
from server import auth as server_auth
from store.clean import strip_nul
from tests.fakes import ScriptedChatModel
from tools.identity import ADMIN, ThreadOwnerMismatch, check_thread_owner


@pytest.mark.parametrize(
    "bad, field_name, says",
    [
        ({"model_retries": 1e9}, "model_retries", "out of range 0..10"),
        ({"tool_timeout": -1}, "tool_timeout", "out of range"),
        ({"context_window_tokens": 0}, "context_window_tokens", "out of range"),
        ({"max_steps": "abc"}, "max_steps", "expected int"),
        ({"max_steps": 0}, "max_steps", "out of range 1..100"),
        ({"user_id": 123}, "user_id", "expected str"),
        ({"user_id": "  "}, "user_id", "must not be empty"),
        ({"remember": "maybe"}, "remember", "expected bool"),
        ({"temperature": "hot"}, "temperature", "expected float"),
        ({"temperature": float("nan")}, "temperature", "not a finite number"),
        ({"model": "nosuch:model"}, "model", "unknown model provider 'nosuch'"),
        ({"model": ""}, "model", "provider:model"),
        ({"model": "openai:"}, "model", "provider:model"),
        ({"tools": ["calculator", "rm_rf"]}, "tools", "unknown tool(s) rm_rf; available: calculator"),
        ({"tools": "calculator"}, "tools", "expected"),
        ({"model_timeout": 0}, "model_timeout", "out of range 1..3600"),
    ],
)
def test_bad_context_values_name_the_field(bad, field_name, says):
    with pytest.raises(ValueError) as refused:
        Context(**bad)
    assert f"Invalid context field `{field_name}`" in str(refused.value)
    assert says in str(refused.value)


def test_good_context_values_are_kept_and_whole_floats_become_ints():
    context = Context(max_steps=3.0, temperature=1, tools=["calculator"], model_timeout=5)
    assert context.max_steps == 3 and isinstance(context.max_steps, int)
    assert context.temperature == 1.0 and context.tools == ["calculator"] and context.model_timeout == 5


async def test_a_bad_context_leaves_the_thread_unchanged(model_slot):
    model_slot["model"] = ScriptedChatModel(responses=["never"])
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "bad-context"}}
    with pytest.raises(ValueError, match="max_steps"):
        await graph.ainvoke(
            {"messages": [HumanMessage("hi")]}, config, context={"model": "scripted:x", "max_steps": "abc"}
        )
    state = await graph.aget_state(config)
    assert state.values == {} and state.next == ()
    assert model_slot["model"].calls == []


async def test_a_hung_model_call_times_out_then_is_retried_within_its_budget():
    calls = []

    async def answer(messages):
        calls.append(time.monotonic())
        if len(calls) < 3:
            await asyncio.sleep(30)
        return AIMessage("late but fine")

    model = RunnableLambda(answer)
    started = time.monotonic()
    result = await ainvoke_with_retries(model, [HumanMessage("hi")], None, retries=2, step=1, timeout=0.2)
    assert result.content == "late but fine" and len(calls) == 3
    assert time.monotonic() - started < 10  # two 0.2 s timeouts plus backoff, not 30 s hangs

    calls.clear()
    with pytest.raises(ModelCallError, match=r"TimeoutError, attempt 2\): no answer within 0.2 s"):
        await ainvoke_with_retries(model, [HumanMessage("hi")], None, retries=1, step=1, timeout=0.2)


def test_repair_answers_dangling_tool_calls_and_drops_orphan_results():
    history = [
        HumanMessage("weather and time?", id="h1"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[
                {"name": "weather", "args": {}, "id": "c1"},
                {"name": "current_time", "args": {}, "id": "c2"},
            ],
        ),
        ToolMessage("sunny", tool_call_id="c1", id="t1"),
        HumanMessage("hello again", id="h2"),
        ToolMessage("stray", tool_call_id="nobody", id="t2"),
        AIMessage("", id="a2", tool_calls=[{"name": "calculator", "args": {}, "id": "c3"}]),
    ]
    repaired = repair_tool_history(history)
    assert [type(m).__name__ for m in repaired] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
    ]
    cancelled = [m for m in repaired if isinstance(m, ToolMessage) and m.content == CANCELLED_TOOL_RESULT]
    assert [(m.tool_call_id, m.status) for m in cancelled] == [("c2", "error"), ("c3", "error")]
    assert all(m.tool_call_id != "nobody" for m in repaired if isinstance(m, ToolMessage))
    healthy = [history[0], AIMessage("", id="a9", tool_calls=[{"name": "weather", "args": {}, "id": "c1"}]), history[2]]
    assert repair_tool_history(healthy) is healthy


async def test_next_turn_after_an_interrupted_tool_call_sends_a_valid_history(model_slot):
    model = ScriptedChatModel(responses=["all good now"])
    model_slot["model"] = model
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "broken"}}
    dangling = AIMessage("", id="a1", tool_calls=[{"name": "calculator", "args": {"expression": "1+1"}, "id": "c1"}])
    await graph.aupdate_state(config, {"messages": [HumanMessage("add", id="h1"), dangling]}, as_node="call_model")
    result = await graph.ainvoke(
        {"messages": [HumanMessage("still there?")]}, config, context=Context(model="scripted:x", remember=False)
    )
    assert result["messages"][-1].content == "all good now"
    sent = model.calls[0].messages
    position = next(i for i, m in enumerate(sent) if isinstance(m, AIMessage) and m.tool_calls)
    assert isinstance(sent[position + 1], ToolMessage) and sent[position + 1].status == "error"
    assert sent[position + 1].tool_call_id == "c1"


@pytest.mark.parametrize(
    "messages, says",
    [
        ([{"role": "hacker", "content": "hi"}], "input messages[0]: Unexpected message type: 'hacker'"),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "calculator", "args": {}}]},
            ],
            "c1 have no tool message",
        ),
        ([{"role": "tool", "content": "42", "tool_call_id": "c9"}], "messages[0]: tool message for call 'c9'"),
        ("not a list of messages", None),
    ],
)
def test_input_messages_that_would_break_a_thread_are_refused(messages, says):
    if says is None:
        check_input_messages(messages)  # a plain string is one user message
        return
    with pytest.raises(ValueError) as refused:
        check_input_messages(messages)
    assert says in str(refused.value)


def test_answered_tool_calls_in_the_input_are_accepted():
    check_input_messages(
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "calculator", "args": {}}]},
            {"role": "tool", "content": "2", "tool_call_id": "c1"},
            {"role": "assistant", "content": "2"},
        ]
    )
    check_input_messages(None)


def test_nul_characters_are_stripped_everywhere_in_a_value():
    value = {"text": "a\x00b", "keys\x00": ["x\x00", ("y\x00",)], "n": 3, "none": None}
    assert strip_nul(value) == {"text": "ab", "keys": ["x", ("y",)], "n": 3, "none": None}


@dataclass
class User:
    identity: str
    permissions: list[str] = field(default_factory=list)


def ctx(user, resource: str, action: str) -> Auth.types.AuthContext:
    return Auth.types.AuthContext(user=user, permissions=user.permissions, resource=resource, action=action)


@pytest.mark.parametrize("resource", ["threads", "crons", "assistants"])
async def test_a_regular_user_cannot_hand_an_item_to_someone_else(resource, monkeypatch):
    bob = User("bob")
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        await server_auth.on_update(ctx(bob, resource, "update"), {"metadata": {"owner": "alice"}})
    assert refused.value.status_code == 403
    # Other metadata changes, and naming oneself, are fine (filtered to bob's own items).
    assert await server_auth.on_update(ctx(bob, resource, "update"), {"metadata": {"owner": "bob", "x": 1}}) == {
        "owner": "bob"
    }
    ops = User("ops", [ADMIN])
    cancelled = []

    async def cancel_open_runs(thread_id):
        cancelled.append(thread_id)

    monkeypatch.setattr(server_auth, "_cancel_open_runs", cancel_open_runs)
    value = {"thread_id": "t1", "metadata": {"owner": "alice"}}
    assert await server_auth.on_update(ctx(ops, resource, "update"), value) is None
    # an administrator's hand-over of a thread cancels the runs its previous owner queued
    assert cancelled == (["t1"] if resource == "threads" else [])


async def test_studio_header_is_trusted_only_when_opted_in(monkeypatch):
    monkeypatch.setenv("AGENT_API_KEYS", "alice=k-alice")
    monkeypatch.setenv("LANGSMITH_LANGGRAPH_API_VARIANT", "local_dev")
    monkeypatch.delenv("AGENT_TRUST_STUDIO_HEADER", raising=False)
    studio = {b"x-auth-scheme": b"langsmith"}
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        await server_auth.authenticate(None, studio)
    assert refused.value.status_code == 401
    monkeypatch.setenv("AGENT_TRUST_STUDIO_HEADER", "true")
    assert await server_auth.authenticate(None, studio) == {"identity": server_auth.STUDIO_USER, "permissions": [ADMIN]}
    monkeypatch.setenv("LANGSMITH_LANGGRAPH_API_VARIANT", "cloud")
    with pytest.raises(Auth.exceptions.HTTPException):
        await server_auth.authenticate(None, studio)  # never off langgraph dev


async def test_thread_owner_check_refuses_a_run_on_a_thread_that_changed_hands(monkeypatch):
    class Threads:
        async def get(self, thread_id):
            return {"thread_id": thread_id, "metadata": {"owner": "alice"}}

    class Client:
        threads = Threads()

    monkeypatch.setattr("langgraph_sdk.get_client", lambda: Client())
    bob, alice, ops = User("bob"), User("alice"), User("ops", [ADMIN])

    def config(user):
        return {"configurable": {"thread_id": "t1", "langgraph_auth_user": user}}

    with pytest.raises(ThreadOwnerMismatch, match="now belongs to another user"):
        await check_thread_owner(config(bob))
    await check_thread_owner(config(alice))
    await check_thread_owner(config(ops))  # administrators act for anyone
    await check_thread_owner({"configurable": {"thread_id": "t1"}})  # no server user: in-process runs


def test_a_port_in_time_wait_counts_as_free_and_a_listening_one_does_not():
    import socket

    from scripts.free_port import free_port

    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    assert free_port(port) != port  # someone listens there
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server side closes first: its end of the connection sits in TIME_WAIT
    server.close()
    client.close()
    assert free_port(port) == port
