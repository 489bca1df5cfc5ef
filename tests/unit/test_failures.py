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
