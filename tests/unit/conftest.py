"""Fixtures shared by the unit tests."""

import pytest
from langgraph.store.memory import InMemoryStore

from graphs.runtime.models import register_model_provider
from store.embeddings import get_embeddings


@pytest.fixture(scope="session")
def embeddings():
    """The real local embeddings model (loaded once per test session)."""
    return get_embeddings()


@pytest.fixture
def store(embeddings):
    """A fresh in-memory store indexing the `text` field with the local embeddings."""
    return InMemoryStore(index={"dims": 384, "embed": embeddings, "fields": ["text"]})


@pytest.fixture
def model_slot():
    """Register the `scripted:` provider; tests put their ScriptedChatModel in the slot."""
    slot: dict = {}
    register_model_provider("scripted", lambda name, **kw: slot["model"])
    return slot
