"""all-MiniLM-L6-v2 without torch gives the vectors sentence-transformers gave, so stored vectors
and every recall figure stay valid."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from store.minilm import MiniLM

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
    together = model.encode(texts, batch_size=3)
    alone = np.stack([model.encode([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-5)


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
