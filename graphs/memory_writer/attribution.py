"""Who an extracted fact is about: profile fields hold the user's own facts only.

A small model asked for profile fields tends to file whatever a turn states: "My sister Ana is a
dentist in Madrid." came back as the user's `occupation: dentist`, `city: Madrid`, `name: Ana`.
The extraction therefore says who each memory is about (`about`) and lists the other people the
turn speaks of (`people`); then a deterministic check, `attribute_profile`, keeps a profile value
only when the user's own words do not give it to someone else:

- each sentence of the user's message that holds the value (whole words, any case) is read for
  who the value's clause speaks of (clauses end at `,;:` and at words such as "and", "but",
  "where", "who"): its first mention before the value, else its first after it; a clause with
  none defers to the nearest mention in the sentence. A first-person word ("I", "I'm", "me", "we",
  ...) is the user; a third-person pronoun ("she", "his", ...), a word of a person the extraction
  names (in `people` or an `about`: "sister", "Ana") or a relative after a possessive ("my
  sister", "our neighbour") is someone else;
- a value some sentence gives to the user is kept; a value the sentences give only to other
  people is not the user's;
- a value the user's words do not hold verbatim (the model rephrased it) is judged by the
  extraction's own memories: not the user's when it appears only in memories about someone else.

A memory the model marks as the user's whose text is about someone else ("The user's sister Ana
is a dentist", `about: "user"`) is saved as about that person (`text_subject`).

A value that is not the user's never becomes a profile field; unless a memory about that person
already holds it, the sentence it came from is saved as a memory about them.
The word lists are English; in other languages only the people the extraction names count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

USER = "user"
"""The `about` of a memory about the user themself."""

_USER_LABELS = {"user", "the user", "me", "i", "myself", "self", "the user themself", "the user themselves"}
FIRST_PERSON = {"i", "i'm", "im", "i've", "i'd", "i'll", "me", "myself", "we", "we're", "we've", "us", "ourselves"}
THIRD_PERSON = {"he", "she", "they", "him", "her", "his", "hers", "them", "their", "theirs", "he's", "she's", "they're"}
# Words of a person's label that do not identify them ("the user's sister" -> "sister").
_LABEL_FILLER = {"the", "a", "an", "my", "our", "your", "user", "user's", "users", "of", "and", "s", "named", "called"}

# Relatives and other people a user speaks of as "my ..." / "our ...".
RELATIVES = {
    "sister", "brother", "sibling", "mother", "mom", "mum", "father", "dad", "parent", "parents",
    "son", "daughter", "child", "kid", "kids", "children", "wife", "husband", "spouse", "partner",
    "boyfriend", "girlfriend", "fiance", "fiancé", "fiancee", "fiancée", "friend", "colleague",
    "coworker", "co-worker", "boss", "manager", "neighbour", "neighbor", "roommate", "flatmate",
    "cousin", "aunt", "uncle", "niece", "nephew", "grandmother", "grandfather", "grandma",
    "grandpa", "granddaughter", "grandson", "stepmother", "stepfather", "landlord", "teacher",
}  # fmt: skip
POSSESSIVES = {"my", "our", "his", "her", "their"}
CLAUSE_WORDS = {
    "and",
    "but",
    "while",
    "whereas",
    "although",
    "though",
    "because",
    "so",
    "where",
    "who",
    "which",
    "whose",
    "whom",
    "when",
}

_WORD = re.compile(r"[\w'’-]+")
_TOKEN = re.compile(r"[\w'’-]+|[,;:()]")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


def is_user(about: str | None, names: Iterable[str] = ()) -> bool:
    """Whether an `about` label means the user: empty, "user", "me", ..., or one of `names`
    (the user's name and id)."""
    label = " ".join((about or "").casefold().split())
    return not label or label in _USER_LABELS or label in {n.casefold() for n in names if n}


def _word(token: str) -> str:
    word = token.casefold().replace("’", "'")
    return word[:-2] if word.endswith("'s") and word not in THIRD_PERSON else word


def label_words(label: str) -> set[str]:
    """The words that identify a person in text: "the user's sister Ana" -> {"sister", "ana"}."""
    return {w for w in (_word(t) for t in _WORD.findall(label)) if w not in _LABEL_FILLER and w not in FIRST_PERSON}


@dataclass(frozen=True)
class Attribution:
    """Who the user's words give a profile value to: `about` (USER or a person's label) and the
    sentence that says so (None when judged from the extraction's memories)."""

    about: str
    sentence: str | None = None


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _mentions(sentence: str, people: Mapping[str, str]) -> list[tuple[int, int, int, str]]:
    """(start, end, clause, who) of every person the sentence mentions, `who` USER, a person's
    label, or "" for a pronoun naming no one; plus (start, end, clause, "-") for other words."""
    found: list[tuple[int, int, int, str]] = []
    clause, previous = 0, ""
    for match in _TOKEN.finditer(sentence):
        word = _word(match.group(0))
        if word in ",;:()" or word in CLAUSE_WORDS:
            clause += 1
            previous = word
            continue
        if word in FIRST_PERSON:
            who = USER
        elif word in people:
            who = people[word]
        elif word in RELATIVES and previous in POSSESSIVES:
            who = word
        elif word in THIRD_PERSON and word not in POSSESSIVES | {"her"}:
            who = ""
        elif word in POSSESSIVES - {"my", "our"}:
            who = ""  # "his job", "their city"
        else:
            who = "-"
        found.append((match.start(), match.end(), clause, who))
        previous = word
    return found


def _speaks_of(mentions: list[tuple[int, int, int, str]], start: int, end: int) -> str | None:
    """Who the clause of text[start:end] speaks of (see the module docstring), or None."""
    clause = next((c for s, e, c, _ in mentions if e > start), None)
    people = [(s, e, c, who) for s, e, c, who in mentions if who != "-" and not (s >= start and e <= end)]
    in_clause = [m for m in people if m[2] == clause]
    before = [m for m in in_clause if m[1] <= start]
    after = [m for m in in_clause if m[0] >= end]
    if before:
        return before[0][3]
    if after:
        return after[0][3]
    nearest_before = [m for m in people if m[1] <= start]
    nearest_after = [m for m in people if m[0] >= end]
    if nearest_before:
        return nearest_before[-1][3]
    if nearest_after:
        return nearest_after[0][3]
    return None


def attribute(value: str, user_text: str, people: Sequence[str]) -> Attribution | None:
    """Who the user's words give `value` to (see the module docstring); None when they do not
    hold it or name no one near it."""
    if not value.strip():
        return None
    pattern = re.compile(r"(?<![\w])" + re.escape(value.strip()) + r"(?![\w])", re.IGNORECASE)
    words = {word: label for label in people for word in label_words(label)}
    others: list[Attribution] = []
    for sentence in _sentences(user_text):
        mentions = _mentions(sentence, words)
        for match in pattern.finditer(sentence):
            found = _speaks_of(mentions, match.start(), match.end())
            if found == USER:
                return Attribution(USER, sentence)
            if found is not None:
                who = found or _nearest_person(sentence, user_text, people)
                others.append(Attribution(_label(who, people), sentence))
    return others[0] if others else None


def _label(who: str, people: Sequence[str]) -> str:
    """A relative's word as the extraction names them when it does ("sister" -> "sister Ana")."""
    return next((label for label in people if who in label_words(label)), who)


def text_subject(text: str, people: Sequence[str]) -> str | None:
    """Whom a memory text written in the third person is about, by its first mention: "The user
    ..." the user (USER); "The user's sister Ana ...", "Ana ..." that person; None when it names
    neither ("The user's dog is called Biscuit")."""
    words = {word: label for label in people for word in label_words(label)}
    previous = ""
    for match in _TOKEN.finditer(text):
        raw = match.group(0).casefold().replace("’", "'")
        if raw in ("user's", "users'"):
            previous = "my"  # the user's relatives, as the user says "my ..."
            continue
        word = _word(raw)
        if word == USER or word in FIRST_PERSON:
            return USER
        if word in words:
            return words[word]
        if word in RELATIVES and previous in POSSESSIVES:
            return _label(word, people)
        previous = word
    return None


def _nearest_person(sentence: str, user_text: str, people: Sequence[str]) -> str:
    """The person a bare pronoun most likely stands for: the last named before the sentence."""
    before = user_text[: user_text.find(sentence)] if sentence in user_text else ""
    best, where = "another person", -1
    for label in people:
        for word in label_words(label):
            for match in re.finditer(r"(?<![\w])" + re.escape(word) + r"(?![\w])", before, re.IGNORECASE):
                if match.start() > where:
                    best, where = label, match.start()
    return best


def attribute_profile(
    fields: Mapping[str, str],
    user_text: str,
    people: Sequence[str],
    memories: Sequence[tuple[str, str]],
) -> tuple[dict[str, str], dict[str, Attribution]]:
    """Split profile `fields` into the user's own and the others' (field -> Attribution).

    `people` are the other people the extraction names, `memories` its (about, text) pairs with
    `about` USER for the user's own.
    """
    own: dict[str, str] = {}
    others: dict[str, Attribution] = {}
    for field, value in fields.items():
        found = attribute(value, user_text, people) if value else None
        if found is None and value:
            holders = [about for about, text in memories if value.casefold() in text.casefold()]
            if holders and USER not in holders:
                found = Attribution(holders[0])
        if found is not None and found.about != USER:
            others[field] = found
        else:
            own[field] = value
    return own, others
