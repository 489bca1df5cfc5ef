"""Persistence: Postgres checkpointer and store, embeddings, memory and knowledge bases. No LLM calls."""
