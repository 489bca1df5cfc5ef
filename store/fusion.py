"""Score fusion shared by hybrid memory search (store/memory/hybrid.py) and hybrid knowledge-base
search (store/knowledge/search.py).

`fuse` combines a dense list (cosine similarities) and a keyword list (BM25 scores) by a
score-normalised weighted sum: each list's scores are divided by that list's best score, so both
signals span [0, 1] whatever their scale, and a document missing from a list gets 0 from it.
Unlike reciprocal rank fusion it keeps how far apart the scores are, so a weak signal's flat tail
cannot outvote a strong signal's clear winner; weight 0 or 1 reproduces one signal exactly. An
optional third signal adds a constant to chosen documents (memories written in the time range a
query names).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def fuse(
    dense: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    *,
    keyword_weight: float,
    in_range: Iterable[str] = (),
    time_weight: float = 0.0,
) -> list[tuple[str, float]]:
    """Weighted sum of max-normalised scores, best first (ties: dense order, then id):
    `(1 - keyword_weight) * dense/max(dense) + keyword_weight * keyword/max(keyword)
    + time_weight * (id in in_range)`. Weight 0 keeps the dense order; 1 the keyword order."""
    scores: dict[str, float] = {}
    for ranking, weight in ((dense, 1.0 - keyword_weight), (keyword, keyword_weight)):
        best = max((score for _, score in ranking), default=0.0)
        if best <= 0 or weight <= 0:
            for doc_id, _ in ranking:
                scores.setdefault(doc_id, 0.0)
            continue
        for doc_id, score in ranking:
            scores[doc_id] = scores.get(doc_id, 0.0) + weight * max(score, 0.0) / best
    if time_weight:
        for doc_id in in_range:
            scores[doc_id] = scores.get(doc_id, 0.0) + time_weight
    dense_rank = {doc_id: rank for rank, (doc_id, _) in enumerate(dense)}
    return sorted(scores.items(), key=lambda p: (-p[1], dense_rank.get(p[0], len(dense)), p[0]))
