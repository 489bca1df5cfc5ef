"""The `react` graph: a tool-calling agent."""
