"""The keyword floor of hybrid ranking (store/hybrid.py `rank`, `floor_hits`): plain keyword
search's hits that stand out keep a place among the first results, whatever the bonuses (names,
dates, neighbours) do to the rest (`with_keyword_floor`); and the word tests it reads a question
and a message with."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from store.bm25 import tokenize
from store.names import about, mentions

FLOOR_K = 5  # rank constant of `with_keyword_floor`: small, so that the first ranks of each list count
FLOOR_GAP = 1.5  # a keyword hit counts in `with_keyword_floor` when it scores this times ...
FLOOR_TAIL = 10  # ... the keyword list's score at this rank (`standouts`) ...
FLOOR_TOP = 0.67  # ... and this share of its first score
LIST_FLOOR = 1.0  # `with_keyword_floor`'s weight at least for a question listing several things (`floor_hits`)
ADDRESS_WORDS = 3  # words (beside names and little words) a message to someone needs to say more than hello
PREFIX = re.compile(r"^[^\n:]{1,40}:\s+")  # a chat line's "Name: "
# fmt: off
LITTLE = frozenset([
    "you", "your", "you're", "youre", "re", "u", "ur", "i", "i'm", "im", "me", "my", "so", "of",
    "the", "a", "an", "to", "and", "or", "at", "in", "on", "is", "are", "be", "it", "that", "this",
    "how", "about", "what", "was", "so", "too", "very", "just"
])
# fmt: on


def small_talk_to(text: str, names: set[str]) -> bool:
    """Whether `text` is small talk said to one of `names`: it addresses them (`store.names`:
    "love you Tibo", "gn Tibo", "u ok Tibo?"), names them no other way, and says fewer than
    ADDRESS_WORDS words beside little words and their names (past a "Name: " prefix)."""
    said = PREFIX.sub("", text, count=1)
    if not names or not mentions(said, names) or about(said, names):
        return False
    skip = {word.lower() for name in names for word in name.split()}
    words = [w for w in re.findall(r"[\w'’]+", said.lower()) if w not in LITTLE and w not in skip]
    return len(words) < ADDRESS_WORDS


def standouts(
    ranked: list[tuple[str, float]], parts: Callable[[str], set[str]] | None = None, short: bool = False
) -> list[tuple[str, float]]:
    """The hits of a keyword list (best first, each text once) that stand out: scoring at least
    FLOOR_GAP times its FLOOR_TAIL-th score and FLOOR_TOP times the first score of their part of
    the question; none in a list shorter than FLOOR_TAIL (no tail to stand out from: a few
    passages share a paraphrased question's common words at all), unless `short`: such a list
    holds every message sharing a word of the query (the search asked for more), its tail
    scores 0 and its hits stand out by the first score alone. `floor_hits` asks for that when
    the query names people: their name bonus, earned by all their other messages, is what
    sinks the one message holding the question's rare word ("Which city have both Jean and John
    visited?": the one message holding "visited", by the other speaker, ranks 15th).
    A paraphrased question, or one whose words are in most messages (two people's names), gets a flat list of weak matches: none stand out from the
    tail. A question quoting one message gets one clear winner: the runners-up, far below it, are
    not lifted over the messages around that winner (the replies the neighbours bring in).

    Without `parts` the whole question is one part (its first score). With `parts` (key -> the
    question's words the hit holds; for a question listing several things, `lists_several`), a
    hit's part is that of the hits above it sharing one of its words: a question listing them in
    their own words ("What did Jo say about the camper van, the conference, the long weekend and
    the ski week?") has a first score per thing, and the message holding only "conference" stands
    out beside the one holding "camper van", which the whole question's
    first score would leave out (a share of a long question's words scores a share of its BM25).
    The tail is then at most the first score of a hit holding none of the question's words (a
    message matching its names only, "Jo: lol"): the FLOOR_TAIL-th hit may hold one of them
    already, a common one ("work" in "how was work?") of a question listing many."""
    if not ranked or (len(ranked) < FLOOR_TAIL and not short):
        return []
    tail, top = (ranked[FLOOR_TAIL - 1][1] if len(ranked) >= FLOOR_TAIL else 0.0), ranked[0][1]
    if parts:
        tail = min(tail, next((score for key, score in ranked if not parts(key)), tail))
    above: list[tuple[float, set[str]]] = []
    found = []
    for key, score in ranked:
        words = parts(key) if parts else set()
        first = max((s for s, held in above if held & words), default=score) if words else top
        if score >= FLOOR_GAP * tail and score >= FLOOR_TOP * first:
            found.append((key, score))
        above.append((score, words))
    return found


def held_words(text: str, words: set[str]) -> set[str]:
    """The `words` (lower case) that `text` holds in some form (`same_stem`)."""
    tokens = set(tokenize(text))
    return {word for word in words if any(same_stem(word, token) for token in tokens)}


def lists_several(query: str) -> bool:
    """Whether a question lists several things: two commas or more ("What did Jo say about back
    pain, hay fever, insomnia and a sprained wrist?"). Only then do the question's words form
    parts of their own (`standouts`): a question about one thing ("What did Jo say to Sam about
    the grand opening?") has framing words ("say") a message holds without answering it."""
    return query.count(",") >= 2


def asked_words(query: str, names: set[str]) -> set[str]:
    """What `query` asks about in words: its words (`store.bm25.tokenize`: lower case, no stop
    words) beside the `names` it holds."""
    held = {word for name in names for word in tokenize(name)}
    return {word for word in tokenize(query) if word not in held and word not in LITTLE}


def shares_words(text: str, words: set[str]) -> bool:
    """Whether `text` holds one of `words` or a word of the same stem, roughly: sharing its
    first four letters or the whole of a shorter word ("dog" / "dogs", "picked" / "picking")."""
    return any(same_stem(word, other) for other in set(tokenize(text)) for word in words)


def same_stem(a: str, b: str) -> bool:
    """Whether two lower-case words are one word, roughly: equal, one the other plus "s", or
    sharing their first four letters."""
    return a == b or a + "s" == b or b + "s" == a or (len(a) >= 4 and len(b) >= 4 and a[:4] == b[:4])


def with_keyword_floor(
    fused: list[tuple[str, float]], keyword: Sequence[str], weight: float
) -> list[tuple[str, float]]:
    """`fused` (the bonus-ranked list) and `keyword` (plain keyword search's order) by weighted
    reciprocal rank fusion: 1 / (FLOOR_K + rank) from `fused`, `weight` / (FLOOR_K + rank) from
    `keyword`, best first (ties in the fused order). Each bonus
    (names, dates, neighbours) helps on its kind of question and can hurt on another: a person's
    small talk earning their name bonus, or the neighbours of one hit, can fill the first results
    and push out the message holding the question's own words, which keyword search ranks first.
    With the fusion it climbs back among them (a keyword hit the bonuses left at rank 20 comes
    back near rank 6), while the bonus-ranked order stands for the rest: neither sinks the other.
    The scores stay those of the fused list, place by place (a hit moved up takes the score of
    the place it takes), so a ranking the floor leaves alone keeps its scores."""
    scores = {key: 1.0 / (FLOOR_K + rank) for rank, (key, _) in enumerate(fused, 1)}
    for rank, key in enumerate(keyword, 1):
        if key in scores:
            scores[key] += weight / (FLOOR_K + rank)
    order = {key: index for index, (key, _) in enumerate(fused)}
    keys = sorted(scores, key=lambda key: (-scores[key], order[key]))
    return [(key, score) for key, (_, score) in zip(keys, fused, strict=True)]
