"""graphs/runtime/failures.py: a failed node's explanation is committed to the thread, then the
run fails with the node's own error; a builder compiles more than once (the reach-in into
LangGraph's node specs)."""

from __future__ import annotations

from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from graphs.runtime.failures import MARKER, explain_failures
from graphs.runtime.models import ModelCallError


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    after: int


class Item(TypedDict):
    """A `Send` payload: a node reading it has an input schema of its own."""

    item: str


def build(outcomes: list) -> StateGraph:
    async def answer(state: State) -> dict:
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome == "ask":
            return {"messages": [AIMessage(interrupt("which one?"))]}
        return {"messages": [AIMessage(outcome)]}

    def after(state: State) -> dict:
        return {"after": state.get("after", 0) + 1}

    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_node("after", after)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", "after")
    builder.add_edge("after", END)
    return explain_failures(builder)


async def test_the_explanation_stays_in_the_thread_and_the_run_fails_with_the_nodes_error():
    error = ModelCallError("The model call failed (APIStatusError, attempt 3): Error code: 400")
    builder = build([error, "second answer"])
    builder.compile()  # the module's graph: compiling again must work
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ModelCallError) as raised:
        await graph.ainvoke({"messages": [("user", "first")]}, config)
    assert raised.value is error
    state = (await graph.aget_state(config)).values
    human, explained = state["messages"]
    assert explained.type == "ai" and "Error code: 400" in explained.text and "again" in explained.text
    assert explained.response_metadata[MARKER]["error"] == "ModelCallError"
    assert "after" not in state  # the failed node's edges did not run
    result = await graph.ainvoke({"messages": [("user", "second")]}, config)
    assert [m.type for m in result["messages"]] == ["human", "ai", "human", "ai"]
    assert result["messages"][-1].text == "second answer" and result["after"] == 1


async def test_other_errors_are_explained_without_their_text_and_interrupts_are_not_failures():
    graph = build([KeyError("secret-path"), "ask"]).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(KeyError):
        await graph.ainvoke({"messages": [("user", "first")]}, config)
    explained = (await graph.aget_state(config)).values["messages"][-1]
    assert "internal error occurred (KeyError)" in explained.text and "secret-path" not in explained.text
    await graph.ainvoke({"messages": [("user", "second")]}, config)
    snapshot = await graph.aget_state(config)
    assert snapshot.next == ("answer",) and snapshot.interrupts[0].value == "which one?"


@pytest.fixture
def postgres_back(monkeypatch):
    """Postgres (a name only: no connection is made) answering again after the waits recorded
    in the list returned; `answers=False` keeps it away."""
    from graphs.runtime import failures

    waits: list[float] = []
    answers = {"back": True}

    async def wait_for_postgres(uri: str, timeout: float) -> float | None:
        waits.append(timeout)
        return 0.1 if answers["back"] else None

    monkeypatch.setenv("POSTGRES_URI", "postgresql://nowhere/db")
    monkeypatch.setenv("DATABASE_RECOVERY_WAIT", "7")
    monkeypatch.setenv("DATABASE_RECOVERY_RETRIES", "2")
    monkeypatch.setattr(failures, "wait_for_postgres", wait_for_postgres)
    return waits, answers


async def test_a_node_that_lost_postgres_runs_again_once_it_answers_and_nothing_is_explained(postgres_back):
    from store.pool import DatabaseUnavailable

    waits, _ = postgres_back
    graph = build([DatabaseUnavailable(), "the answer"]).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t", "run_id": "r1"}}
    result = await graph.ainvoke({"messages": [("user", "question")]}, config)
    assert [m.text for m in result["messages"]] == ["question", "the answer"]
    assert result["after"] == 1 and waits == [7.0]


async def test_past_the_bounds_the_outage_is_explained_and_the_run_fails(postgres_back):
    from store.pool import DatabaseUnavailable
    from store.recovery import outage_to_wait_out

    waits, answers = postgres_back
    # Retries spent: two waits, then the third loss is explained.
    graph = build([DatabaseUnavailable()] * 3).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t", "run_id": "r2"}}
    with pytest.raises(DatabaseUnavailable) as raised:
        await graph.ainvoke({"messages": [("user", "question")]}, config)
    assert waits == [7.0, 7.0] and not outage_to_wait_out(raised.value)  # not waited out again by the server
    explained = (await graph.aget_state(config)).values["messages"][-1]
    assert explained.response_metadata[MARKER]["error"] == "DatabaseUnavailable" and "database" in explained.text
    # Postgres not back in time: explained at once.
    answers["back"] = False
    graph = build([DatabaseUnavailable()]).compile(checkpointer=InMemorySaver())
    with pytest.raises(DatabaseUnavailable):
        await graph.ainvoke({"messages": [("user", "q")]}, {"configurable": {"thread_id": "u", "run_id": "r3"}})
    assert waits == [7.0, 7.0, 7.0]


async def test_a_node_fed_by_a_send_is_not_run_again_from_the_state(postgres_back):
    from langgraph.types import Send

    from store.pool import DatabaseUnavailable

    waits, _ = postgres_back

    async def work(payload: Item) -> dict:
        raise DatabaseUnavailable()

    builder = StateGraph(State)
    builder.add_node("work", work)
    builder.add_conditional_edges(START, lambda state: [Send("work", {"item": "x"})])
    builder.add_edge("work", END)
    graph = explain_failures(builder).compile(checkpointer=InMemorySaver())
    with pytest.raises(DatabaseUnavailable):
        await graph.ainvoke({"messages": [("user", "q")]}, {"configurable": {"thread_id": "s", "run_id": "r4"}})
    assert waits == []
