"""Which extracted memories are true facts about the user: deterministic checks after the model.

A small model asked to extract memories also files the user's questions and requests as facts
("What is a hash map?"), copies the example of its own prompt ("The user's brother ... is a pilot
in ..."), takes the assistant's words or a calculated figure for the user's, and overwrites one
attribute with another's value (the car's colour as the favourite colour). So every extracted
memory and profile field must be borne out by what the user states in the turn:

- statements: the sentences of the user's messages that state something. A question (ending in
  "?", or opening with a question word and no "?") and a request ("Please write ...", "Translate
  ...", "Can you ...") state nothing about the user, unless it states a standing wish ("always",
  "never", "from now on", "remember", "call me"). A message with no first-person sentence ("Thanks,
  that helps.") states nothing either. The assistant's messages are never evidence;
- a memory is kept only when at least half of its content words occur in the statements (word
  forms aside: "lives" / "living"), and every number and every capitalised name it holds does;
- a memory naming someone the statements only speak to ("Yeah Maria, I'm hoping to get into
  politics" bears out nothing of Maria: "Maria is hoping to get into politics" is false) is not
  borne out (`only_addressed`);
- a memory reporting as done what the statements say the user means to do ("The user started a
  dance studio" from "I wanna start a dance studio") is not borne out (`done_for_meant`);
- a memory or profile value holding a placeholder of the writer's prompt (`<...>`), or that
  repeats a sentence or a name of the prompt and its schema the user's statements do not hold, is
  never stored (`copies_prompt`);
- a memory written as the user's whose words the statements give to one other person only ("The
  user is a dentist" after "My sister Ana is a dentist") is not the user's and is not stored;
- a profile value is kept only when a statement holds it verbatim and speaks of the same
  attribute: the field's own words ("favourite colour") or the cues of a common field ("live",
  "moved" for a city; "work", "job" for an occupation);
- a memory kept in the first person without saying whose words they are is stored as the user's
  quoted words (`in_the_users_voice`).

The word lists are English; a turn in another language keeps what its words bear out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from graphs.memory_writer.attribution import FIRST_PERSON, USER, attribute
from store.names import addressed

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
_NUMBER = re.compile(r"\d[\d,.]*")
_PLACEHOLDER = re.compile(r"<[^<>]{1,40}>")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE = re.compile(r"(?<=[.!?:;])\s+|\n+")
FIRST_PERSON_WORDS = FIRST_PERSON | {"my", "mine", "our", "ours", "i'm", "i’m"}
QUESTION_WORDS = {
    "what", "how", "why", "who", "whom", "whose", "which", "where", "is", "are", "can", "could",
    "should", "would", "will", "shall", "does", "do", "did", "may", "might", "am", "was", "were",
}  # fmt: skip
REQUEST_OPENERS = {
    "please", "pls", "tell", "explain", "write", "translate", "compute", "calculate", "show", "give",
    "list", "find", "make", "summarize", "summarise", "help", "describe", "draft", "create", "generate",
    "check", "convert", "search", "look", "recommend", "suggest", "plan", "compare", "let's", "lets",
}  # fmt: skip
STANDING_WISH = re.compile(
    r"\b(always|never|from now on|remember|keep in mind|don'?t forget|note that|call me)\b", re.IGNORECASE
)
# "I wanna start a dance studio": what the user means to do, not what they did.
_INTENT = re.compile(
    r"(?:\b(?:wanna|gonna|(?:want|wants|going|plan|planning|hope|hoping|trying|try|about|need)\s+to|will|"
    r"thinking\s+(?:of|about))|(?:'d|\bwould)\s+(?:like|love)\s+to|'ll)\s+([a-z]+)",
    re.IGNORECASE,
)
_IRREGULAR_PAST = {
    "be": {"was", "were", "been"}, "become": {"became"}, "begin": {"began", "begun"}, "build": {"built"},
    "buy": {"bought"}, "come": {"came"}, "do": {"did", "done"}, "find": {"found"}, "get": {"got", "gotten"},
    "give": {"gave", "given"}, "go": {"went", "gone"}, "have": {"had"}, "leave": {"left"}, "make": {"made"},
    "meet": {"met"}, "run": {"ran"}, "see": {"saw", "seen"}, "sell": {"sold"}, "take": {"took", "taken"},
    "teach": {"taught"}, "win": {"won"}, "write": {"wrote", "written"}, "fly": {"flew", "flown"},
    "grow": {"grew", "grown"}, "learn": {"learnt"}, "read": set(), "ride": {"rode"}, "sing": {"sang"},
}  # fmt: skip
# Words that say nothing of the fact itself: a memory's text is judged by the others.
FILLER = {
    "the", "user", "user's", "users", "and", "who", "with", "for", "from", "that", "this", "these", "has",
    "have", "had", "is", "are", "was", "were", "been", "being", "named", "called", "also", "very", "now",
    "currently", "their", "they", "them", "his", "her", "she", "him", "its", "likes", "like", "loves",
    "love", "enjoys", "prefers", "wants", "eats", "food", "person", "someone", "something", "thing",
    "things", "about", "into", "onto", "which", "what", "when", "where", "there", "then", "than", "would",
    "will", "does", "did", "not", "but", "all", "any", "some", "one", "own", "per", "each", "every",
    "said", "says", "mentioned", "stated", "states",
}  # fmt: skip
_SUFFIXES = ("ing", "ies", "ied", "ed", "es", "s", "e")
# Words that say a statement is about a common profile field, besides the field's own words.
FIELD_CUES: dict[str, set[str]] = {
    "city": {"live", "living", "lives", "moved", "move", "moving", "based", "from", "city", "town", "home", "reside"},
    "country": {"live", "living", "lives", "moved", "move", "based", "from", "country", "home", "reside"},
    "location": {"live", "living", "lives", "moved", "move", "based", "from", "home", "reside"},
    "name": {"name", "i'm", "im", "am", "call", "called"},
    "occupation": {"work", "works", "working", "job", "am", "i'm", "im", "profession", "employed"},
    "job": {"work", "works", "working", "job", "am", "i'm", "im", "profession", "employed"},
    "language": {"speak", "speaks", "language", "answer", "reply", "respond", "write", "talk"},
    "age": {"old", "age", "years", "born"},
    "salary": {"earn", "earns", "salary", "income", "paid", "make"},
    "income": {"earn", "earns", "salary", "income", "paid", "make"},
    "diet": {"eat", "vegetarian", "vegan", "diet", "pescatarian"},
}
_FIELD_SYNONYMS = {
    "colour": "color",
    "favourite": "favorite",
    "profession": "occupation",
    "work": "occupation",
    "hometown": "city",
    "home_city": "city",
    "residence": "city",
    "lives_in": "city",
    "first_name": "name",
    "full_name": "name",
    "preferred_language": "language",
    "monthly_salary": "salary",
    "monthly_income": "income",
    "annual_income": "income",
    "yearly_income": "income",
}


def _words(text: str) -> list[str]:
    return [w.casefold().replace("’", "'") for w in _WORD.findall(text)]


def _stem(word: str) -> str:
    word = word.removesuffix("'s")
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def same_word(a: str, b: str) -> bool:
    """Whether two words are forms of one ("lives" / "living", "allergic" / "allergy")."""
    if a == b:
        return True
    sa, sb = _stem(a), _stem(b)
    if sa == sb or (len(sa) >= 5 and len(sb) >= 5 and sa[:5] == sb[:5]):
        return True
    short, long = sorted((sa, sb), key=len)
    return len(short) >= 4 and long.startswith(short)


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "").rstrip(".") for n in _NUMBER.findall(text)}


def _is_question(sentence: str, words: list[str]) -> bool:
    return sentence.rstrip().endswith("?") or bool(words and words[0] in QUESTION_WORDS)


def _is_request(sentence: str, words: list[str]) -> bool:
    if STANDING_WISH.search(sentence):
        return False
    if words[:2] in (["can", "you"], ["could", "you"], ["would", "you"], ["will", "you"]):
        return True
    return bool(words and words[0] in REQUEST_OPENERS)


def statements(user_messages: Iterable[str]) -> list[str]:
    """The sentences of the user's messages that state something (see the module docstring)."""
    found: list[str] = []
    for message in user_messages:
        stated = []
        for sentence in (s.strip() for s in _SENTENCE.split(message)):
            words = _words(sentence)
            if not words or _is_question(sentence, words) or _is_request(sentence, words):
                continue
            stated.append((sentence, any(w in FIRST_PERSON_WORDS for w in words)))
        if any(first_person for _, first_person in stated):
            found += [sentence for sentence, _ in stated]
    return found


