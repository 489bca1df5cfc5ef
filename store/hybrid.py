"""The one hybrid retrieval pipeline, for memories (store/memory/) and knowledge bases
(store/knowledge/): dense candidates (the store's vectors), keyword candidates (BM25) and, when
the query names a time range (a date, or the days next to an event it names: "the week after
the surf lessons"), the candidates dated in it and those dated in the weeks after it that tell
of it ("yesterday I went bowling": `store.dates.tells_of`); fused by `fusion.fuse` with bonuses
for those in the range and for those of the names the query holds.

What differs between the two is data: a `Policy` (weights, how names earn their bonus, thread
neighbours, which field holds the text, the date, the document) and a `Corpus`, the handle the
signals come from (a user's memories of one kind, a knowledge base). The vector searches embed
the query without the corpus's `names` (store/names.py): a name pulls a query vector towards
every text holding it rather than what the query asks about, so the name bonus or full text
weighs it instead.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from store.dates import TOLD_LATER, asks_when, parse_stamp, query_window, tells_of, told_spans
from store.floor import (
    ADDRESS_WORDS,
    LIST_FLOOR,
    LITTLE,
    PREFIX,
    asked_words,
    held_words,
    lists_several,
    shares_words,
    small_talk_to,
    standouts,
    with_keyword_floor,
)
from store.fusion import distinct_texts, fuse
from store.names import about, mentions, without_names
from store.parts import message_heads, with_parts

NEIGHBOUR_SEEDS = 10  # top hits of each signal whose thread neighbours are fetched
NEIGHBOUR_HITS = 10  # top fused hits that bring their neighbours into the ranking
SUBSTANCE_WORDS = 5  # words (beside names and little words) a message needs to earn the whole name bonus
T = TypeVar("T")


class Candidate(Protocol):
    """What the pipeline ranks: langgraph's `Item`, a knowledge base's `Hit`."""

    @property
    def key(self) -> str: ...

    @property
    def value(self) -> dict: ...


Scored = tuple[Candidate, float]


class Corpus(Protocol):
    """Where one domain's signals come from, best first, live candidates only."""

    async def names(self, query: str) -> dict[str, frozenset[str]]:
        """The people the query names, each with the names that stand for them (those the query
        holds are left out of the vector searches; the name bonus rewards the person)."""
        ...

    async def dense(self, query: str, limit: int, span: tuple[datetime, datetime] | None = None) -> list[Scored]:
        """(candidate, cosine similarity); with `span`, only those dated in [start, end)."""
        ...

    async def keyword(self, query: str, limit: int) -> list[Scored]:
        """(candidate, BM25 score)."""
        ...

    async def neighbours(self, keys: Sequence[str], window: int) -> dict[str, list[Candidate]]:
        """Key -> the candidates of the same thread written just before and after it."""
        ...


