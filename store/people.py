"""The people of a conversation, rather than name strings.

A chat records who wrote each message under one name (an account name, a full name) while
everyone, and every question, may call them another: the name they introduced themselves with
("btw everyone calls me Jo", "I'm Katie"), the names the other person addresses them by ("Thanks
Jo!", "How about you Jo?"), their first name, a misspelling ("Joe", "Katy"). A small registry per
memory space (`learn` folds each message into it; `people` reads it back) maps those names to
the recorded speaker, and `resolve` finds the people a query names through it: exactly, or, for
a capitalised word no message contains, by a spelling close to one of their names
(`sounds_alike`).

The registry is plain data (JSON), `{"people": {recorded name: {"introduced": {name: count},
"addressed": {name: count}}}}`; a name the other person used to address someone counts once they
used it ADDRESSED_MIN times (one "Thanks Mom!" does not rename anyone)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from store.names import addressed, named

ADDRESSED_MIN = 2  # times a name must address someone before it is one of theirs
# the lead words in any case ("im", "I'm"), the name capitalised: "I'm allergic" introduces no one,
# nor "Her name's Coco" (a bare "Name's Jo" does)
_INTRODUCTION = re.compile(
    r"(?:\b(?i:i'?m|i am|call me|calls me|my name is|my name's|(?<![a-z] )name's|known as|go by)\s+)([A-Z][\w'’-]*)"
)
_WORD = re.compile(r"(?<![\w'’-])[A-Z][a-z]+(?:[A-Z][a-z]+)?(?=['’]s\b|(?![\w'’-]))")
# Capitalised words that are never a person's name in a chat ("Thanks", "Omg", days, months).
# fmt: off
_NOT_NAMES = frozenset([
    "i", "im", "i'm", "ok", "okay", "omg", "lol", "lmao", "haha", "yes", "yeah", "yep", "no",
    "nope", "nah", "hey", "hi", "hello", "thanks", "thank", "wow", "oh", "aw", "aww", "good",
    "great", "love", "miss", "night", "morning", "bye", "sure", "so", "very", "just", "really",
    "same", "true", "wait", "what", "why", "how", "when", "where", "who", "which", "congrats",
    "congratulations", "happy", "sorry", "please", "well", "also", "and", "but", "the", "a", "an",
    "it", "this", "that", "tbh", "btw", "monday", "tuesday", "wednesday", "thursday", "friday",
    "saturday", "sunday", "january", "february", "march", "april", "may", "june", "july", "august",
    "september", "october", "november", "december", "god", "dude", "bro", "babe", "mate", "hun",
    # words that open a sentence before a comma ("Cool, see you then", "Plus, it was cheap")
    "cool", "nice", "awesome", "amazing", "sweet", "perfect", "alright", "right", "agreed",
    "definitely", "absolutely", "totally", "exactly", "indeed", "honestly", "seriously", "actually",
    "anyway", "anyways", "plus", "besides", "cheers", "yup", "yum", "woah", "whoa", "ah",
    "hmm", "um", "uh", "anytime", "ttyl", "man", "you", "together", "remember", "later", "lately",
    "recently", "yesterday", "today", "tonight", "tomorrow", "hopefully", "thankfully", "luckily",
    "unfortunately", "sadly", "fortunately", "interesting", "fair", "gotcha", "welcome", "ugh",
    "ha", "yea", "however", "enjoy", "still", "now", "agree", "woohoo", "yay", "ooh", "oops",
    "hooray", "mm", "mmm", "yess", "ikr", "omw",
    # interjections that open a sentence ("Phew, glad it worked out", "Oof, that's tough")
    "phew", "oof", "ouch", "yikes", "eek", "geez", "jeez", "gosh", "dang", "damn", "bummer",
    "impressive", "brilliant", "fantastic", "wonderful", "incredible", "beautiful", "lovely",
    "excellent", "bravo", "aha", "ahh",
    # languages and nationalities ("learning Spanish")
    "english", "spanish", "french", "german", "italian", "portuguese", "chinese", "japanese",
    "korean", "russian", "arabic", "hindi", "dutch", "greek", "swedish", "polish", "turkish",
])
# fmt: on


def _not_name(word: str) -> bool:
    """Whether a capitalised word is one of _NOT_NAMES, typed with letters held down as people
    do: a letter three times or more counted once or twice ("Awww", "Soooo"), one typed twice
    counted once in a word of four letters or more ("Thaanks"; "Ann" stays a name), or, in a word
    of five letters or more, two letters swapped ("Thnaks")."""
    lower = word.lower()
    held = {lower, re.sub(r"(.)\1{2,}", r"\1", lower), re.sub(r"(.)\1{2,}", r"\1\1", lower)}
    held |= {once for form in held if len(once := re.sub(r"(.)\1", r"\1", form)) >= 4}
    if len(lower) >= 5:
        held |= {lower[:i] + lower[i + 1] + lower[i] + lower[i + 2 :] for i in range(len(lower) - 1)}
    return bool(held & _NOT_NAMES)


@dataclass(frozen=True)
class Person:
    """A recorded speaker, the other names they go by and the names they were addressed by
    fewer than ADDRESSED_MIN times (`seldom`: not names of theirs, but no sign of someone else
    either)."""

    name: str
    aliases: frozenset[str]
    seldom: frozenset[str] = frozenset()

    @property
    def names(self) -> frozenset[str]:
        return self.aliases | {self.name}


def introductions(text: str) -> list[str]:
    """The names a message introduces its writer by ("I'm Katie btw", "call me Shiv")."""
    return [m.group(1) for m in _INTRODUCTION.finditer(text) if not _not_name(m.group(1))]


def vocatives(text: str) -> list[str]:
    """The capitalised words a message says to someone ("Thanks Jo!", "How about you Jo?",
    "Looks incredible Jo."; `store.names.addressed`)."""
    return [
        m.group(0)
        for m in _WORD.finditer(text)
        if not _not_name(m.group(0)) and addressed(text, m) and not text[m.end() :].startswith(":")
    ]


def learn(registry: dict, speaker: str | None, text: str, speakers: Iterable[str]) -> bool:
    """Fold one message of `speaker` into `registry` (in place): the names it introduces its
    writer by, and, when the conversation has exactly one other speaker (of `speakers`, the
    recorded names), the names it addresses them by. Returns whether anything changed."""
    if not speaker:
        return False
    people = registry.setdefault("people", {})
    changed = False
    for name in introductions(text):
        if name != speaker:
            counts = people.setdefault(speaker, {}).setdefault("introduced", {})
            counts[name] = counts.get(name, 0) + 1
            changed = True
    others = {s for s in speakers if s and s != speaker}
    if len(others) == 1:
        (other,) = others
        for name in vocatives(text):
            if name not in (other, speaker):
                counts = people.setdefault(other, {}).setdefault("addressed", {})
                counts[name] = counts.get(name, 0) + 1
                changed = True
    return changed


def first_name(name: str) -> str | None:
    """The first word of a recorded full name ("Joanna Whitfield" -> "Joanna"), when it looks
    like a name."""
    parts = name.split()
    return parts[0] if len(parts) > 1 and parts[0][:1].isupper() and parts[0].isalpha() else None


def people(speakers: Iterable[str], registry: dict | None) -> list[Person]:
    """The recorded `speakers` with the names they go by: their first name, the names they
    introduced themselves with, those the other person addressed them by at least ADDRESSED_MIN
    times. A name two people share belongs to neither."""
    found = []
    for speaker in sorted(set(speakers)):
        entry = ((registry or {}).get("people") or {}).get(speaker) or {}
        aliases = {n for n in entry.get("introduced") or {} if not _not_name(n)}  # learned before a word was listed
        aliases |= {
            n for n, count in (entry.get("addressed") or {}).items() if count >= ADDRESSED_MIN and not _not_name(n)
        }
        if first := first_name(speaker):
            aliases.add(first)
        seldom = {n for n, count in (entry.get("addressed") or {}).items() if count < ADDRESSED_MIN}
        found.append((speaker, aliases, seldom))
    shared = {a for _, aliases, _ in found for a in aliases if sum(a in other for _, other, _ in found) > 1}
    recorded = {speaker for speaker, _, _ in found}
    return [
        Person(speaker, frozenset(aliases - shared - recorded), frozenset(seldom - recorded))
        for speaker, aliases, seldom in found
    ]


def _key(word: str) -> str:
    """A rough sound of a name: lower case, doubled letters once, y/ie/ey as i, ph as f, a final
    e dropped ("Katy", "Katie" -> "kati"; "Maggy", "Maggie" -> "magi")."""
    key = re.sub(r"(.)\1+", r"\1", word.lower())
    key = re.sub(r"ph", "f", key)
    key = re.sub(r"(ie|ey|y)$", "i", key)
    return key[:-1] if len(key) > 2 and key.endswith("e") else key


def _distance(a: str, b: str) -> int:
    """Edit distance with adjacent transpositions (optimal string alignment)."""
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


def sounds_alike(word: str, name: str) -> bool:
    """Whether `word` is plausibly a misspelling of `name` ("Joe"/"Jo", "Katy"/"Katie",
    "Dimitri"/"Dmitri", "Pirya"/"Priya"): their rough sounds (`_key`) one edit apart at most,
    two for names of seven letters or more, sharing the first letter."""
    if word.lower() == name.lower() or word[:1].lower() != name[:1].lower() or min(len(word), len(name)) < 2:
        return False
    a, b = _key(word), _key(name)
    return _distance(a, b) <= (2 if min(len(a), len(b)) >= 7 else 1)


def resolve(query: str, persons: Iterable[Person], known_words: set[str] | None = None) -> dict[str, frozenset[str]]:
    """The people `query` names: by any of their names (`store.names.named`), else by a
    capitalised word that sounds like one of them (`sounds_alike`) and is not one of
    `known_words` (words the conversation's messages hold, lower case: a name of its own, "Jon"
    beside "Joe") unless the messages used it to address that person ("thanks Markus!" to
    Marcus, once). A misspelling that could be two people names neither. Returns recorded name
    -> the names that stand for them (the misspelling the query holds included)."""
    persons = list(persons)
    found: dict[str, frozenset[str]] = {}
    strings: set[str] = set()
    for person in persons:
        hit = named(query, person.names)
        if hit:
            found[person.name] = person.names
            strings |= hit
    covered = {w.lower() for s in strings for w in s.split()}
    for word in sorted(set(_WORD.findall(query))):
        if word.lower() in covered or _not_name(word):
            continue
        close = [p for p in persons if any(sounds_alike(word, n) for name in p.names for n in name.split())]
        if word.lower() in (known_words or set()) and not any(word in p.seldom for p in close):
            continue
        if len(close) == 1:
            found[close[0].name] = found.get(close[0].name, close[0].names) | {word}
    return found


def candidates(query: str, persons: Iterable[Person]) -> set[str]:
    """The capitalised words of `query` that would name someone only by their spelling: the
    words whose presence in the messages `resolve` needs to know (`known_words`)."""
    persons = list(persons)
    exact = {w.lower() for p in persons for name in named(query, p.names) for w in name.split()}
    return {
        word
        for word in _WORD.findall(query)
        if word.lower() not in exact
        and not _not_name(word)
        and any(sounds_alike(word, n) for p in persons for name in p.names for n in name.split())
    }


SPEAKER_MIN = 3  # lines a "Name: words" prefix must open before it counts as a speaker of a log
LOG_SHARE = 0.5  # share of a knowledge base's lines its speakers' lines must make for it to be a chat log
_LINE = re.compile(r"^([^\n:]{1,40}):[ \t]+(.+)$", re.M)
# Prefixes of "Label: words" lines in documents (FAQs, notes, letters, recipes): never a speaker.
# fmt: off
_LABELS = frozenset([
    "q", "a", "question", "questions", "answer", "answers", "note", "notes", "nb", "ps", "tip",
    "tips", "hint", "warning", "caution", "important", "example", "examples", "step", "steps",
    "address", "phone", "tel", "mobile", "fax", "email", "e-mail", "web", "website", "url", "link",
    "date", "time", "when", "where", "subject", "from", "to", "cc", "bcc", "re", "source",
    "sources", "summary", "title", "author", "tags", "category", "status", "result", "results",
    "input", "output", "error", "info", "update", "edit", "faq", "price", "cost", "location",
    "hours", "ingredients", "method", "definition", "response", "reply", "solution", "problem",
    "issue", "fix", "cause", "reason", "goal", "objective", "pros", "cons", "usage", "returns",
    "args", "arguments", "parameters", "description", "name", "type", "version", "license",
    "copyright", "see also", "todo", "done", "yes", "no", "total", "topic", "chapter", "section",
    "part", "table", "figure", "fig", "key", "value", "comment", "comments", "remarks", "details",
])
# fmt: on


def speaker_like(prefix: str) -> bool:
    """Whether the prefix of a "Prefix: words" line can name who said it: not a document's label
    ("Q", "A", "Note", "Step 2", "Q1"), at most three words, opening with a letter."""
    words = prefix.split()
    if not words or len(words) > 3 or not prefix[:1].isalpha() or len(prefix) < 2:
        return False
    if re.fullmatch(r"[A-Za-z]\d+", prefix):
        return False
    return prefix.lower() not in _LABELS and words[0].lower() not in _LABELS


def learn_lines(registry: dict, text: str) -> bool:
    """Fold a chat log's text into `registry` (in place): each line "Name: words" is a message
    of Name (`learn`); a prefix counts as a speaker once it opened SPEAKER_MIN lines (a log's
    "Note:" or "Address:" does not) and when it looks like a name (`speaker_like`: a FAQ's "Q:"
    and "A:" never do). Every non-empty line is counted (`lines`), so that a knowledge base is a
    chat log only when its speakers' lines make most of it (`recorded_speakers`). Returns whether
    the text held a speaker's line."""
    counts = registry.setdefault("speakers", {})
    registry["lines"] = int(registry.get("lines") or 0) + sum(1 for line in text.splitlines() if line.strip())
    spoken = False
    for match in _LINE.finditer(text):
        speaker, words = match.group(1).strip(), match.group(2)
        if not speaker_like(speaker):
            continue
        counts[speaker] = counts.get(speaker, 0) + 1
        spoken = True
        learn(registry, speaker, words, recorded_speakers(registry, share=0.0) | {speaker})
    return spoken


def recorded_speakers(registry: dict | None, share: float = LOG_SHARE) -> set[str]:
    """The speakers of a registry learnt from logs (`learn_lines`): the prefixes that opened
    SPEAKER_MIN lines or more, when their lines make at least `share` of all the lines learnt
    (a registry without a line count, written before it was kept, is taken as a log)."""
    registry = registry or {}
    found = {name: count for name, count in (registry.get("speakers") or {}).items() if count >= SPEAKER_MIN}
    total = registry.get("lines")
    if total and sum(found.values()) < share * total:
        return set()
    return set(found)