def _names(text: str) -> list[str]:
    """Capitalised words after a text's first word ("The user's brother Tom" -> ["tom"])."""
    raw = _WORD.findall(text)
    return [w.casefold().removesuffix("'s").removesuffix("’s") for w in raw[1:] if w[:1].isupper() and w != "I"]


@dataclass(frozen=True)
class Evidence:
    """What the user's statements in a turn bear out."""

    sentences: tuple[str, ...]
    prompt_sentences: tuple[str, ...] = ()

    @classmethod
    def of(cls, user_messages: Iterable[str], prompt_texts: Iterable[str] = ()) -> Evidence:
        prompt = tuple(s for text in prompt_texts for s in _CLAUSE.split(" ".join(text.split())) if s.strip())
        return cls(tuple(statements(user_messages)), prompt)

    def _words(self) -> list[str]:
        return [w for s in self.sentences for w in _words(s)]

    def _holds(self, word: str) -> bool:
        return any(same_word(word, stated) for stated in self._words())

    def supports(self, text: str) -> bool:
        """Whether a memory's text is borne out: half its content words, every number and name."""
        if not self.sentences or self.copies_prompt(text):
            return False
        content = [w for w in _words(text) if len(w) >= 3 and w not in FILLER and not w.isdigit()]
        held = sum(self._holds(w) for w in content)
        if content and held * 2 < len(content):
            return False
        if not _numbers(text) <= _numbers(" ".join(self.sentences)):
            return False
        return (
            all(self._holds(name) for name in _names(text))
            and not self.only_addressed(text)
            and not self.done_for_meant(text)
        )

    def done_for_meant(self, text: str) -> list[str]:
        """The words of a memory's text that report as done what the statements only say the user
        means to do ("The user started a dance studio" from "I wanna start a dance studio"): a
        past form of a verb the statements hold only after "want to", "going to", "plan to",
        "hope to", "will"..., when the memory says no such thing itself and the statements never
        use that past form."""
        if _INTENT.search(text):
            return []
        meant = {m.group(1).casefold() for s in self.sentences for m in _INTENT.finditer(s)}
        stated = set(self._words())
        found = []
        for word in _words(text):
            if word in stated:
                continue
            for verb in meant:
                regular = word.endswith("ed") and len(verb) >= 3 and same_word(word, verb)
                if regular or word in _IRREGULAR_PAST.get(verb, ()):
                    found.append(word)
                    break
        return found

    def only_addressed(self, text: str) -> list[str]:
        """The capitalised words of a memory's text (its first word too: "Maria is ...") that the
        statements hold as names said to someone only ("Thanks, Maria!", "Yeah Maria, I'm ...":
        `store.names.addressed`), never as what a sentence is about."""
        found = []
        for name in dict.fromkeys(w for w in _WORD.findall(text) if w[:1].isupper() and w != "I"):
            name = re.sub(r"['’]s$", "", name)
            pattern = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
            mentions = [(s, m) for s in self.sentences for m in pattern.finditer(s)]
            if mentions and all(addressed(s, m) for s, m in mentions):
                found.append(name)
        return found

    def copies_prompt(self, text: str) -> bool:
        """Whether `text` holds a placeholder of the prompt, repeats one of its sentences, or names
        something of it (a capitalised word, a number) the user's statements do not hold."""
        if _PLACEHOLDER.search(text):
            return True
        plain = " ".join(_words(text))
        for sentence in self.prompt_sentences:
            if SequenceMatcher(None, plain, " ".join(_words(sentence)), autojunk=False).ratio() >= 0.8:
                return True
        prompt_names = {n for s in self.prompt_sentences for n in _names(s)}
        prompt_numbers = {n for s in self.prompt_sentences for n in _numbers(s)}
        stated_numbers = _numbers(" ".join(self.sentences))
        if any(n in prompt_numbers and n not in stated_numbers for n in _numbers(text)):
            return True
        return any(name in prompt_names and not self._holds(name) for name in _names(text))

    def someone_elses(self, text: str, people: Sequence[str]) -> str | None:
        """The person a memory written as the user's is really about ("The user is a dentist in
        Madrid" when the user said "My sister Ana is a dentist in Madrid"): the one the
        statements give every content word of it that they hold to; None when any is the user's
        or no one's."""
        said = " ".join(self.sentences)
        whose = set()
        for word in {w for w in _words(text) if len(w) >= 3 and w not in FILLER}:
            found = attribute(word, said, people)
            if found is None:
                continue
            if found.about == USER:
                return None
            whose.add(found.about)
        return next(iter(whose)) if len(whose) == 1 else None

    def supports_field(self, field: str, value: str) -> bool:
        """Whether a statement holds `value` verbatim and speaks of the attribute `field`."""
        value = value.strip()
        if not value or self.copies_prompt(value):
            return False
        pattern = re.compile(r"(?<![\w])" + re.escape(value) + r"(?![\w])", re.IGNORECASE)
        cues = field_cues(field)
        for sentence in self.sentences:
            if not pattern.search(sentence):
                continue
            rest = _words(pattern.sub(" ", sentence))
            if any(same_word(word, cue) for word in rest for cue in cues):
                return True
        return False


