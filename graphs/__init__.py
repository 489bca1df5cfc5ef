"""LangGraph graphs exported by langgraph.json, and the runtime pieces they share."""
