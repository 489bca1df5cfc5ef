"""Score fusion of the hybrid pipeline (store/hybrid.py), for memories and knowledge bases.

`fuse` combines a dense list (cosine similarities) and a keyword list (BM25 scores) by a
score-normalised weighted sum: each list's scores are mapped to [0, 1] (min-max over the list by
default), so both signals count whatever their scale, and a document missing from a list gets 0
from it.
Unlike reciprocal rank fusion it keeps how far apart the scores are, so a weak signal's flat tail
cannot outvote a strong signal's clear winner; weight 0 or 1 reproduces one signal exactly.
Optional bonuses add a constant to chosen documents (memories or chunks dated in the time range a
query names, memories of a speaker the query names).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

FUSION_METHODS = ("minmax", "max", "rrf", "given")
RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = RRF_K, weights: Sequence[float] | None = None
) -> list[tuple[str, float]]:
    """Fuse ranked id lists: score(d) = sum over lists of weight / (k + rank of d), ranks from 1,
    weight 1 for every list unless `weights` gives one per list. Best first, ties by id."""
    scores: dict[str, float] = {}
    for index, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[index]
        for rank, doc_id in enumerate(ranking, 1):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def normalised(ranking: Sequence[tuple[str, float]], method: str) -> list[tuple[str, float]]:
    """One signal's scores mapped to [0, 1]: `minmax` (score - worst) / (best - worst) over the
    list (1.0 for all when they are equal), `max` score / best (non-positive best: all 0), `rrf`
    (RRF_K + 1) / (RRF_K + rank), rank from 1 (the reciprocal rank scaled so the first is 1),
    `given` the scores as they are, clipped to [0, 1] (already comparable across queries, as the
    knowledge base's keyword scores: a share of the query's BM25 ceiling)."""
    if not ranking:
        return []
    if method == "given":
        return [(doc_id, min(max(score, 0.0), 1.0)) for doc_id, score in ranking]
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
    bonus: Mapping[str, float] | None = None,
    method: str = "minmax",
    keyword_method: str | None = None,
) -> list[tuple[str, float]]:
    """Weighted sum of normalised scores (`normalised`), best first (ties: dense order, then id):
    `(1 - keyword_weight) * dense' + keyword_weight * keyword' + bonus.get(id, 0)`, a document
    missing from a list getting 0 from it; `keyword_method` normalises the keyword list another
    way than `method`. Weight 0 keeps the dense order, 1 the keyword order (then the dense order
    for the rest)."""
    scores: dict[str, float] = {}
    lists = ((dense, 1.0 - keyword_weight, method), (keyword, keyword_weight, keyword_method or method))
    for ranking, weight, how in lists:
        for doc_id, score in normalised(ranking, how):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight * score
    for doc_id, extra in (bonus or {}).items():
        if extra:
            scores[doc_id] = scores.get(doc_id, 0.0) + extra
    dense_rank = {doc_id: rank for rank, (doc_id, _) in enumerate(dense)}
    return sorted(scores.items(), key=lambda p: (-p[1], dense_rank.get(p[0], len(dense)), p[0]))


def distinct_texts(ranked: Sequence[tuple[str, float]], texts: Mapping[str, str | None]) -> list[tuple[str, float]]:
    """`ranked` with each text once, at its best rank (a chat log repeats "Haha, classic." on many
    days; ten copies of it would fill a top ten)."""
    seen: set[str | None] = set()
    kept = []
    for key, score in ranked:
        if texts.get(key) not in seen:
            seen.add(texts.get(key))
            kept.append((key, score))
    return kept