@dataclass(frozen=True)
class Policy:
    """One domain's ranking, as data.

    `keyword_weight`: the keyword list's share of the fusion (`fusion.fuse`), normalised by
    `keyword_method` (None: min-max like the dense list; "given": scores already comparable).
    `time_weight`: bonus of candidates dated in the range the query names (0: no date handling).
    `name_weight`: bonus of candidates of the names the query holds, by `name_bonus`:
    "speaker" (`speaker_share` of the value's `speaker`) or "mention" (the text names them other than to
    address them, `store.names.about`).
    `neighbour_weight`, `neighbour_turns`: neighbours of the top hits (what the corpus calls
    adjacent: the same thread's messages, a document's chunks or the documents dated next to it)
    ranked in (`with_neighbours`); `neighbour_gap`: a neighbour of another document dated further
    than this from its hit is left out (None: no limit); `speaker_field`: the value's field naming
    who wrote it (None: unknown), so that a neighbour by someone else than its hit (the question
    the hit answers, the answer to it) is scored with its own bonuses (`with_neighbours`).
    `text_field`, `date_field`: the value's text and date; `document_field`:
    candidates sharing it compete as one document (None: each on its own).
    `keyword_floor`: the weight of plain keyword search's order in a last rank fusion with the
    bonus-ranked one (`with_keyword_floor`), counting its hits that stand out (`standouts`) and
    hold a word the query asks about beside its names (`asked_words`), so that bonuses cannot
    sink what keyword search ranks first (0: none). `answer_weight`: the least share of a hit's
    score the reply to it gets when it asks a question (`reply_to`, `with_neighbours`; 0: none).
    `parts`: the candidates are chat messages, and a message sent in parts is one result
    (store/parts.py; not for memories written together from one turn, which are not parts).
    `keyword_names`: False, the keyword list the ranking fuses is searched with the query's
    names left out (`Signals.ranked_keyword`), as the vector searches are: in a chat log every
    line of a person opens with their name, so a name in the query makes keyword search favour
    that person's shortest lines; the name bonus weighs the names instead. Plain keyword search
    (`Signals.keyword`) keeps them, and the keyword floor reads it."""

    keyword_weight: float
    time_weight: float = 0.0
    name_weight: float = 0.0
    name_bonus: str = "mention"
    keyword_method: str | None = None
    neighbour_weight: float = 0.0
    neighbour_turns: int = 0
    neighbour_gap: timedelta | None = None
    speaker_field: str | None = None
    text_field: str = "text"
    date_field: str = "created_at"
    document_field: str | None = None
    keyword_floor: float = 0.0
    answer_weight: float = 0.0
    parts: bool = False
    keyword_names: bool = True


@dataclass
class Signals:
    """What hybrid search fuses, gathered once: dense hits, keyword hits, the dense hits dated in
    the time range the query names (`dated`), the names it holds, and thread neighbours.
    `merged_dense` is the dense list the fusion ranks: the dated hits merged in."""

    query: str
    dense: list[Scored]
    keyword: list[Scored]
    dated: list[Scored] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    neighbours: dict[str, list[Candidate]] = field(default_factory=dict)
    people: dict[str, frozenset[str]] = field(default_factory=dict)  # person -> their names; {} : each of `names`
    keyword_nameless: list[Scored] | None = None  # keyword hits of the query without its names (`Policy.keyword_names`)

    @property
    def ranked_keyword(self) -> list[Scored]:
        """The keyword list the ranking fuses: the search without the query's names when it ran,
        else plain keyword search's."""
        return self.keyword if self.keyword_nameless is None else self.keyword_nameless

    @property
    def persons(self) -> dict[str, frozenset[str]]:
        """The people the query names, each with their names (each of `names` on its own when
        the corpus knows no people)."""
        return self.people or {name: frozenset({name}) for name in self.names}

    @property
    def in_range(self) -> set[str]:
        return {item.key for item, _ in self.dated}

    @property
    def merged_dense(self) -> list[Scored]:
        """The dense list with the range's hits merged in, so that they are ordered by their own
        similarity (a dated hit the plain search missed still ranks)."""
        if not self.dated:
            return self.dense
        known = {item.key for item, _ in self.dense}
        merged = [*self.dense, *(pair for pair in self.dated if pair[0].key not in known)]
        return sorted(merged, key=lambda pair: -pair[1])

    def sliced(self, depth: int) -> Signals:
        """These signals as a search `depth` deep would have gathered them (the neighbours of the
        first NEIGHBOUR_SEEDS hits of each list do not depend on the depth)."""
        nameless = None if self.keyword_nameless is None else self.keyword_nameless[:depth]
        return replace(
            self,
            dense=self.dense[:depth],
            keyword=self.keyword[:depth],
            dated=self.dated[:depth],
            keyword_nameless=nameless,
        )


@dataclass
class Ranked:
    """One fused candidate: its fused `score`, its dense similarity (None when only full text or
    its date found it), its 1-based ranks in the dense and keyword lists and, for a message sent
    in parts, its `parts`."""

    item: Candidate
    score: float
    similarity: float | None
    ranks: dict[str, int | None]
    parts: tuple[Candidate, ...] = ()  # a message sent in parts: all its parts known, in order (`with_parts`)


