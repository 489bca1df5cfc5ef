"""Score fusion shared by hybrid memory search (store/memory/hybrid.py) and hybrid knowledge-base
search (store/knowledge/search.py).

`fuse` combines a dense list (cosine similarities) and a keyword list (BM25 scores) by a
score-normalised weighted sum: each list's scores are mapped to [0, 1] (min-max over the list by
default), so both signals count whatever their scale, and a document missing from a list gets 0
from it.
Unlike reciprocal rank fusion it keeps how far apart the scores are, so a weak signal's flat tail
cannot outvote a strong signal's clear winner; weight 0 or 1 reproduces one signal exactly. An
optional third signal adds a constant to chosen documents (memories written in the time range a
query names).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

FUSION_METHODS = ("minmax", "max", "rrf")
RRF_K = 60


def normalised(ranking: Sequence[tuple[str, float]], method: str) -> list[tuple[str, float]]:
    """One signal's scores mapped to [0, 1]: `minmax` (score - worst) / (best - worst) over the
    list (1.0 for all when they are equal), `max` score / best (non-positive best: all 0), `rrf`
    (RRF_K + 1) / (RRF_K + rank), rank from 1 (the reciprocal rank scaled so the first is 1)."""
    if not ranking:
        return []
    if method == "rrf":
        return [(doc_id, (RRF_K + 1) / (RRF_K + rank)) for rank, (doc_id, _) in enumerate(ranking, 1)]
    scores = [score for _, score in ranking]
    best, worst = max(scores), min(scores)
    if method == "max":
        return [(doc_id, max(score, 0.0) / best if best > 0 else 0.0) for doc_id, score in ranking]
    if method != "minmax":
        raise ValueError(f"unknown fusion method {method!r}: use one of {', '.join(FUSION_METHODS)}")
    span = best - worst
    return [(doc_id, (score - worst) / span if span > 0 else 1.0) for doc_id, score in ranking]


def fuse(
    dense: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    *,
    keyword_weight: float,
    in_range: Iterable[str] = (),
    time_weight: float = 0.0,
    method: str = "minmax",
) -> list[tuple[str, float]]:
    """Weighted sum of normalised scores (`normalised`), best first (ties: dense order, then id):
    `(1 - keyword_weight) * dense' + keyword_weight * keyword' + time_weight * (id in in_range)`,
    a document missing from a list getting 0 from it. Weight 0 keeps the dense order, 1 the
    keyword order (then the dense order for the rest)."""
    scores: dict[str, float] = {}
    for ranking, weight in ((dense, 1.0 - keyword_weight), (keyword, keyword_weight)):
        for doc_id, score in normalised(ranking, method):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight * score
    if time_weight:
        for doc_id in in_range:
            scores[doc_id] = scores.get(doc_id, 0.0) + time_weight
    dense_rank = {doc_id: rank for rank, (doc_id, _) in enumerate(dense)}
    return sorted(scores.items(), key=lambda p: (-p[1], dense_rank.get(p[0], len(dense)), p[0]))
