"""Entities and relations of knowledge-base chunks, for the knowledge graph (store/knowledge/graph.py).

Two extractors, one result type (`Extraction`: entity surface forms and (head, relation, tail)
triples per chunk):

- `OfflineExtractor` (the default; deterministic, no model, no download): the document's title is
  the entity every chunk of it is about; the runs of capitalised words of each sentence ("Jarek
  Marost", "University of Copenhagen"), ended by punctuation and dates, are its other entities,
  and a run joining several names ("Martha Burns and Paul Gross") gives each of them too; two
  entities of one sentence are related (`co_occurs`), and the title entity `mentions` each
  entity of the chunk (SUBJECT_RELATION: the walk weighs a chunk's link to it more).
- `ModelExtractor`: the configured chat model with structured output, a batch of chunks per call,
  at most `max_chunks` chunks per ingest (the rest fall back to the offline extractor), results
  cached by chunk hash (`cache_key`) so a re-ingest calls the model only for changed chunks, and
  progress reported through a callback; a batch the model fails twice is extracted offline
  (logged, counted). Like the offline extractor, the title entity `mentions` each entity.

Entity resolution (`entity_key`): surface forms that name one entity get one key: case, accents,
punctuation, a leading "the", a possessive "'s" and a trailing parenthesised qualifier ("Lilu
(mythology)") do not count, and within a chunk a lone surname resolves to the full name it
shortens ("Marost" -> "Jarek Marost").
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from store.sentences import sentences

logger = logging.getLogger(__name__)

OFFLINE = "offline"
# (title, SUBJECT_RELATION, entity): the chunk's document is about `title`, which mentions `entity`.
SUBJECT_RELATION = "mentions"

# Words, "&", and the punctuation that ends a name (commas, quotes, brackets, dashes, colons).
_TOKEN = re.compile(r"[\w][\w'’.\-&]*|&|[,;:()\[\]{}\"“”‘«»—–!?¡¿/|]|(?<!\w)['’]|['’](?!\w)", re.UNICODE)
_CONNECTORS = {"of", "de", "du", "la", "le", "von", "van", "der", "den", "and", "&", "the", "for", "in", "on", "y"}
# A run of capitalised words is also split at these ("Martha Burns and Paul Gross", "Bethel
# University in Arden Hills"); at the others only where both sides have two words or more
# ("Trent Reznor of Nine Inch Nails", but "Bank of England" stays whole).
_LIST_CONNECTORS = {"and", "in", "on"}
_MONTHS = set(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split()  # noqa: SIM905
)
# Capitalised words that start sentences or name no entity.
_STOP = _MONTHS | set(
    """a an the this that these those it its he she they we i you his her their our my your there here
    in on at by for from with as of to and or but if when while after before since during until
    however although though also then thus so yet both either neither each every all some many most
    other another such no not one two three first second later early late what which who whom
    whose where why how is was are were be been being has have had do does did can could will would
    shall should must might mr mrs ms dr st""".split()  # noqa: SIM905
)
# Inside a sentence a capitalised word is part of a name ("Two Dollar Radio") unless it is one of these.
_FUNCTION_WORDS = _MONTHS | set(
    """a an the this that these those it its he she they we i you his her their our my your there here
    in on at by for from with as of to and or but if when while""".split()  # noqa: SIM905
)


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def entity_key(surface: str) -> str:
    """The resolved key of an entity's surface form ("" when nothing of it is left)."""
    text = _fold(surface).lower()
    text = re.sub(r"\s*\([^)]*\)\s*$", "", text)  # "lilu (mythology)" -> "lilu"
    text = re.sub(r"['’]s\b", "", text)
    text = re.sub(r"[^\w]+", " ", text).strip()
    text = re.sub(r"^the\s+", "", text)
    return text


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class Extraction:
    """What one chunk says: entity surface forms and (head, relation, tail) triples."""

    entities: list[str] = field(default_factory=list)
    triples: list[tuple[str, str, str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"entities": self.entities, "triples": [list(t) for t in self.triples]}

    @classmethod
    def from_dict(cls, value: dict) -> Extraction:
        return cls(list(value.get("entities") or []), [tuple(t) for t in value.get("triples") or []])  # type: ignore[misc]


@dataclass(frozen=True)
class ChunkText:
    """The input of an extractor: a chunk's text and its document's title."""

    key: str
    title: str | None
    content: str


STOP_WORDS = frozenset(_STOP)


def _split_run(run: list[str]) -> list[list[str]]:
    """The names a run of capitalised words joins: split at list connectors ("and", "in", "on")
    and, where both sides have two words or more, at the others."""
    parts: list[list[str]] = [[]]
    for position, word in enumerate(run):
        lower = word.lower()
        if lower in _LIST_CONNECTORS or (
            lower in _CONNECTORS
            and len(parts[-1]) >= 2
            and sum(1 for w in run[position + 1 :] if w.lower() not in _CONNECTORS) >= 2
        ):
            parts.append([])
        else:
            parts[-1].append(word)
    cleaned = []
    for part in parts:
        while part and part[-1].lower() in _CONNECTORS:
            part.pop()
        while part and part[0].lower() in _CONNECTORS:
            part.pop(0)
        if part:
            cleaned.append(part)
    return cleaned


def _phrases(sentence: str) -> list[tuple[str, bool, bool]]:
    """Runs of capitalised words, joined by connectors ("Bank of England"), minus stop words,
    ended by punctuation, dates and lower-case words; a run that joins several names ("Martha
    Burns and Paul Gross") also gives each of them. Each phrase comes with whether it is a lone
    word opening the sentence (capitalised by position only, as likely "Colleagues" as a name)
    and whether it joins several names."""
    found: list[tuple[str, bool, bool]] = []
    run: list[str] = []
    start = 0

    def close() -> None:
        opening = start == 0
        while run and run[-1].lower() in _CONNECTORS:
            run.pop()
        while run and run[0].lower() in (_STOP if opening else _FUNCTION_WORDS):
            run.pop(0)
            opening = False
        if run and not (len(run) == 1 and (len(run[0]) < 2 or run[0].isdigit())):
            parts = _split_run(run)
            joined = len(parts) > 1
            found.append((" ".join(run), opening and len(run) == 1, joined))
            if joined:
                for number, part in enumerate(parts):
                    if not (len(part) == 1 and part[0].isdigit()):
                        found.append((" ".join(part), opening and number == 0 and len(part) == 1, False))
        run.clear()

    tokens = _TOKEN.findall(sentence)
    words = 0
    for index, token in enumerate(tokens):
        bare = token.strip(".’'")
        if not bare or not (bare[0].isalnum() or bare == "&"):
            close()  # punctuation ends a name
            continue
        lower = bare.lower()
        if run and lower in _CONNECTORS and run[-1].lower() in _CONNECTORS:
            close()  # "Marost of the Bank": two connectors end a name
        elif run and lower in _MONTHS and index + 1 < len(tokens) and tokens[index + 1][:1].isdigit():
            close()  # "Two Dollar Radio in September 2010": a date ends a name
            start = words
            run.append(bare)
        elif bare[:1].isupper():
            if not run:
                start = words
            run.append(bare)
        elif run and lower in _CONNECTORS:
            run.append(bare)
        elif run and bare[:1].isdigit() and not run[-1][:1].isdigit() and run[-1].lower() not in _CONNECTORS:
            run.append(bare)  # "Heinkel HD 23"
        else:
            close()
        words += 1
    close()
    return found


def offline_extract(chunk: ChunkText) -> Extraction:
    """Entities and co-occurrence relations of one chunk, without a model (see the module doc)."""
    title = (chunk.title or "").strip()
    entities: list[str] = [title] if entity_key(title) else []
    triples: list[tuple[str, str, str]] = []
    seen = {entity_key(title)} if title else set()
    full_names: dict[str, str] = {}  # lone surname key -> the full name it shortens
    for sentence in sentences(chunk.content):
        in_sentence: list[str] = []
        for phrase, opening, joined in _phrases(sentence):
            key = entity_key(phrase)
            if not key:
                continue
            if " " not in key and key in full_names:
                phrase, key = full_names[key], entity_key(full_names[key])
            elif opening and key not in seen:
                continue  # a lone capitalised word opening a sentence, named nowhere else yet
            parts = key.split()
            if len(parts) > 1 and not joined:
                full_names.setdefault(parts[-1], phrase)
            if key not in seen:
                seen.add(key)
                entities.append(phrase)
            if phrase not in in_sentence:
                in_sentence.append(phrase)
        for i, head in enumerate(in_sentence):
            for tail in in_sentence[i + 1 : i + 4]:  # nearby pairs: bounded, dense sentences stay linear
                if entity_key(head) != entity_key(tail):
                    triples.append((head, "co_occurs", tail))
    if title:
        triples += [(title, SUBJECT_RELATION, entity) for entity in entities[1:]]
    return Extraction(entities, triples)


class OfflineExtractor:
    """The deterministic extractor (see the module doc)."""

    name = OFFLINE

    async def extract(
        self, chunks: Sequence[ChunkText], progress: Callable[[int, int], None] | None = None
    ) -> list[Extraction]:
        results = [offline_extract(chunk) for chunk in chunks]
        if progress is not None:
            progress(len(chunks), len(chunks))
        return results


class _Triple(BaseModel):
    head: str
    relation: str
    tail: str


class _ChunkGraph(BaseModel):
    index: int = Field(description="the chunk's number as given")
    entities: list[str] = Field(default_factory=list, description="named entities the chunk mentions")
    triples: list[_Triple] = Field(default_factory=list, description="facts as (head, relation, tail)")


class _BatchGraph(BaseModel):
    chunks: list[_ChunkGraph]


EXTRACTION_PROMPT = (
    "Extract a knowledge graph from each numbered passage. For every passage list its named "
    "entities (people, organisations, places, works, events, dates) and the facts linking them as "
    "(head, relation, tail) triples whose head and tail are entities of the passage. Use the "
    "entities' full names. Answer for every passage number."
)


class ModelExtractor:
    """Extraction by a chat model with structured output: `batch_size` chunks per call, at most
    `max_chunks` chunks through the model per `extract` call (the others: offline), results the
    model gave before reused by `cache_key` (a mapping kept by the caller: the graph's cache).
    A batch whose call fails twice (an error, or an answer that is not the schema) is extracted
    offline, logged as a warning and counted in `failures`; it is not cached, so a re-ingest asks
    the model again."""

    def __init__(
        self,
        model: Any,
        *,
        name: str = "model",
        batch_size: int = 8,
        max_chunks: int = 2000,
        cache: dict[str, Extraction] | None = None,
    ) -> None:
        self.model = model
        self.name = f"model:{name}"
        self.batch_size = max(1, batch_size)
        self.max_chunks = max(0, max_chunks)
        self.cache: dict[str, Extraction] = cache if cache is not None else {}
        self.failures = 0  # chunks extracted offline because the model's calls failed

    def cache_key(self, chunk: ChunkText) -> str:
        return content_hash(f"{self.name}\n{chunk.title or ''}\n{chunk.content}")

    async def _call(self, batch: Sequence[ChunkText]) -> list[Extraction]:
        passages = "\n\n".join(
            f"[{i}] {chunk.title + ': ' if chunk.title else ''}{chunk.content}" for i, chunk in enumerate(batch)
        )
        structured = self.model.with_structured_output(_BatchGraph)
        answer = await structured.ainvoke([("system", EXTRACTION_PROMPT), ("user", passages)])
        graph = answer if isinstance(answer, _BatchGraph) else _BatchGraph.model_validate(answer)
        by_index = {item.index: item for item in graph.chunks}
        results = []
        for i, chunk in enumerate(batch):
            item = by_index.get(i)
            if item is None:  # the model skipped it: the offline extraction stands in
                results.append(offline_extract(chunk))
                continue
            entities = [e.strip() for e in item.entities if entity_key(e)]
            if chunk.title and entity_key(chunk.title) not in {entity_key(e) for e in entities}:
                entities.insert(0, chunk.title)
            triples = [
                (t.head.strip(), t.relation.strip() or "related_to", t.tail.strip())
                for t in item.triples
                if entity_key(t.head) and entity_key(t.tail)
            ]
            if chunk.title:  # as offline: what the chunk's document is about mentions each entity
                title = entity_key(chunk.title)
                triples += [(chunk.title, SUBJECT_RELATION, e) for e in entities if entity_key(e) != title]
            results.append(Extraction(entities, triples))
        return results

    async def _extract_batch(self, batch: Sequence[ChunkText]) -> list[Extraction] | None:
        """The model's extractions of `batch`, asked twice at most; None when both calls fail
        (an error, or an answer that is not the schema), logged as a warning."""
        for attempt in (1, 2):
            try:
                return await self._call(batch)
            except Exception as exc:  # any failure of the model call: retried, then offline
                error = exc
                logger.warning("graph extraction by %s failed (attempt %d of 2): %s", self.name, attempt, exc)
        self.failures += len(batch)
        logger.warning("graph extraction by %s: %d chunks extracted offline instead (%s)", self.name, len(batch), error)
        return None

    async def extract(
        self, chunks: Sequence[ChunkText], progress: Callable[[int, int], None] | None = None
    ) -> list[Extraction]:
        results: list[Extraction | None] = [self.cache.get(self.cache_key(chunk)) for chunk in chunks]
        todo = [i for i, found in enumerate(results) if found is None]
        budget, done = todo[: self.max_chunks], len(chunks) - len(todo)
        for start in range(0, len(budget), self.batch_size):
            indexes = budget[start : start + self.batch_size]
            extracted = await self._extract_batch([chunks[i] for i in indexes])
            for i, extraction in zip(indexes, extracted or [], strict=False):
                results[i] = extraction
                self.cache[self.cache_key(chunks[i])] = extraction
            done += len(indexes)
            if progress is not None:
                progress(done, len(chunks))
        final = [
            found if found is not None else offline_extract(chunk) for found, chunk in zip(results, chunks, strict=True)
        ]
        if progress is not None:
            progress(len(chunks), len(chunks))
        return final


Extractor = OfflineExtractor | ModelExtractor


def query_phrases(query: str) -> list[str]:
    """The entity-like phrases of a query (its capitalised runs), for linking it to the graph."""
    return [phrase for sentence in sentences(query) for phrase, _, _ in _phrases(sentence)]