def field_cues(field: str) -> set[str]:
    """The words that speak of a profile field: its own ("favourite_colour" -> favourite, colour,
    favorite, color) and, for a common field, its cues."""
    key = "_".join(_words(field.replace("-", " ").replace("_", " ")))
    key = _FIELD_SYNONYMS.get(key, key)
    parts = [p for p in key.split("_") if p]
    words = (
        set(parts) | {_FIELD_SYNONYMS.get(p, p) for p in parts} | {k for k, v in _FIELD_SYNONYMS.items() if v in parts}
    )
    return {w for w in words if len(w) >= 3 and w not in FILLER} | FIELD_CUES.get(_FIELD_SYNONYMS.get(key, key), set())


def unsupported(texts: Sequence[str], evidence: Evidence) -> list[str]:
    """The texts the evidence does not bear out."""
    return [t for t in texts if not evidence.supports(t)]


_THE_USER = re.compile(r"\busers?\b", re.IGNORECASE)
_QUOTES = "\"'“”‘’ "


def in_the_users_voice(text: str) -> str:
    """`text` as the user's quoted words when the model copied them in the first person and does
    not say whose they are: "We made pizza!" becomes 'The user said: "We made pizza!"'. A memory
    is read later, in another turn's note, by a model that takes "I" and "we" for itself or the
    person it talks to. A text that names the user ("The user said we ...") is left as it is."""
    if not set(_words(text)) & FIRST_PERSON_WORDS or _THE_USER.search(text):
        return text
    return f'The user said: "{text.strip(_QUOTES)}"'
