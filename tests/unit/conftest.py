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


@pytest.fixture(scope="module")
def openai_server():
    """The scripted OpenAI-compatible server (tests/openai_server.py), one per test module."""
    from tests.openai_server import run_openai_server

    with run_openai_server() as running:
        yield running


@pytest.fixture
def openai_endpoint(openai_server, monkeypatch):
    """`openai:*` models talk to the scripted server (no key), its scripts reset."""
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    openai_server.reset()
    return openai_server
