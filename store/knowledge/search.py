"""The pieces of knowledge-base retrieval the handle (store/knowledge/handle.py) ranks with: a
knowledge base as a corpus of the hybrid pipeline (`KnowledgeBaseCorpus`: dense hits from the
store's vectors, keyword hits from BM25, neighbours), its ranking policy (`kb_policy`), the
checks of a query and the result contract (`_result`). Every strategy returns each chunk text
once (a KB of chat logs or boilerplate repeats texts). Vector searches embed the query without
the names most chunks hold (`common_names`, store/names.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from langgraph.store.base import BaseStore

from store import hybrid
from store.backend import backend_for
from store.embeddings import embed_ahead
from store.fusion import distinct_texts
from store.hybrid import Scored, per_document
from store.knowledge import people as kb_people
from store.knowledge.config import (
    COMMON_NAME_SHARE,
    MAX_TOP_K,
    NEIGHBOUR_GAP,
    STRATEGIES,
    KnowledgeConfig,
)
from store.knowledge.parse import shown_source
from store.knowledge.registry import chunk_namespace
from store.names import capitalised_words, without_names
from store.people import Person, candidates, resolve


@dataclass(frozen=True)
class Hit:
    id: str
    value: dict
    score: float

    @property
    def key(self) -> str:
        """The chunk id, as `store.hybrid.Candidate` names it."""
        return self.id


def _check_query(query: str, top_k: int, strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}.")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise ValueError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}.")
    return query.strip()


async def dense_hits(
    store: BaseStore, kb: str, query: str, limit: int, span: tuple[datetime, datetime] | None = None
) -> list[Hit]:
    """Vector hits, best first; with `span` only chunks of documents dated in [start, end)."""
    items = await backend_for(store).vector_search(chunk_namespace(kb), query, limit, {}, "date", span)
    return [Hit(item.key, dict(item.value), float(item.score or 0.0)) for item in items if item.score is not None]


def _distinct(hits: list[Hit], top_k: int) -> list[Hit]:
    """The first `top_k` hits with each chunk text once, one chunk per document before any second."""
    by_id = {hit.id: hit for hit in hits}
    kept = distinct_texts([(hit.id, hit.score) for hit in hits], {hit.id: hit.value["content"] for hit in hits})
    return per_document([by_id[doc_id] for doc_id, _ in kept], lambda hit: hit.value["source"])[:top_k]


async def _keyword_hits(store: BaseStore, kb: str, entry: dict, query: str, limit: int) -> list[Hit]:
    """BM25 hits, best first (`Backend.kb_keyword`)."""
    found = await backend_for(store).kb_keyword(chunk_namespace(kb), kb, entry, query, limit)
    return [Hit(item.key, dict(item.value), score) for item, score in found]


async def common_names(store: BaseStore, kb: str, entry: dict, query: str) -> set[str]:
    """The capitalised words of `query` (past its first) that at least COMMON_NAME_SHARE of
    `kb`'s chunks hold: the people of a chat log, a product in its own manual. They tell the
    chunks apart no better than "the" does, yet pull a query vector towards every chunk holding
    them, so vector searches leave them out (full-text search weighs them by their rarity)."""
    words = capitalised_words(query)
    chunks = int(entry.get("chunks") or 0)
    if not words or not chunks:
        return set()
    frequencies = await backend_for(store).kb_document_frequencies(chunk_namespace(kb), kb, sorted(words))
    return {word for word, count in frequencies.items() if count >= COMMON_NAME_SHARE * chunks}


def _candidate_depth(top_k: int) -> int:
    return min(100, max(4 * top_k, 40))


def _locator(value: dict) -> str:
    parts = [shown_source(value["source"])]
    if value.get("page"):
        parts.append(f"page {value['page']}")
    if value.get("section"):
        parts.append(f"section {value['section']}")
    return ", ".join(parts)


def _result(
    kb: str,
    query: str,
    strategy: str,
    hits: list[tuple[Hit, dict[str, int | None]]],
    parts: Mapping[str, list[dict]] | None = None,
) -> dict:
    """The retrieve-only contract: {"context", "retrieval_results", "reference"} (+ kb, query,
    strategy). A chunk standing for a chat message sent in parts (`parts`: chunk id -> the parts'
    values with their "id", in order) carries them as `parts` ({"id", "source", "date",
    "content"} each), and its passage in the context is the message whole."""
    results, reference, passages = [], [], []
    parts = parts or {}
    for index, (hit, ranks) in enumerate(hits, 1):
        value = hit.value
        message = parts.get(hit.id)
        common = {
            "index": index,
            "id": hit.id,
            "source": shown_source(value["source"]),
            "title": value.get("title"),
            "position": value.get("position"),
            "page": value.get("page"),
            "section": value.get("section"),
            "date": value.get("date"),
        }
        results.append(
            {
                **common,
                "content": value["content"],
                "score": round(hit.score, 6),
                "strategy": strategy,
                "rank": index,
                "ranks": ranks,
                **({"parts": [_part(part) for part in message]} if message else {}),
            }
        )
        reference.append(common)
        passages.append(
            f"[{index}] {value.get('title') or common['source']} ({_locator(value)})\n{result_content(results[-1])}"
        )
    return {
        "kb": kb,
        "query": query,
        "strategy": strategy,
        "context": "\n\n".join(passages),
        "retrieval_results": results,
        "reference": reference,
    }


def result_content(result: Mapping) -> str:
    """A retrieval result's text: for a chat message sent in parts (its `parts`), the message
    whole, its parts' contents one a line."""
    parts = result.get("parts")
    return "\n".join(str(part.get("content") or "") for part in parts) if parts else str(result.get("content") or "")


