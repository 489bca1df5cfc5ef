"""The embeddings factory: local MiniLM by default, any OpenAI-compatible endpoint when configured."""

from __future__ import annotations

import math

import pytest

from settings import SettingsError
from store.embeddings import EmbeddingsConfigError, embeddings_spec, get_embeddings
from tests.openai_server import run_openai_server


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=False)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


def test_default_is_the_local_model_shipped_in_the_wheel(monkeypatch):
    monkeypatch.delenv("EMBEDDINGS_MODEL", raising=False)
    monkeypatch.delenv("EMBEDDINGS_DIMS", raising=False)
    spec = embeddings_spec()
    assert (spec.model, spec.dims) == ("local:all-MiniLM-L6-v2", 384)
    model = get_embeddings(spec)
    cat, kitten, bonds = model.embed_documents(
        ["A cat sleeps on the sofa.", "A kitten naps on the couch.", "Bond yields rose sharply."]
    )
    assert len(cat) == 384
    assert cosine(cat, kitten) > cosine(cat, bonds) + 0.3


async def test_openai_compatible_endpoint(monkeypatch):
    with run_openai_server() as server:
        monkeypatch.setenv("EMBEDDINGS_MODEL", "openai:local-embedder")
        monkeypatch.setenv("EMBEDDINGS_DIMS", "384")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        spec = embeddings_spec()
        vector = await get_embeddings(spec).aembed_query("hello world")
        assert spec.dims == 384 and len(vector) == 384
        request = [r for r in server.requests() if r["path"].endswith("/embeddings")][-1]
        assert request["model"] == "local-embedder"


def test_bad_configurations_fail_with_clear_messages(monkeypatch):
    monkeypatch.setenv("EMBEDDINGS_MODEL", "openai:some-new-model")
    monkeypatch.delenv("EMBEDDINGS_DIMS", raising=False)
    with pytest.raises(EmbeddingsConfigError, match="EMBEDDINGS_DIMS"):
        embeddings_spec()
    monkeypatch.setenv("EMBEDDINGS_MODEL", "nomic")
    with pytest.raises(SettingsError, match="EMBEDDINGS_MODEL='nomic'"):
        embeddings_spec()
    monkeypatch.setenv("EMBEDDINGS_MODEL", "openai:text-embedding-3-small")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EmbeddingsConfigError, match="OPENAI_API_KEY"):
        get_embeddings()
