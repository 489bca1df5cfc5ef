"""A trivial graph for the server benchmark: answers with the last user message. No model, no tools."""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langgraph.graph import START, StateGraph

from graphs.runtime.state import MessagesInput


def echo(state: MessagesInput) -> dict:
    """Reply with the text of the last message."""
    return {"messages": [AIMessage(state["messages"][-1].text)]}


builder = StateGraph(MessagesInput)
builder.add_node("echo", echo)
builder.add_edge(START, "echo")
graph = builder.compile(name="echo")
