"""The in-process keyword ranking (Okapi BM25) of the in-process backend (store/backend.py) (InMemoryStore
in unit tests and evals). Production ranks in Postgres (store/sql/knowledge.py `KB_KEYWORD_SQL`), which
the integration tests check; both are Okapi BM25, but this one tokenizes with a regex and an
English stopword list and measures lengths in tokens, while Postgres stems (KB_TEXT_SEARCH_CONFIG)
and measures lengths in characters, so scores differ and rankings can (see docs/knowledge.md)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

BM25_K1 = 1.2
BM25_B = 0.75

_TOKEN = re.compile(r"\w+")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without English stopwords (the in-process BM25 tokenizer)."""
    return [token for token in _TOKEN.findall(text.lower()) if token not in STOPWORDS]


def bm25_rank(
    query: str, documents: Sequence[tuple[str, str]], *, k1: float = BM25_K1, b: float = BM25_B
) -> list[tuple[str, float]]:
    """Okapi BM25 of (id, text) documents for `query`, best first, as a share of the query's
    ceiling (the sum over its terms of idf * (k1 + 1), as in store/sql/base.py BM25_TERMS_SQL);
    documents matching no term are left out."""
    terms = set(tokenize(query))
    if not terms or not documents:
        return []
    counts = [(doc_id, Counter(tokenize(text))) for doc_id, text in documents]
    lengths = [sum(c.values()) for _, c in counts]
    average = (sum(lengths) / len(lengths)) or 1.0
    frequency = Counter(term for _, c in counts for term in terms if term in c)
    n = len(counts)
    idf = {t: math.log(1 + (n - frequency[t] + 0.5) / (frequency[t] + 0.5)) for t in terms}
    ceiling = sum(idf.values()) * (k1 + 1)
    scored = []
    for (doc_id, c), length in zip(counts, lengths, strict=False):
        score = sum(idf[t] * c[t] * (k1 + 1) / (c[t] + k1 * (1 - b + b * length / average)) for t in terms if t in c)
        if score > 0:
            scored.append((doc_id, score / ceiling))
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored
