"""Fixtures shared by the unit tests."""

import pytest
from langgraph.store.memory import InMemoryStore

from store.embeddings import get_embeddings


@pytest.fixture(scope="session")
def embeddings():
    """The real local embeddings model (loaded once per test session)."""
    return get_embeddings()


@pytest.fixture
def store(embeddings):
    """A fresh in-memory store indexing the `text` field with the local embeddings."""
    return InMemoryStore(index={"dims": 384, "embed": embeddings, "fields": ["text"]})
