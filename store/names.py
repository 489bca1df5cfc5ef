"""People named in a query. Dense search of a conversation log matches a name in the query with
every message that carries it ("Maya: Haha, classic.") rather than with what the query asks
about, so the searches that know who is speaking (memory speakers, names most of a knowledge
base's chunks hold) embed the query with those names turned into pronouns and rank the named
person's messages up by other means (a speaker bonus, full-text search). A text is about a
person when it names them other than to address them (`about`: "Thanks, Maya!" is said to
Maya)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

_BOUNDARY_BEFORE = r"(?<![\w-])"
_BOUNDARY_AFTER = r"(?![\w-])"


def _name_pattern(name: str) -> str:
    return _BOUNDARY_BEFORE + re.escape(name) + _BOUNDARY_AFTER


def _as_name(query: str) -> Callable[[re.Match[str], str], bool]:
    """Whether a match is a name: capitalised, or any case in a query typed all in lower case
    ("what was maya up to"), so a speaker called Will leaves "what will Tom do" alone; a name
    recorded in lower case that cannot be a short word (an account name: "kat_b92", "rlindqvist")
    counts as written."""
    lower = query == query.lower()
    return lambda match, name: (
        lower or match.group(0)[:1].isupper() or (match.group(0)[: len(name)] == name and _account(name))
    )


def _account(name: str) -> bool:
    """Whether a name recorded in lower case is an account name rather than a word: it holds a
    digit, an underscore or a period, or has six letters or more."""
    return name[:1].islower() and (bool(re.search(r"[\d_.]", name)) or len(name) >= 6)


def named(query: str, names: Iterable[str]) -> set[str]:
    """The names the query contains as whole words (see `_as_name`): "What did Maya say" and
    "what did maya say" name Maya."""
    is_name = _as_name(query)
    return {
        name for name in names if name and any(is_name(m, name) for m in re.finditer(_name_pattern(name), query, re.I))
    }


def without_names(query: str, names: Iterable[str]) -> str:
    """`query` with each of `names` (whole words, see `_as_name`) replaced by a pronoun: "Maya's"
    by "their", "Maya" by "they" ("What did Maya's dog eat?" -> "What did their dog eat?")."""
    is_name = _as_name(query)
    for name in sorted(set(names), key=len, reverse=True):
        for pattern, pronoun in ((re.escape(name) + r"['’]s", "their"), (re.escape(name), "they")):

            def replace(match: re.Match[str], pronoun: str = pronoun, name: str = name) -> str:
                return pronoun if is_name(match, name) else match.group(0)

            query = re.sub(_BOUNDARY_BEFORE + pattern + _BOUNDARY_AFTER, replace, query, flags=re.I)
    return query


def capitalised_words(query: str) -> set[str]:
    """The capitalised words of `query` past its first word: the candidates for names."""
    words = re.findall(r"[\w’'-]+", query)
    return {re.sub(r"['’]s$", "", word) for word in words[1:] if word[:1].isupper()}


_GREETING = re.compile(
    r"(?:^|[^\w-])(?:hey|hi|hiya|hello|thanks|thank you|congrats|congratulations|wow|oh|aw|yeah|yes|yep|"
    r"sure|ok|okay|bye|dear|go|good luck|love you|miss you|see you)\s*$",
    re.I,
)


# Words after which a name closing a sentence is what the sentence is about ("I went with Maya.",
# "tell Maya!") rather than said to its bearer ("Looks incredible Maya.", "How about you Maya?").
# fmt: off
_TAKES_OBJECT = frozenset([
    "with", "to", "for", "about", "from", "of", "and", "or", "nor", "by", "like", "than", "at",
    "on", "in", "into", "onto", "near", "behind", "without", "between", "met", "meet", "meets",
    "meeting", "saw", "see", "sees", "seen", "say", "says", "said", "told", "tell", "tells",
    "asked", "ask", "asks", "called", "call", "calls", "named", "name", "is", "was", "are", "were",
    "be", "been", "am", "visit", "visited", "visiting", "visits", "text", "texted", "email",
    "emailed", "phoned", "helped", "help", "hug", "hugged", "invited", "invite", "thank", "thanked",
    "love", "loves", "loved", "hate", "hates", "know", "knows", "knew", "married", "marry",
    "dating", "date", "dated", "ex", "my", "your", "his", "her", "our", "their", "the", "a", "an",
    # verbs whose object a pet, a book's author or a language is ("How did you come to have Susie?",
    # "a novel by Patrick Rothfuss", "learning Spanish?")
    "have", "has", "had", "got", "get", "gets", "adopt", "adopted", "groom", "groomed", "walk",
    "walked", "feed", "fed", "bring", "brought", "take", "took", "learn", "learning", "learned",
    "read", "reading", "watch", "watching", "watched", "speak", "speaking", "introduce",
    "introducing", "introduced",
])
# A kin or pet word before a name makes it an apposition ("my brother Tom.", "the new pup Ned"),
# and a naming verb two words before it the name given ("I named it Ned.", "we call him Bo!").
_APPOSITION = frozenset([
    "dog", "dogs", "pup", "puppy", "cat", "kitty", "kitten", "bird", "parrot", "snake", "horse",
    "pet", "brother", "sister", "son", "daughter", "mom", "mum", "dad", "cousin", "uncle", "aunt",
    "grandma", "grandpa", "husband", "wife", "boyfriend", "girlfriend", "bf", "gf", "friend",
    "partner", "boss", "coworker", "colleague", "neighbor", "neighbour", "niece", "nephew",
])
_NAMING = frozenset(["named", "name", "names", "called", "call", "calls", "nicknamed"])
# Capitalised words of a wish said to someone ("Happy Birthday Jo!", "Good Job Jo!").
_WISHES = frozenset([
    "birthday", "christmas", "year", "anniversary", "day", "morning", "afternoon", "evening",
    "night", "weekend", "luck", "job", "work", "holidays", "thanksgiving", "easter", "much",
])
# fmt: on
# The words after which a name closing a sentence is not said to someone.
_NOT_ADDRESSED_AFTER = _TAKES_OBJECT | _APPOSITION
# A name followed by "and"/"or" and another capitalised word is one of a list ("Scout, Toby, and Buddy").
_LIST_AFTER = re.compile(r"^,?\s*(?:and|or|&)\s+[A-Z]")


def addressed(text: str, match: re.Match[str]) -> bool:
    """Whether the name at `match` is said to its bearer rather than about them: set off by a
    comma or a greeting before it ("Thanks, Maya!", "Hey Maya,", "Wow Maya,", "Thanks Maya!") and
    by punctuation or the end after it; opening a sentence before a comma ("Maya, look at this");
    a sentence of its own ("Maya!"); or closing a sentence (an emoji after it counts as the end)
    after a word that does not take it as its object ("How about you Maya?", "Looks incredible
    Maya.", "so proud of you Maya" but not "I went with Maya."), is not the last part of a name
    ("Harry Potter!"), an apposition ("my dog Max.") or a name given ("I named it Ned."). An item
    of a list of names is not addressed ("Scout, Toby, and Buddy")."""
    before, after = text[: match.start()].rstrip(), text[match.end() :].lstrip()
    # the sentence ends after the name: punctuation, the end, or nothing but emoji up to its end
    closes = after[:1] in ("", ",", ".", "!", "?", ";") or not re.search(r"\w", re.split(r"[.!?\n]", after)[0])
    if _LIST_AFTER.match(after):
        return False
    if before.endswith(",") or _GREETING.search(before):
        return closes
    opens = not before or before.endswith((".", "!", "?", ":"))
    if opens:
        return after[:1] == "," or (closes and after[:1] != ",")
    if not closes or after[:1] == ",":
        return False
    sentence = re.split(r"[.!?\n]", before)[-1]
    previous = re.findall(r"[\w'’]+", sentence[-60:])
    if not previous or previous[-1].lower() in _NOT_ADDRESSED_AFTER:
        return False
    # "Harry Potter!" (but not a sentence's first word: "Amazing Maya!"), "I named it Ned."
    last_of_a_name = previous[-1][:1].isupper() and previous[-1].lower() not in _WISHES
    return len(previous) < 2 or not (last_of_a_name or previous[-2].lower() in _NAMING)


def mentions(text: str, names: Iterable[str]) -> bool:
    """Whether `text` holds one of `names` as a whole word, spelt as given ("Maya: Haha" holds
    Maya; "mayan" and "MAYA-2" do not)."""
    return any(re.search(_name_pattern(name), text) for name in names if name)


def about(text: str, names: Iterable[str]) -> bool:
    """Whether `text` names one of `names` (`mentions`) other than to address them
    (`addressed`): "Thanks, Maya!" speaks to Maya, not about her, and a chat log says so in every
    other message."""
    return any(not addressed(text, match) for name in names if name for match in re.finditer(_name_pattern(name), text))
