"""Sentences of a text: the splitter the knowledge graph's extractor reads chunks with, and the
passages a long message is also searched by.

A chat message often says several things ("Hey! That's cool. I've been so stressed by the
tournament, but my turtles always cheer me up."); one vector of the whole message averages them
and matches a question about one of them weakly. `passages` gives such a message's sentences,
labelled with who said them, each stored as a vector of its own beside the whole text's, so the
message is found by its best sentence (the store keeps an item's best-scoring vector)."""

from __future__ import annotations

import re

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'“‘(A-Z0-9])")
# A period that ends an initial or a common abbreviation ("M. Ward", "St. Paul") ends no sentence.
_ABBREVIATION = re.compile(
    r"(?:\b[A-Z]|\b(?:St|Mt|Ft|Dr|Mr|Mrs|Ms|Jr|Sr|Inc|Co|Corp|Ltd|Bros|No|vs|Gen|Col|Lt|Capt|Sgt|Rev|Prof|Gov|Sen|Rep))\.$"
)
PASSAGE_MIN_WORDS = 4  # a shorter sentence ("Hey!", "That's cool.") joins the next one
MAX_PASSAGES = 8  # vectors per message beside the whole text's, at most


def sentences(text: str) -> list[str]:
    """`text` split into sentences, not after an initial or an abbreviation."""
    found: list[str] = []
    for piece in _SENTENCE.split(text):
        if found and _ABBREVIATION.search(found[-1]):
            found[-1] += " " + piece
        else:
            found.append(piece)
    return found


def passages(text: str, speaker: str | None = None) -> list[str]:
    """The sentences of `text` worth a vector of their own: a sentence of fewer than
    PASSAGE_MIN_WORDS words joins the next one (the last joins the one before), at most
    MAX_PASSAGES (the rest join the last); none when the text holds a single such sentence.
    With `speaker`, each passage that does not already start with "<speaker>:" is labelled so
    ("Nate: my turtles always cheer me up."): cut from its message, a sentence keeps who said it,
    as a chunk keeps its document's title (a bare "Anyway, how was your trip?" would match any
    question about trips)."""
    pieces: list[str] = []
    pending = ""
    for sentence in (s.strip() for s in sentences(text.strip())):
        if not sentence:
            continue
        sentence = f"{pending} {sentence}".strip()
        if len(sentence.split()) < PASSAGE_MIN_WORDS:
            pending = sentence
            continue
        pending = ""
        pieces.append(sentence)
    if pending:
        if pieces:
            pieces[-1] = f"{pieces[-1]} {pending}"
        else:
            pieces.append(pending)
    if len(pieces) > MAX_PASSAGES:
        pieces = [*pieces[: MAX_PASSAGES - 1], " ".join(pieces[MAX_PASSAGES - 1 :])]
    if len(pieces) < 2:
        return []
    label = f"{speaker}:" if speaker else ""
    return [piece if not label or piece.startswith(label) else f"{label} {piece}" for piece in pieces]
