"""Fast routing heuristics: requested KB, KB names/descriptions in the message, cue words."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from graphs.router.kb_match import KBMatch
from store.bm25 import STOPWORDS

_WORD = re.compile(r"[a-z0-9][a-z0-9_-]*")
# the keyword search's stopwords, and words every message to a knowledge base may hold
_STOPWORDS = STOPWORDS | frozenset(
    [
        "about",
        "all",
        "also",
        "any",
        "could",
        "please",
        "should",
        "tell",
        "those",
        "under",
        "would",
        "documents",
        "document",
        "notes",
        "guide",
        "information",
        "knowledge",
        "base",
    ]
)
TOOL_CUES = (
    r"\bcalculat\w*",
    r"\bcompute\b",
    r"\d\s*[-+*/^%]\s*\d",
    r"\b(square|cube|nth) root\b",
    r"\bsqrt\b",
    r"\bto the (power|\d+(st|nd|rd|th)( power)?)\b",
    r"\d\s*(squared|cubed)\b",
    r"\d\s*(%|percent)\s+of\s+\d",
    r"\bweather\b",
    r"\bforecast\b",
    r"\bwhat time\b",
    r"\bcurrent time\b",
    r"\btoday'?s date\b",
    r"\bsearch the web\b",
    r"\bweb search\b",
    r"\blook (it )?up online\b",
    r"\blatest news\b",
    r"https?://",
)
RESEARCH_CUES = (
    r"\bresearch\b",
    r"\bin[- ]depth\b",
    r"\bcomprehensive\b",
    r"\bliterature review\b",
    r"\binvestigate\b",
    r"\bthorough (report|analysis)\b",
    r"\bsurvey of\b",
)
PLAN_CUES = (
    r"\bstep[- ]by[- ]step plan\b",
    r"\bmake a plan\b",
    r"\bplan and (then )?(do|execute)\b",
    r"\bmulti[- ]step\b",
    r"\bfirst\b.+\bthen\b.+\bfinally\b",
)
# Questions whose evidence spans documents linked by an entity: a relation of something the
# question only describes ("the founder of X", "the town where Y was born"), or a comparison.
MULTI_HOP_CUES = (
    r"\bthe (\w+ ){0,2}(founder|director|author|creator|owner|producer|composer|spouse|wife|husband|"
    r"father|mother|son|daughter|birthplace|hometown|headquarters|capital|leader|publisher|manufacturer|"
    r"singer|writer|star|designer|architect|coach|president|members?) of (the )?[\w'-]+( [\w'-]+){0,4} "
    r"(born|die|died|located|based|founded|made|published|released|married|flows?|live[sd]?|work(ed|s)?|"
    r"studied|educated|play(ed|s)?|formed|built|named)\b",
    r"\b(through|in|of|near|from) the (town|city|country|place|company|film|band|university|school|person) "
    r"(where|that|which|who|whose)\b",
    r"\bthe (\w+ ){0,2}of the (\w+ ){0,2}(that|which|who|whose|where)\b",
    r"\b(both|the same)\b.*\?",
    r"\bwhich\b[^?]*\b\w+ or [A-Z]",
    r"\bthe (woman|man|person|actor|actress|singer|player|company|film|band|group|team|city|town) "
    r"(who|that|which|whose)\b",
    r"\b(flows?|runs?|located|lies|born|died) (through|in|at|near) the (birthplace|hometown|headquarters|capital) of\b",
)
GREETING = re.compile(r"^\s*(hi|hello|hey|thanks|thank you|good (morning|evening|afternoon))\b[\s!.,]*$", re.I)


@dataclass(frozen=True)
class Guess:
    """What the heuristics found: a route, a knowledge base for retrieval, how sure, and why."""

    route: str
    kb: str
    confidence: float
    reason: str


def content_words(text: str) -> set[str]:
    """Lower-cased words of 4+ characters that are not stopwords."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in _STOPWORDS}