async def gather(corpus: Corpus, policy: Policy, query: str, depth: int, now: datetime) -> Signals:
    """The signals, `depth` deep each; when `policy.time_weight` is on and the query names a time
    range relative to `now` (`store.dates.query_window`), a second dense search restricted to it
    and a third to the TOLD_LATER after it, whose candidates telling of a time in the range are
    kept (`store.dates.tells_of`), merged into the dense list (so the range's candidates are
    ordered by their own similarity). Without `policy.keyword_names`, a query naming someone is
    also searched by keyword without the names (`Signals.keyword_nameless`)."""
    window = None
    if policy.time_weight:

        async def event_time(event_query: str) -> datetime | None:
            found = rank(await gather(corpus, policy, event_query, depth, now), policy)
            stamp = found[0].item.value.get(policy.date_field) if found else None
            return datetime.fromisoformat(stamp) if stamp else None

        window = await query_window(query, now, event_time)
    keyword_search = asyncio.ensure_future(corpus.keyword(query, depth))  # full text needs no names
    nameless: asyncio.Future[list[Scored]] | None = None  # the keyword search without the names
    try:
        people = await corpus.names(query)
        names = set().union(*people.values()) if people else set()
        vector_query = without_names(query, names)
        if names and not policy.keyword_names:
            nameless = asyncio.ensure_future(corpus.keyword(vector_query, depth))
        searches = [corpus.dense(vector_query, depth)]
        if window is not None:  # and the weeks after it: a message may tell of it later ("yesterday")
            searches.append(corpus.dense(vector_query, depth, span=window))
            searches.append(corpus.dense(vector_query, depth, span=(window[1], window[1] + TOLD_LATER)))
        dense, *dated = await asyncio.gather(*searches)
        keyword = await keyword_search
        keyword_nameless = await nameless if nameless is not None else None
    finally:
        keyword_search.cancel()  # when a search above failed; a no-op once it is done
        if nameless is not None:
            nameless.cancel()
    signals = Signals(query, dense, keyword, names=names, people=people, keyword_nameless=keyword_nameless)
    if policy.neighbour_weight and policy.neighbour_turns:
        # the first hits of the dense list and of plain keyword search (the neighbours of the
        # name-free keyword list's first hits too were measured to find less, not more)
        seeds = [item.key for item, _ in dense[:NEIGHBOUR_SEEDS]] + [item.key for item, _ in keyword[:NEIGHBOUR_SEEDS]]
        signals.neighbours = await corpus.neighbours(list(dict.fromkeys(seeds)), policy.neighbour_turns)
        if policy.neighbour_gap is not None:
            values = {item.key: item.value for item, _ in [*dense, *keyword]}
            signals.neighbours = {
                key: [item for item in items if close(values[key], item.value, policy)]
                for key, items in signals.neighbours.items()
                if key in values
            }
    if dated and window is not None:
        told = [pair for pair in dated[1] if _tells_of(pair[0].value, window, policy)]
        signals.dated = sorted([*dated[0], *told], key=lambda pair: -pair[1])
    return signals


def _tells_of(value: dict, window: tuple[datetime, datetime], policy: Policy) -> bool:
    """Whether a candidate is about the time `window`: written in it, or telling of a time in it
    later ("yesterday I went bowling" the day after; `store.dates.tells_of`)."""
    written = parse_stamp(value.get(policy.date_field))
    return written is not None and tells_of(str(value.get(policy.text_field) or ""), written, window)


