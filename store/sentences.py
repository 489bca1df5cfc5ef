"""Sentences of a text: the splitter the knowledge graph's extractor reads chunks with, and the
passages a long message is also searched by. Line breaks count as users write them: a blank
line or a heading line ends a sentence, a line break inside wrapped prose does not.

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


HEADING_MAX_WORDS = 10
# A line ending so goes on, or ends a sentence: not a heading.
_NOT_HEADING_END = re.compile(r"[.!?,;:(\[{/&+=\-–—]$")
_JOINING_WORDS = {
    "a",
    "an",
    "the",
    "of",
    "and",
    "or",
    "nor",
    "but",
    "to",
    "in",
    "on",
    "at",
    "by",
    "for",
    "with",
    "from",
}
_JOINING_WORDS |= {"as", "that", "which", "who", "is", "are", "was", "were", "his", "her", "its", "their", "my", "our"}


def is_heading(line: str, following: str) -> bool:
    """Whether `line`, followed by the line `following`, is a heading: a markdown heading, or a
    short line (at most HEADING_MAX_WORDS words) that neither ends a sentence nor runs on into the
    next line (no closing or joining punctuation, no last word such as "of" or "the"), followed by
    a line that starts as a sentence or an item does. A line of hard-wrapped prose is longer, or
    ends mid-phrase, or is followed by its sentence's lowercase continuation."""
    text = line.strip()
    if text.startswith("#"):
        return bool(text.lstrip("#").strip())
    words = text.split()
    if not words or len(words) > HEADING_MAX_WORDS or _NOT_HEADING_END.search(text):
        return False
    if words[-1].lower() in _JOINING_WORDS:
        return False
    start = following.lstrip()[:1]
    return bool(start) and (start.isupper() or start.isdigit() or start in "\"'“‘(#*-•")


def blocks(text: str) -> list[str]:
    """`text` cut at blank lines and after heading lines (`is_heading`): no sentence runs across
    them. A heading is a block of its own (markdown's `#` marks dropped); other line breaks stay."""
    lines = text.split("\n")
    found: list[str] = []
    current: list[str] = []

    def close() -> None:
        if any(line.strip() for line in current):
            found.append("\n".join(current).strip())
        current.clear()

    for index, line in enumerate(lines):
        if not line.strip():
            close()
            continue
        following = next((later for later in lines[index + 1 :] if later.strip()), "")
        if is_heading(line, following):
            close()
            found.append(line.strip().lstrip("#").strip())
            continue
        current.append(line)
    close()
    return found


def heading_title(text: str) -> str | None:
    """The heading line a text opens with (`is_heading`), when more text follows it, else None."""
    lines = [line for line in text.strip().split("\n") if line.strip()]
    if len(lines) >= 2 and is_heading(lines[0], lines[1]):
        return lines[0].strip().lstrip("#").strip()
    return None


def sentences(text: str) -> list[str]:
    """`text` split into sentences, not after an initial or an abbreviation; a blank line and a
    heading line (`blocks`) always end one ("Teutberga\nTeutberga (died 875) was ..." is two)."""
    found: list[str] = []
    for block in blocks(text):
        first = len(found)
        for piece in _SENTENCE.split(block):
            if len(found) > first and _ABBREVIATION.search(found[-1]):
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
    return [labelled(piece, speaker) for piece in pieces]


def labelled(text: str, who: str | None) -> str:
    """`text` opening with "<who>:", as it does already or with the label put before it (no
    label without `who`)."""
    return text if not who or text.startswith(f"{who}:") else f"{who}: {text}"


EXCHANGE_QUESTION_CHARS = 300  # of the question a reply answers, kept in the reply's exchange passage (its end)


def exchange(question: str, asker: str | None, reply: str, replier: str | None) -> str | None:
    """The passage a reply is also searched by: the message it answers and the reply, each
    labelled with who wrote it ("Melanie: That bowl is awesome! What gave you the idea for all
    the colors? Caroline: I'm obsessed with those..."), when `question` asks one ("?") and was
    written by someone else; None otherwise. A reply shares few words with what it answers ("I
    painted this after I visited a LGBTQ center" after "What inspired you?"): a question about
    it is put in the asker's words, which this passage holds beside the answer. Only the end of
    a long question (EXCHANGE_QUESTION_CHARS) is kept: a question closes the message."""
    question, reply = question.strip(), reply.strip()
    if "?" not in question or not reply or not asker or not replier or asker == replier:
        return None
    if len(question) > EXCHANGE_QUESTION_CHARS:
        cut = question[-EXCHANGE_QUESTION_CHARS:]
        question = cut[cut.find(" ") + 1 :] if " " in cut else cut
    return f"{labelled(question, asker)} {labelled(reply, replier)}"
