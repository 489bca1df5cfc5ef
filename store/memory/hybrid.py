"""A user's memories of one kind as a corpus of the hybrid pipeline (store/hybrid.py): dense
candidates (the store's vectors), keyword candidates (BM25 over the memories' full text), the
speakers a query names (left out of its vector, rewarded by the speaker bonus) and thread
neighbours, all through the store's backend (store/backend.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from langgraph.store.base import BaseStore, GetOp, Item

from store import aspects
from store.backend import Backend, backend_for
from store.dates import expired
from store.hybrid import Candidate, Policy, Scored
from store.memory.attributes import aspects_namespace
from store.memory.config import LIST_DEPTH, PEOPLE_KEY, MemoryConfig
from store.names import without_names
from store.people import candidates, people, resolve

HYBRID_MIN_POOL = 50  # candidates per signal, at least: fusion needs depth to re-order
PASSAGE_DEPTH = 2  # items asked of the vector search per candidate wanted (see MemoryCorpus.dense)


def memory_policy(config: MemoryConfig, kind: str = "chat") -> Policy:
    """The hybrid ranking of memories of `kind`: min-max keyword scores, a speaker bonus, thread
    neighbours (one by the other speaker of its hit with its own bonus; the reply to a question at
    `answer_weight` of its score); chat messages sent in parts as one result."""
    return Policy(
        keyword_weight=config.keyword_weight,
        time_weight=config.time_weight,
        name_weight=config.speaker_weight,
        name_bonus="speaker",
        neighbour_weight=config.neighbour_weight,
        neighbour_turns=config.neighbour_turns,
        speaker_field="speaker",
        answer_weight=config.answer_weight,
        parts=kind == "chat",
    )


@dataclass
class MemoryCorpus:
    """The memories of namespace `ns` live at `now` whose values contain `wanted` (a role, a
    category)."""

    store: BaseStore
    ns: tuple
    wanted: dict
    config: MemoryConfig
    now: datetime
    backend: Backend = field(init=False)

    def __post_init__(self) -> None:
        self.backend = backend_for(self.store)

    def _live(self, value: dict) -> bool:
        return not expired(value, self.now) and all(value.get(k) == v for k, v in self.wanted.items())

    async def names(self, query: str) -> dict[str, frozenset[str]]:
        """The speakers the query names (none without a speaker weight), through the memory
        space's registry of people (store/people.py): by their recorded name, the names they go
        by, or a misspelling of one that no memory of this kind holds as a word of its own."""
        if not self.config.speaker_weight:
            return {}
        # the speakers and the registry together; a search, not a get: reading leaves no trace (an
        # in-memory store's get makes the namespace)
        speakers, profile = await asyncio.gather(
            self.backend.speakers(self.ns),
            self.store.asearch((*self.ns[:-1], "profile"), limit=2, refresh_ttl=False),
        )
        if not speakers:
            return {}
        registry = next((item.value for item in profile if item.key == PEOPLE_KEY), None)
        persons = people(speakers, registry)
        words = sorted(candidates(query, persons))
        held = await self.backend.memory_holds(self.ns, words, self.now)
        return resolve(query, persons, {word.lower() for word in held})

    async def dense(self, query: str, limit: int, span: tuple[datetime, datetime] | None = None) -> list[Scored]:
        """Vector hits; with `span` only memories written in [start, end). A long chat message has
        a vector per passage beside its text's (store/sentences.py) and the Postgres store reads
        2 x limit + 1 vectors before keeping each item's best, so chat searches ask for
        PASSAGE_DEPTH x `limit` items to still get `limit` (other kinds have no passages)."""
        depth = PASSAGE_DEPTH * limit if self.ns[-1] == "chat" else limit
        hits = await self.backend.vector_search(self.ns, query, depth, self.wanted, "created_at", span)
        found: list[Scored] = [(hit, hit.score or 0.0) for hit in hits if self._live(hit.value)]
        return found[:limit]

    async def keyword(self, query: str, limit: int) -> list[Scored]:
        """BM25 (item, score) of the live memories for `query`."""
        found = await self.backend.memory_keyword(self.ns, query, limit, self.wanted, self.now)
        return [(item, score) for item, score in found if self._live(item.value)]

    async def list_turns(self, query: str) -> list[Scored]:
        """For a list question naming people (`store.aspects.asked`: "What activities does Jo
        partake in?"), the turns of theirs its items come from, one per item first
        (`store.aspects.items_first`): the ids their person/attribute indexes hold for the aspects
        asked, ranked by the vector similarity of the turn to the query (the people's names left
        out, among each person's LIST_DEPTH closest messages, and those of the speakers who told of
        them, `told_by`: store/memory/attributes.py) plus REPORTED_WEIGHT for a turn telling what
        its writer did. [] for any other question, and in a space of no speakers."""
        kinds = aspects.asked(query)
        if not kinds or self.ns[-1] != "chat":
            return []
        persons = await self.names(query)
        if not persons:
            return []
        found = await self.store.abatch([GetOp(aspects_namespace(self.ns), person, False) for person in persons])
        stored = [item.value for item in found if isinstance(item, Item)]
        items = aspects.items_for([value.get("aspects") or {} for value in stored], kinds)
        if not items:
            return []
        vector_query = without_names(query, set().union(*persons.values()))
        hits: dict[str, Candidate] = {}
        score: dict[str, float] = {}
        told = {str(name) for value in stored for name in value.get("told_by") or ()} - set(persons)
        for person in [*persons, *sorted(told)]:
            wanted = {**self.wanted, "speaker": person}
            for hit in await self.backend.vector_search(
                self.ns, vector_query, PASSAGE_DEPTH * LIST_DEPTH, wanted, "created_at"
            ):
                if hit.key not in hits and self._live(hit.value):
                    hits[hit.key] = hit
                    score[hit.key] = hit.score or 0.0
        ranked = sorted(score, key=lambda key: -score[key])
        boosted = {
            key: value + aspects.REPORTED_WEIGHT * aspects.reported(str(hits[key].value.get("text") or ""))
            for key, value in score.items()
        }
        picked = aspects.items_first(ranked, items, lambda key: boosted.get(key, float("-inf")))
        return [(hits[key], score[key]) for key in picked if key in hits]

    async def neighbours(self, keys: Sequence[str], window: int) -> dict[str, list[Candidate]]:
        """The live neighbours (same filter) in the thread of each of `keys`."""
        near = await self.backend.neighbours(self.ns, keys, window) if keys and window > 0 else {}
        return {key: [item for item in items if self._live(item.value)] for key, items in near.items()}