def rank(signals: Signals, policy: Policy) -> list[Ranked]:
    """The fused candidates, best first, each text once (and with `document_field`, each
    document's best first): `fusion.fuse` of the dense and keyword lists plus the time and name
    bonuses, then the thread neighbours ranked in (each with its own bonuses, `with_neighbours`)."""
    dense, keyword = signals.merged_dense, signals.ranked_keyword
    by_key: dict[str, Candidate] = {item.key: item for item, _ in keyword}
    by_key.update({item.key: item for item, _ in dense})
    listed = set(by_key)
    for items in signals.neighbours.values():
        by_key.update({item.key: item for item in items if item.key not in listed})
    in_range = signals.in_range
    bonus = {
        key: policy.time_weight * (key in in_range) + name_bonus(item.value, signals, policy)
        for key, item in by_key.items()
    }
    fused = fuse(
        [(item.key, score) for item, score in dense],
        [(item.key, score) for item, score in keyword if score > 0],
        keyword_weight=policy.keyword_weight,
        bonus={key: bonus[key] for key in listed},
        keyword_method=policy.keyword_method,
    )
    if policy.neighbour_weight and signals.neighbours:
        fused = with_neighbours(fused, signals.neighbours, bonus, policy, by_key, asks_when(signals.query))
    texts = {key: item.value.get(policy.text_field) for key, item in by_key.items()}
    fused = distinct_texts(fused, texts)
    if policy.keyword_floor and policy.keyword_weight > 0:
        lifted, weight = floor_hits(signals, texts, policy.keyword_floor)
        fused = with_keyword_floor(fused, lifted, weight)
    similarity = {item.key: score for item, score in dense}
    dense_rank = {item.key: position for position, (item, _) in enumerate(dense, 1)}
    keyword_rank = {item.key: position for position, (item, _) in enumerate(keyword, 1)}
    ranked = [
        Ranked(
            by_key[key], score, similarity.get(key), {"dense": dense_rank.get(key), "keyword": keyword_rank.get(key)}
        )
        for key, score in fused
    ]
    if policy.parts:
        heads = message_heads(
            signals.neighbours, by_key, lambda value: _author(value, policy), lambda value: value.get(policy.date_field)
        )
        ranked = with_parts(ranked, heads, by_key, lambda value: str(value.get(policy.date_field) or ""))
    document = policy.document_field
    return per_document(ranked, lambda r: r.item.value[document]) if document else ranked


async def search(corpus: Corpus, policy: Policy, query: str, depth: int, now: datetime) -> list[Ranked]:
    """`rank` of `gather`: hybrid candidates, best first."""
    return rank(await gather(corpus, policy, query, depth, now), policy)


def close(hit: dict, neighbour: dict, policy: Policy) -> bool:
    """Whether a neighbour counts for its hit under `policy.neighbour_gap`: of the same document,
    or both dated at most the gap apart."""
    document = policy.document_field
    if document and hit.get(document) == neighbour.get(document):
        return True
    first, second = hit.get(policy.date_field), neighbour.get(policy.date_field)
    if not first or not second or policy.neighbour_gap is None:
        return policy.neighbour_gap is None
    return abs(datetime.fromisoformat(first) - datetime.fromisoformat(second)) <= policy.neighbour_gap


def name_bonus(value: dict, signals: Signals, policy: Policy) -> float:
    """A candidate's name bonus: `policy.name_weight` times its share (`name_share`) times how
    much it says (`substance`)."""
    share = policy.name_weight * name_share(value, signals.persons, policy) if policy.name_weight else 0.0
    return share * substance(str(value.get(policy.text_field) or ""), signals.names) if share else 0.0


def substance(text: str, names: set[str]) -> float:
    """How much a message says, for the name bonus: its words past a "Name: " prefix, beside
    little words, numbers and the query's `names`, over SUBSTANCE_WORDS (at most 1). A person's
    small talk ("need a holiday", "How was your day Marcus?") is theirs as much as what they
    did, but says less: without this, on a question about them worded away from their words
    ("What hobbies has Jo picked up?"), their small talk fills the first results on the bonus."""
    said = PREFIX.sub("", text, count=1)
    skip = {word.lower() for name in names for word in name.split()}
    words = [w for w in re.findall(r"[\w'’]+", said.lower()) if w not in LITTLE and w not in skip and not w.isdigit()]
    return min(1.0, len(words) / SUBSTANCE_WORDS)


def name_share(value: dict, people: dict[str, frozenset[str]], policy: Policy) -> float:
    """How much of the name bonus a candidate gets (`Policy.name_bonus`) for the `people` the
    query names (person -> the names that stand for them)."""
    if not people:
        return 0.0
    if policy.name_bonus == "speaker":
        return speaker_share(value, people)
    return float(about(str(value.get(policy.text_field) or ""), set().union(*people.values())))


