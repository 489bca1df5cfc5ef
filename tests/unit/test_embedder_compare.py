"""`python -m bench.embedder_compare` scores what it says: recall@10 over a question's evidence
turns from the model's cosine ranking alone, and MPNet's relative-position buckets as HF's
MPNetModel computes them."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from bench.embedder_compare import K, Model, MPNet, evaluate
from bench.locomo_eval import Conversation, Question, Turn


def test_position_bias_uses_mpnets_buckets():
    table = np.arange(32, dtype=np.float32)[:, None]  # one head; a bucket's bias is its number
    bias = MPNet._position_bias(table, 200)[0]  # [query, key]
    assert bias[0, 0] == 0
    assert bias[1, 0] == 1 and bias[0, 1] == 17  # key before the query: 0-15; after: 16-31
    assert bias[7, 0] == 7 and bias[8, 0] == 8  # exact up to 8 apart
    assert bias[20, 0] == 10  # then logarithmic: 8 + int(log(20 / 8) / log(16) * 8)
    assert bias[150, 0] == 15 and bias[0, 150] == 31  # 128 and beyond share the last bucket
    assert bias[30, 10] == bias[20, 0]  # only the distance counts


def _conversation(evidence: tuple[str, ...], split: str = "all") -> Conversation:
    conv = Conversation(0, ("A", "B"))
    at = datetime(2023, 5, 1, tzinfo=UTC)
    conv.turns = [Turn(f"D1:{i}", 1, at, "A", "user", f"turn {i}") for i in range(30)]
    conv.questions = [Question("q", "single-hop", "turn 3", evidence, split)]
    return conv


def _model(first: list[int]) -> Model:
    """Ranks the turns whose numbers are in `first` above the others, in that order."""

    def passages(texts: list[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), len(texts)), dtype=np.float32)
        for i in range(len(texts)):
            vectors[i, i] = 1.0
        return vectors

    def queries(texts: list[str]) -> np.ndarray:
        vector = np.zeros((len(texts), 30), dtype=np.float32)
        for rank, turn in enumerate(first):
            vector[:, turn] = 1.0 - rank / 100
        return vector

    return Model("stub", passages, queries)


def test_recall_is_the_share_of_evidence_in_the_first_ten():
    ranked = list(range(K + 5))  # turns 0-9 in the first ten, 10-14 just after
    scores = evaluate(_model(ranked), [_conversation(("D1:2", "D1:9", "D1:10", "D1:14"))], None)
    assert scores.recall == [0.5] and scores.evidence == [4] and scores.turns == 30
    assert scores.mean(4) == (50.0, 1)
    assert scores.mean(5)[1] == 0


def test_questions_of_another_split_are_not_asked():
    conv = _conversation(("D1:0",), split="held-out")
    assert evaluate(_model([0]), [conv], "held-in").recall == []
    assert evaluate(_model([0]), [conv], "held-out").recall == [1.0]