def _part(value: dict) -> dict:
    """One part of a chat message sent in parts, as a result shows it."""
    return {
        "id": value["id"],
        "source": shown_source(value["source"]),
        "date": value.get("date"),
        "content": value["content"],
    }


def kb_policy(config: KnowledgeConfig, keyword_weight: float | None = None) -> hybrid.Policy:
    """The hybrid ranking of knowledge bases: keyword scores as given (a share of the query's
    BM25 ceiling), a bonus for chunks holding the query's `common_names`, neighbours (the chunks
    next to a hit in its document, the documents dated next to it within NEIGHBOUR_GAP: the
    messages around a message of a chat log; the reply to a message asking a question scores
    `answer_weight` of it, `store.hybrid.reply_to`), documents compete, and plain keyword search's
    hits that stand out keep a place among the first (`keyword_floor`, `store.floor.with_keyword_floor`);
    in a chat log, a message sent in parts (documents of one "Name: ..." line each) is one result."""
    return hybrid.Policy(
        keyword_weight=config.hybrid_keyword_weight if keyword_weight is None else keyword_weight,
        time_weight=config.time_weight,
        name_weight=config.name_weight,
        keyword_method="given",
        neighbour_weight=config.neighbour_weight,
        neighbour_turns=config.neighbour_turns,
        neighbour_gap=NEIGHBOUR_GAP,
        keyword_floor=config.keyword_floor,
        answer_weight=config.answer_weight,
        text_field="content",
        date_field="date",
        document_field="source",
        parts=True,
        keyword_names=False,
    )


@dataclass
class KnowledgeBaseCorpus:
    """Knowledge base `kb` (registry entry `entry`) as a corpus of the hybrid pipeline; without
    `by_meaning` (a keyword-only search) it has no dense candidates, so keyword search needs no
    vector index."""

    store: BaseStore
    kb: str
    entry: dict
    by_meaning: bool = True
    _persons: asyncio.Future[list[Person]] | None = field(default=None, init=False, repr=False, compare=False)
    _ahead: asyncio.Future[None] | None = field(default=None, init=False, repr=False, compare=False)

    def embed_ahead(self, query: str) -> None:
        """Start embedding what the vector searches will embed (`store.embeddings.embed_ahead`):
        `query` without the names of the knowledge base's people it names (`names` leaves them
        out), once they are read; `query` as it is in a knowledge base without people."""
        if not self.entry.get("people"):
            embed_ahead(self.store, query)
            return

        async def ahead() -> None:
            found = resolve(query, await self.persons())
            embed_ahead(self.store, without_names(query, set().union(*found.values()) if found else set()))

        self._ahead = asyncio.ensure_future(ahead())
        self._ahead.add_done_callback(lambda task: task.cancelled() or task.exception())

    def persons(self) -> asyncio.Future[list[Person]]:
        """The people of the knowledge base's chat logs (store/knowledge/people.py), read once per
        corpus (a handle's `gather` builds one per question), started at the first call so that
        other reads go on meanwhile."""
        if self._persons is None:
            self._persons = asyncio.ensure_future(kb_people.persons_of(self.store, self.kb, self.entry))
        return self._persons

    async def names(self, query: str) -> dict[str, frozenset[str]]:
        """The people of the knowledge base's chat logs the query names, by any of their names or
        a misspelling no chunk holds (store/knowledge/people.py, `store.people.resolve`), and
        the query's other common names (`common_names`), each a person of its own."""
        persons_read = self.persons()
        common = await common_names(self.store, self.kb, self.entry, query)
        persons = await persons_read
        found: dict[str, frozenset[str]] = {}
        if persons:
            words = sorted(candidates(query, persons))
            counts = (
                await backend_for(self.store).kb_document_frequencies(chunk_namespace(self.kb), self.kb, words)
                if words
                else {}
            )
            found = resolve(query, persons, {w.lower() for w, count in counts.items() if count})
        taken = {name.lower() for names in found.values() for name in names}
        return found | {name: frozenset({name}) for name in common if name.lower() not in taken}

    async def dense(self, query: str, limit: int, span: tuple[datetime, datetime] | None = None) -> list[Scored]:
        if not self.by_meaning:
            return []
        return [(hit, hit.score) for hit in await dense_hits(self.store, self.kb, query, limit, span)]

    async def keyword(self, query: str, limit: int) -> list[Scored]:
        return [(hit, hit.score) for hit in await _keyword_hits(self.store, self.kb, self.entry, query, limit)]

    async def neighbours(self, keys: Sequence[str], window: int) -> dict[str, list[hybrid.Candidate]]:
        """The chunks next to each of `keys`: in its document, and the documents dated next to it."""
        near = await backend_for(self.store).kb_neighbours(chunk_namespace(self.kb), keys, window) if keys else {}
        return {key: [Hit(item.key, dict(item.value), 0.0) for item in items] for key, items in near.items()}