def speaker_share(value: dict, people: dict[str, frozenset[str]]) -> float:
    """How much of the speaker bonus a memory gets: 1 when the query names its speaker alone; when
    it names several people (what did Maya tell Tom), 1 for a named speaker's message about
    another of them by any of their names (`store.names.about`: "Tom went climbing with me") or
    saying something to them ("Tom, get fitted at a proper store before you buy shoes"; not
    small talk said to them, "Thanks Tom!", "How about you Tom?": fewer than ADDRESS_WORDS
    words) and 0.5 for their other messages."""
    speaker = value.get("speaker")
    if speaker not in people:
        return 0.0
    if len(people) < 2:
        return 1.0
    others = set().union(*(names for person, names in people.items() if person != speaker))
    text = str(value.get("text") or "")
    if about(text, others):
        return 1.0
    if not mentions(text, others):
        return 0.5
    said = text.split(":", 1)[1] if text.startswith(f"{speaker}:") else text
    names = {word.lower() for name in others for word in name.split()}
    words = [w for w in re.findall(r"[\w'’]+", said.lower()) if w not in LITTLE and w not in names]
    return 1.0 if len(words) >= ADDRESS_WORDS else 0.5


def with_neighbours(
    fused: list[tuple[str, float]],
    neighbours: dict[str, list[Candidate]],
    bonus: dict[str, float],
    policy: Policy,
    by_key: dict[str, Candidate],
    when: bool = False,
) -> list[tuple[str, float]]:
    """`fused` with the thread neighbours of its first NEIGHBOUR_HITS hits ranked in, best first,
    ties in the fused order. A neighbour scores at least `policy.neighbour_weight` (w) times its
    hit's score (a reply whose topic the message before it carries is found by that message's
    words). A neighbour written by someone else than its hit (`policy.speaker_field`: the question
    the hit answers, the reply to it) shares the hit's topic but not its speaker: it scores at
    least w times the hit's score before bonuses plus its own bonuses, so "Sam: Sure! Here's a
    pic, super cozy." after "Alex: Any pictures of the new beds?" ranks as Sam's answer to a
    question about Sam's beds. A neighbour by the same person gets w times the whole score, so
    their small talk around a hit does not come in on their own speaker bonus. The reply to a
    hit asking a question (`reply_to`) scores at least `policy.answer_weight` times the hit's
    whole score: it carries the exchange the hit opened ("Which one has been your favorite
    guide?" / "I loved \"Becoming Nicole\" by Amy Ellis Nutt."). So does, for a query asking when
    (`when`: `store.dates.asks_when`), a neighbour telling when ("You will not believe what
    happened yesterday..." before the hit "A car ran a red light and hit us")."""
    weight, field = policy.neighbour_weight, policy.speaker_field
    scores = dict(fused)
    for key, score in fused[:NEIGHBOUR_HITS]:
        speaker = by_key[key].value.get(field) if field else None
        answer = reply_to(by_key[key].value, neighbours.get(key, ()), policy) if policy.answer_weight else None
        for item in neighbours.get(key, ()):
            if field and speaker is not None and item.value.get(field) not in (None, speaker):
                inherited = weight * (score - bonus.get(key, 0.0)) + bonus.get(item.key, 0.0)
            else:
                inherited = weight * score
            if item.key == answer or (when and _tells_when(item.value, policy)):
                inherited = max(inherited, policy.answer_weight * score)
            if inherited > scores.get(item.key, float("-inf")):
                scores[item.key] = inherited
    order = {key: index for index, (key, _) in enumerate(fused)}
    return sorted(scores.items(), key=lambda p: (-p[1], order.get(p[0], len(order)), p[0]))


def _tells_when(value: dict, policy: Policy) -> bool:
    """Whether a candidate tells when what it says happened ("something not so great happened
    yesterday": `store.dates.told_spans`, counted back from its date)."""
    written = parse_stamp(value.get(policy.date_field))
    return written is not None and bool(told_spans(str(value.get(policy.text_field) or ""), written))