def _matches(patterns: tuple[str, ...], text: str) -> str | None:
    for pattern in patterns:
        if match := re.search(pattern, text, re.I):
            return match.group(0)
    return None


def match_kb(message: str, kbs: list[dict]) -> Guess | None:
    """The knowledge base the message names (word match on the name) or whose description it
    shares words with; None when nothing matches."""
    words = set(_WORD.findall(message.lower()))
    named = [kb["name"] for kb in kbs if kb["name"] in words or kb["name"].replace("_", " ") in message.lower()]
    if len(named) == 1:
        return Guess("retrieval", named[0], 0.9, f"the message names knowledge base {named[0]!r}")
    message_words = content_words(message)
    scored = []
    for kb in kbs:
        shared = message_words & content_words(f"{kb['name'].replace('_', ' ')} {kb.get('description') or ''}")
        if shared:
            scored.append((len(shared), kb["name"], sorted(shared)))
    if not scored:
        return None
    scored.sort(key=lambda item: (-item[0], item[1]))
    count, name, shared_words = scored[0]
    tie = len(scored) > 1 and scored[1][0] == count
    confidence = 0.5 if tie else min(0.85, 0.45 + 0.15 * count)
    return Guess(
        "retrieval", name, confidence, f"the message shares {', '.join(shared_words)} with the description of {name!r}"
    )


SIMILARITY_MARGIN = 0.1
"""How much closer in meaning the best knowledge base must be than the next one to be chosen
without the model."""


def match_kb_meaning(similar: Sequence[KBMatch], threshold: float) -> Guess | None:
    """The knowledge base `similar` (graphs/router/kb_match.py, best first) puts clearly first:
    at least `threshold` similar to the message and `SIMILARITY_MARGIN` ahead of the next one."""
    if not similar or similar[0].similarity < threshold:
        return None
    best = similar[0]
    if len(similar) > 1 and best.similarity - similar[1].similarity < SIMILARITY_MARGIN:
        return None
    confidence = min(0.9, 0.7 + (best.similarity - threshold))
    return Guess(
        "retrieval",
        best.name,
        confidence,
        f"the message is close in meaning to {best.phrase!r} of knowledge base {best.name!r} "
        f"(similarity {best.similarity:.2f})",
    )


def guess_route(
    message: str, kbs: list[dict], similar: Sequence[KBMatch] = (), similarity_threshold: float = 1.0
) -> Guess:
    """The heuristic route for a message (confidence 0..1; low means 'ask the model').

    `similar` ranks `kbs` by meaning (graphs/router/kb_match.py): a knowledge base at least
    `similarity_threshold` close to the message, clearly ahead of the others, is chosen when no
    research, plan, knowledge-base name or tool cue decides first."""
    if cue := _matches(RESEARCH_CUES, message):
        return Guess("deep_research", "", 0.8, f"research cue {cue!r}")
    if cue := _matches(PLAN_CUES, message):
        return Guess("plan_execute", "", 0.75, f"multi-step cue {cue!r}")
    kb_guess = match_kb(message, kbs)
    if kb_guess is not None and kb_guess.confidence >= 0.7:
        return kb_guess
    if cue := _matches(TOOL_CUES, message):
        return Guess("react", "", 0.8, f"tool cue {cue!r}")
    if meaning := match_kb_meaning(similar, similarity_threshold):
        return meaning
    if kb_guess is not None:
        return kb_guess
    if GREETING.match(message):
        return Guess("general", "", 0.9, "greeting")
    if not kbs:
        return Guess("general", "", 0.5, "no cue, and no knowledge base exists")
    return Guess("general", "", 0.3, "no knowledge base or tool cue matched")


def is_multi_hop(message: str) -> str | None:
    """The cue that marks `message` as a multi-hop question (its answer needs documents linked
    through an entity the question never names, or two documents compared), else None."""
    return _matches(MULTI_HOP_CUES, message)
