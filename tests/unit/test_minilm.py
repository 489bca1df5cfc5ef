"""all-MiniLM-L6-v2 without torch gives the vectors sentence-transformers gave, so stored vectors
and every recall figure stay valid."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from store.minilm import MiniLM, blas_description, chunks_of, machine_threads

REFERENCE = Path(__file__).parent.parent / "data" / "minilm_reference.json"


def test_vectors_match_sentence_transformers():
    # Vectors recorded from sentence-transformers on torch for varied texts: prose, code longer
    # than the 256-token window, unicode, an empty string.
    reference = json.loads(REFERENCE.read_text())
    vectors = MiniLM().encode(reference["texts"])
    expected = np.array(reference["vectors"], dtype=np.float32)
    cosines = (vectors * expected).sum(1) / np.linalg.norm(expected, axis=1)
    assert vectors.shape == (len(reference["texts"]), 384)
    assert cosines.min() >= 0.9999, list(zip(reference["texts"], cosines.tolist(), strict=True))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_batching_and_order_do_not_change_a_vector():
    model = MiniLM()
    texts = ["short", "a somewhat longer sentence about the weather in Paris today", "x " * 400, ""]
    together = model.encode(texts, chunk_tokens=20)  # several chunks, one over the budget alone
    packed = model.encode(texts)  # all four texts packed in one chunk
    alone = np.stack([model.encode([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-5)
    assert np.allclose(packed, alone, atol=1e-5)
    assert np.allclose(model.encode(texts[::-1]), alone[::-1], atol=1e-5)
    assert model.encode([]).shape == (0, 384)


def test_chunks_keep_order_and_stay_within_the_token_budget():
    assert chunks_of([5, 5, 5, 20, 1, 1], 10) == [[0, 1], [2], [3], [4, 5]]
    assert chunks_of([], 10) == []


def test_texts_are_computed_on_the_workers_sized_to_the_machine(monkeypatch):
    """Many texts spread over `threads` worker threads, never more, with the same vectors as one
    thread; BLAS stays at one thread in the process (no spinning pool competing with them)."""
    from threadpoolctl import threadpool_info

    reference = json.loads(REFERENCE.read_text())
    texts = reference["texts"] * 3
    assert MiniLM().threads == machine_threads() >= 1
    single = MiniLM(threads=1).encode(texts, chunk_tokens=64)
    model = MiniLM(threads=2)
    seen: set[str] = set()
    forward = model._forward

    def recording(sequences):
        seen.add(threading.current_thread().name)
        return forward(sequences)

    monkeypatch.setattr(model, "_forward", recording)
    vectors = model.encode(texts, chunk_tokens=64)
    assert np.allclose(vectors, single, atol=1e-5)
    assert len(seen) == 2 and all(name.startswith("minilm") for name in seen), seen
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == [1]
    assert "thread" in blas_description()


def test_a_chat_turns_few_texts_are_shared_among_the_workers(monkeypatch):
    model = MiniLM(threads=2)
    seen: list[str] = []
    forward = model._forward

    def recording(sequences):
        seen.append(threading.current_thread().name)
        return forward(sequences)

    monkeypatch.setattr(model, "_forward", recording)
    turn = [
        "We moved to Lisbon in May.",
        "The kids started school there.",
        "We moved to Lisbon in May. The kids started school there.",
    ]
    vectors = model.encode(turn)
    assert len(seen) >= 2 and all(name.startswith("minilm") for name in seen), seen
    assert np.allclose(
        vectors, np.stack([forward([np.asarray(model._tokenizer.encode(t).ids)])[0] for t in turn]), atol=1e-5
    )
    seen.clear()
    model.encode(["one query"])  # one text: computed where it is asked, no hand-over
    assert seen == [threading.current_thread().name]


def test_the_embeddings_threads_setting_sizes_the_local_model(monkeypatch):
    from store.embeddings import LocalMiniLMEmbeddings

    monkeypatch.setenv("EMBEDDINGS_THREADS", "1")
    assert LocalMiniLMEmbeddings().load().threads == 1
    monkeypatch.setenv("EMBEDDINGS_THREADS", "0")
    assert LocalMiniLMEmbeddings().load().threads == machine_threads()


def test_the_store_embeds_without_importing_torch():
    """Nor does the CLI (its list, delete and memory commands stay fast)."""
    code = (
        "import sys, server.cli\n"
        "assert 'torch' not in sys.modules, 'server.cli imports torch'\n"
        "from store.embeddings import LocalMiniLMEmbeddings\n"
        "v = LocalMiniLMEmbeddings().embed_query('hello world')\n"
        "print(len(v), sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent.parent,
    ).stdout
    assert out.strip() == "384 []"