def reply_to(hit: dict, near: Sequence[Candidate], policy: Policy) -> str | None:
    """The key of the reply to `hit` among its neighbours `near`, when `hit` is one message asking
    a question ("Name: ... ?", one line) and the first neighbour after it (by date, document and
    position) is one message by someone else saying something (`substance`: SUBSTANCE_WORDS words
    beside little words; "Honestly relatable." after "How's your week been?" answers nothing
    asked about); None otherwise. A chat log's reply to a question
    answers it: what a question about the asker finds first is often the question ("Melanie:
    Which one has been your favorite guide?"), while the answer ("Caroline: I loved \"Becoming
    Nicole\"...") shares few of its words. Other neighbours (small talk around a hit, the asker's
    own next message) carry less of it."""
    text = str(hit.get(policy.text_field) or "")
    asker = _author(hit, policy)
    if asker is None or "?" not in text:
        return None

    def place(value: dict) -> tuple[str, str, int]:
        document = str(value.get(policy.document_field) or "") if policy.document_field else ""
        return str(value.get(policy.date_field) or ""), document, int(value.get("position") or 0)

    after = sorted((item for item in near if place(item.value) > place(hit)), key=lambda item: place(item.value))
    if not after:
        return None
    reply = str(after[0].value.get(policy.text_field) or "")
    replier = _author(after[0].value, policy)
    if replier is None or replier == asker or substance(reply, set()) < 1:
        return None
    return after[0].key


def _author(value: dict, policy: Policy) -> str | None:
    """Who wrote a candidate that is one message: its `policy.speaker_field` (a chat message
    stored with its speaker, else its role), else the "Name:" its one line opens with."""
    if policy.speaker_field:
        return value.get(policy.speaker_field) or value.get("role")
    return _speaker(str(value.get(policy.text_field) or ""))


def _speaker(text: str) -> str | None:
    """Who wrote a text that is one message, "Name: words" on one line; None for anything else."""
    found = PREFIX.match(text)
    return found.group(0).split(":", 1)[0].strip() if found and "\n" not in text.strip() else None


def floor_hits(signals: Signals, texts: dict, weight: float) -> tuple[list[str], float]:
    """What `with_keyword_floor` lifts for these signals (`texts`: key -> text), in keyword
    order, and the floor's weight (`weight`, the policy's).

    The keyword hits read are plain keyword search's (each text once; not the search without the
    query's names the ranking may fuse, `Policy.keyword_names`) but small talk said to a
    person the query names (`small_talk_to`: "love you Tibo", "gn Tibo"): a question naming
    Tibo matches those short messages on the name, and they would set the first score and the
    tail that the real matches have to stand out against (`standouts`; in a list shorter than
    its tail only when the query names someone and no time range: "What did Tom do in the week
    after the first surf lesson?" matches the lesson's message by its words, while the answer
    is what the time bonus ranks first). The hits lifted stand out and hold a word the query asks about beside its names (`asked_words`). For a question
    listing several things (`lists_several`) each thing is a part with its own first hit, and
    the floor weighs LIST_FLOOR at least: each thing's message gets a place among the first
    results as strong as the bonus-ranked list's (at the policy's 0.3 a thing's message from
    rank 40 lands near the 11th, behind the other things, the neighbours of the first one and
    the person's small talk)."""
    names = signals.names
    plain = [
        (item.key, score)
        for item, score in signals.keyword
        if score > 0 and not small_talk_to(str(texts.get(item.key) or ""), names)
    ]
    plain = distinct_texts(plain, texts)
    words = asked_words(signals.query, names)
    several = lists_several(signals.query)
    parts = (lambda key: held_words(str(texts.get(key) or ""), words)) if several else None
    standout = {key for key, _ in standouts(plain, parts, short=bool(names) and not signals.dated)}
    lifted = [key for key, _ in plain if key in standout and shares_words(str(texts.get(key) or ""), words)]
    return lifted, max(weight, LIST_FLOOR) if several else weight


def per_document(ranked: Sequence[T], source) -> list[T]:
    """`ranked` with each document's best candidate first, in order, then the others in order:
    documents compete, not chunks (the chunks of one long document cannot crowd out the others)."""
    seen: set[str] = set()
    first: list[T] = []
    rest: list[T] = []
    for item in ranked:
        key = source(item)
        (rest if key in seen else first).append(item)
        seen.add(key)
    return first + rest
