"""The real-model eval tier: every graph against a real model at an OpenAI-compatible endpoint.

`python -m evals.realmodel` (evals/realmodel/run.py); how-to in evals/README.md.
"""
