"""One embedder in its own process, for bench/embed_bench.py: `ours` (store/minilm.py) or
`sentence-transformers` (torch; run by another venv's Python, which needs only
sentence-transformers and torch, not this package).

    python bench/embed_worker.py KIND MODEL_DIR TEXTS_JSON [THREADS]

THREADS (default: each embedder's own default) sizes both alike. It loads the model, prints `ready <description>`, then answers each line on stdin: `round`
embeds all texts and prints the seconds it took; `vectors PATH` saves the last vectors as .npy;
`quit` ends. Only the standard library and numpy are imported before the chosen embedder.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np


def _ours(model_dir: Path, threads: int | None):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from store.minilm import MiniLM, blas_description

    model = MiniLM(model_dir, threads=threads)
    plural = "s" if model.threads > 1 else ""
    return model.encode, f"numpy, {model.threads} worker thread{plural}, BLAS {blas_description()}"


def _sentence_transformers(model_dir: Path, threads: int | None):
    import torch
    from sentence_transformers import SentenceTransformer

    if threads:
        torch.set_num_threads(threads)
    model = SentenceTransformer(str(model_dir), device="cpu")
    description = f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    return lambda texts: model.encode(texts, batch_size=32, normalize_embeddings=True), description


def main(argv: list[str]) -> int:
    kind, model_dir, texts_path, *rest = argv
    threads = int(rest[0]) if rest else None
    texts = json.loads(Path(texts_path).read_text())
    encode, description = (_ours if kind == "ours" else _sentence_transformers)(Path(model_dir), threads)
    encode(texts[:4])  # warm up: first calls allocate
    print(f"ready {description}", flush=True)
    vectors = None
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "round":
            started = time.perf_counter()
            vectors = np.asarray(encode(texts), dtype=np.float32)
            print(time.perf_counter() - started, flush=True)
        elif command == "vectors" and vectors is not None:
            np.save(argument, vectors)
            print("saved", flush=True)
        elif command == "quit":
            break
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
