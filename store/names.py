"""People named in a query. Dense search of a conversation log matches a name in the query with
every message that carries it ("Maya: Haha, classic.") rather than with what the query asks
about, so the searches that know who is speaking (memory speakers, names most of a knowledge
base's chunks hold) embed the query with those names turned into pronouns and rank the named
person's messages up by other means (a speaker bonus, full-text search)."""

from __future__ import annotations

import re
from collections.abc import Iterable

_BOUNDARY_BEFORE = r"(?<![\w-])"
_BOUNDARY_AFTER = r"(?![\w-])"


def _name_pattern(name: str) -> str:
    return _BOUNDARY_BEFORE + re.escape(name) + _BOUNDARY_AFTER


def named(query: str, names: Iterable[str]) -> set[str]:
    """The names the query contains as whole words, any case ("what did maya say" names Maya)."""
    return {name for name in names if name and re.search(_name_pattern(name), query, re.I)}


def without_names(query: str, names: Iterable[str]) -> str:
    """`query` with each of `names` (whole words, any case) replaced by a pronoun: "Maya's" by
    "their", "Maya" by "they" ("What did Maya's dog eat?" -> "What did their dog eat?")."""
    for name in sorted(set(names), key=len, reverse=True):
        pattern = _BOUNDARY_BEFORE + re.escape(name)
        query = re.sub(pattern + r"['’]s" + _BOUNDARY_AFTER, "their", query, flags=re.I)
        query = re.sub(_name_pattern(name), "they", query, flags=re.I)
    return query


def capitalised_words(query: str) -> set[str]:
    """The capitalised words of `query` past its first word: the candidates for names."""
    words = re.findall(r"[\w’'-]+", query)
    return {re.sub(r"['’]s$", "", word) for word in words[1:] if word[:1].isupper()}
