"""Eval suites for the graphs, run as LangSmith evaluations (offline in CI, online with a real model)."""
