"""A knowledge base opened once: `open(store, name, reader=..., config=...)` -> `KnowledgeBase`.

Opening resolves, once, what every operation on a knowledge base needs: its registry entry (one
registry read, with the read check of `reader`), its namespace, the store's backend and the
ranking policy (built from the `KnowledgeConfig` given, by default the environment's, read once).
The handle owns `search`, `gather` and `rank`, the ingest operations, `delete_source` and
`delete`; every caller (tools, router workers, HTTP routes, MCP, the CLI, deep_research) goes
through one, so no caller can skip a step.

Searching is two steps. `KnowledgeBase.gather` collects one question's signals once: the names of the query
that most chunks hold (one document-frequency query), one query embedding (store/embeddings.py
keeps it), the dense hits, one BM25 query, the dense hits dated in the time range the query
names, the neighbours of the top hits and, when a graph strategy is asked for, the graph walk
seeded by the same hits. `rank` turns the gathered signals into one strategy's result without
touching the store: each strategy (dense, keyword, hybrid, graph, fusion) is a pure ranking
preset (`PRESETS`). A question asked of several strategies (the router's workers) gathers once and
ranks many times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, cast

from langgraph.store.base import BaseStore

from store import aspects, hybrid
from store.knowledge import aspects as kb_aspects
from store.knowledge.config import MAX_TOP_K, KnowledgeConfig, knowledge_config
from store.knowledge.graph_search import RELEVANT_DEPTH, GraphRanking, fuse_rankings, graph_ranking
from store.knowledge.ingest import delete_document, ingest_bytes, ingest_texts
from store.knowledge.registry import chunk_namespace, delete_kb, get_kb
from store.knowledge.search import (
    Hit,
    KnowledgeBaseCorpus,
    _candidate_depth,
    _check_query,
    _distinct,
    _result,
    kb_policy,
)

GRAPH_STRATEGIES = frozenset({"graph", "fusion"})
"""The strategies that need the graph walk."""
FUSED_STRATEGIES = frozenset({"hybrid", "fusion"})
"""The strategies that fuse dense and keyword hits (and so need the dated hits and neighbours)."""


@dataclass(frozen=True)
class Gathered:
    """One question's signals over one knowledge base, gathered once (`KnowledgeBase.gather`).

    `signals` are as deep as the deepest of `strategies` needs (`depths`); `graph` is the
    graph walk when a graph strategy was asked for, except on a `conversation`: a knowledge base
    of chat logs of two or more people (store/knowledge/people.py), where graph and fusion rank as
    hybrid (`_as_hybrid`) and no walk is made; `listed`: for a list question naming people, the
    chunks of the list's items, one of which comes after every `list_interleave` hits of the
    hybrid ranking (`_with_listed`). Every strategy of `strategies` ranks them (`rank`) without
    another store call."""

    kb: str
    policy: hybrid.Policy
    query: str
    top_k: int
    strategies: frozenset[str]
    signals: hybrid.Signals
    graph: GraphRanking | None = None
    conversation: bool = False
    listed: tuple[Hit, ...] = ()  # a list question's chunks of the list's items (store/knowledge/aspects.py)
    list_interleave: int = 0

    def as_data(self) -> dict[str, Any]:
        """These signals as plain data (JSON types only, each chunk's value once: what a graph may
        pass between nodes, as the router's `Send`s to its workers do); `from_data` reads it back."""
        values: dict[str, dict] = {}

        def pairs(scored: Iterable[tuple[Any, float]]) -> list[list]:
            listed = []
            for item, score in scored:
                values.setdefault(item.key, dict(item.value))
                listed.append([item.key, score])
            return listed

        signals = self.signals
        policy = asdict(self.policy)
        if policy["neighbour_gap"] is not None:
            policy["neighbour_gap"] = policy["neighbour_gap"].total_seconds()
        data: dict[str, Any] = {
            "kb": self.kb,
            "policy": policy,
            "query": self.query,
            "top_k": self.top_k,
            "strategies": sorted(self.strategies),
            "signal_query": signals.query,
            "dense": pairs(signals.dense),
            "keyword": pairs(signals.keyword),
            "keyword_nameless": None if signals.keyword_nameless is None else pairs(signals.keyword_nameless),
            "dated": pairs(signals.dated),
            "names": sorted(signals.names),
            "people": {person: sorted(names) for person, names in signals.people.items()},
            "neighbours": {
                key: [pair[0] for pair in pairs((item, 0.0) for item in items)]
                for key, items in signals.neighbours.items()
            },
            "graph": None,
            "conversation": self.conversation,
            "listed": pairs((hit, hit.score) for hit in self.listed),
            "list_interleave": self.list_interleave,
        }
        if self.graph is not None:
            data["graph"] = {
                "hits": pairs((hit, hit.score) for hit in self.graph.hits),
                "dense": pairs((hit, hit.score) for hit in self.graph.dense),
                "paths": self.graph.paths,
            }
        data["values"] = values
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Gathered:
        """The `Gathered` that `as_data` wrote."""
        values = data["values"]

        def hits(pairs: list[list]) -> list[Hit]:
            return [Hit(key, values[key], float(score)) for key, score in pairs]

        def scored(pairs: list[list]) -> list[hybrid.Scored]:
            return [(hit, hit.score) for hit in hits(pairs)]

        signals = hybrid.Signals(
            data["signal_query"],
            scored(data["dense"]),
            scored(data["keyword"]),
            scored(data["dated"]),
            set(data["names"]),
            {key: [Hit(k, values[k], 0.0) for k in keys] for key, keys in data["neighbours"].items()},
            {person: frozenset(names) for person, names in (data.get("people") or {}).items()},
            None if data.get("keyword_nameless") is None else scored(data["keyword_nameless"]),
        )
        graph = data.get("graph")
        walk = None
        if graph is not None:
            walk = GraphRanking(hits(graph["hits"]), hits(graph["dense"]), dict(graph["paths"]))
        policy = dict(data["policy"])
        if policy["neighbour_gap"] is not None:
            policy["neighbour_gap"] = timedelta(seconds=policy["neighbour_gap"])
        return cls(
            data["kb"],
            hybrid.Policy(**policy),
            data["query"],
            data["top_k"],
            frozenset(data["strategies"]),
            signals,
            walk,
            bool(data.get("conversation")),
            tuple(hits(data.get("listed") or [])),
            int(data.get("list_interleave") or 0),
        )


def depths(top_k: int) -> tuple[int, int]:
    """(candidates a strategy ranks for `top_k` results, candidates fusion's hybrid ranking ranks):
    fusion fuses the hybrid ranking `min(depth, MAX_TOP_K)` documents deep with the graph's."""
    depth = _candidate_depth(top_k)
    return depth, _candidate_depth(min(depth, MAX_TOP_K))


def _ranks(hits: list[Hit], name: str) -> list[tuple[Hit, dict[str, int | None]]]:
    return [(hit, {name: rank}) for rank, hit in enumerate(hits, 1)]


def _dense(gathered: Gathered) -> dict:
    depth, _ = depths(gathered.top_k)
    hits = _distinct(cast(list[Hit], [hit for hit, _ in gathered.signals.dense[:depth]]), gathered.top_k)
    return _result(gathered.kb, gathered.query, "dense", _ranks(hits, "dense"))


def _keyword(gathered: Gathered) -> dict:
    depth, _ = depths(gathered.top_k)
    hits = _distinct(cast(list[Hit], [hit for hit, _ in gathered.signals.keyword[:depth]]), gathered.top_k)
    return _result(gathered.kb, gathered.query, "keyword", _ranks(hits, "keyword"))


def _hybrid_ranking(gathered: Gathered, depth: int) -> list[hybrid.Ranked]:
    return _with_listed(hybrid.rank(gathered.signals.sliced(depth), gathered.policy), gathered)


def _with_listed(ranked: list[hybrid.Ranked], gathered: Gathered) -> list[hybrid.Ranked]:
    """`ranked` (as many) with one of `gathered.listed` after every `list_interleave` of them,
    each chunk once, each document's best first (`hybrid.per_document`); a chunk brought in
    scores as the hit before it."""
    if not gathered.listed or not gathered.list_interleave:
        return ranked
    found = {r.item.key: r for r in ranked}
    folded = {part.key for r in ranked for part in r.parts if part.key != r.item.key}  # in a hit's message
    listed = [hit for hit in gathered.listed if hit.id not in folded]
    for hit in listed:
        found.setdefault(hit.id, hybrid.Ranked(hit, hit.score, hit.score, {"dense": None, "keyword": None}))
    first = [r.item.key for r in ranked]
    order = aspects.interleaved(first, [hit.id for hit in listed], gathered.list_interleave)
    merged: list[hybrid.Ranked] = []
    for entry in hybrid.per_document([found[key] for key in order], lambda r: r.item.value["source"]):
        if merged and entry.score > merged[-1].score:
            entry = replace(entry, score=merged[-1].score)
        merged.append(entry)
    return merged[: len(ranked)]


def _hybrid(gathered: Gathered) -> dict:
    depth, _ = depths(gathered.top_k)
    ranked = _hybrid_ranking(gathered, depth)[: gathered.top_k]
    hits = [(Hit(r.item.key, r.item.value, r.score), r.ranks) for r in ranked]
    return _result(gathered.kb, gathered.query, "hybrid", hits, _parts(ranked))


def _parts(ranked: list[hybrid.Ranked]) -> dict[str, list[dict]]:
    """Chunk id -> the parts of the chat message sent in parts it stands for (`hybrid.with_parts`)."""
    return {r.item.key: [{"id": part.key, **part.value} for part in r.parts] for r in ranked if r.parts}


def _with_paths(result: dict, paths: Mapping[str, list[str]]) -> dict:
    for item in result["retrieval_results"]:
        item["path"] = paths.get(item["id"], [])
    return result


def _walk(gathered: Gathered) -> GraphRanking:
    if gathered.graph is None:
        raise ValueError("these signals were gathered without the graph walk: gather with a graph strategy")
    return gathered.graph


def _as_hybrid(gathered: Gathered, strategy: str) -> dict:
    """`strategy`'s result on a knowledge base of chat logs: the hybrid ranking (graph rank None,
    path empty). On conversations the graph's entities are mostly the speakers, who are in every
    chunk, and its walk ranked below hybrid search on every measured slice, so no walk is made
    there (`KnowledgeBase.gather`): it would cost an embedding of the query's phrases and the walk
    for nothing that ranks. Signals gathered with a walk (before this) keep their annotations."""
    depth, _ = depths(gathered.top_k)
    walk = gathered.graph
    graph_rank = {hit.id: rank for rank, hit in enumerate(walk.hits, 1)} if walk else {}
    ranked = _hybrid_ranking(gathered, depth)[: gathered.top_k]
    hits = [(Hit(r.item.key, r.item.value, r.score), {**r.ranks, "graph": graph_rank.get(r.item.key)}) for r in ranked]
    result = _result(gathered.kb, gathered.query, strategy, hits, _parts(ranked))
    return _with_paths(result, walk.paths if walk else {})


def _graph(gathered: Gathered) -> dict:
    if gathered.conversation:
        return _as_hybrid(gathered, "graph")
    walk = _walk(gathered)
    kept = _distinct(walk.hits, gathered.top_k)
    return _with_paths(_result(gathered.kb, gathered.query, "graph", _ranks(kept, "graph")), walk.paths)


def _fusion(gathered: Gathered) -> dict:
    """Reciprocal rank fusion of the hybrid ranking (`depths`' second figure deep) and the graph's
    (on a knowledge base of chat logs, the hybrid ranking: `_as_hybrid`)."""
    if gathered.conversation:
        return _as_hybrid(gathered, "fusion")
    walk = _walk(gathered)
    depth, deep = depths(gathered.top_k)
    ranked = _hybrid_ranking(gathered, deep)[: min(depth, MAX_TOP_K)]
    hybrid_hits = [Hit(r.item.key, r.item.value, r.score) for r in ranked]
    hybrid_ranks = {r.item.key: r.ranks for r in ranked}
    dense_rank = {hit.id: rank for rank, hit in enumerate(walk.dense, 1)}
    graph_rank = {hit.id: rank for rank, hit in enumerate(walk.hits, 1)}
    kept = _distinct(fuse_rankings({"hybrid": hybrid_hits, "graph": walk.hits}), gathered.top_k)
    hits = [
        (
            hit,
            {
                "dense": hybrid_ranks.get(hit.id, {}).get("dense", dense_rank.get(hit.id)),
                "keyword": hybrid_ranks.get(hit.id, {}).get("keyword"),
                "graph": graph_rank.get(hit.id),
            },
        )
        for hit in kept
    ]
    return _with_paths(_result(gathered.kb, gathered.query, "fusion", hits), walk.paths)


PRESETS: Mapping[str, Callable[[Gathered], dict]] = MappingProxyType(
    {"dense": _dense, "keyword": _keyword, "hybrid": _hybrid, "graph": _graph, "fusion": _fusion}
)
"""Strategy -> its ranking of gathered signals (pure: no store call). Read-only."""


def rank(gathered: Gathered, strategy: str) -> dict:
    """`strategy`'s result over `gathered` (one of the strategies it was gathered for), without a
    store call: the retrieve-only contract {"context", "retrieval_results", "reference"} (+ kb,
    query, strategy)."""
    if strategy not in gathered.strategies:
        raise ValueError(f"these signals were gathered for {', '.join(sorted(gathered.strategies))}, not {strategy!r}")
    return PRESETS[strategy](gathered)


@dataclass(frozen=True)
class KnowledgeBase:
    """Knowledge base `name` of `store`, opened (`open`): its registry `entry` as read then, its
    `config` and ranking `policy`. Search, ingest and delete through it."""

    store: BaseStore
    name: str
    entry: dict
    config: KnowledgeConfig
    policy: hybrid.Policy

    @property
    def namespace(self) -> tuple[str, str]:
        return chunk_namespace(self.name)

    @property
    def corpus(self) -> KnowledgeBaseCorpus:
        return KnowledgeBaseCorpus(self.store, self.name, self.entry)

    def with_keyword_weight(self, keyword_weight: float) -> KnowledgeBase:
        """This handle ranking hybrid with another keyword share (evaluations, tuning)."""
        return replace(self, policy=replace(self.policy, keyword_weight=keyword_weight))

    async def gather(
        self,
        query: str,
        *,
        top_k: int = 5,
        strategies: Iterable[str] = ("hybrid",),
        now: datetime | None = None,
    ) -> Gathered:
        """Gather `query`'s signals once for `strategies` (see the module doc). Raises ValueError
        for an empty query, top_k outside 1..MAX_TOP_K or an unknown strategy."""
        wanted = frozenset(strategies)
        if not wanted:
            raise ValueError("gather needs at least one strategy")
        for strategy in sorted(wanted):
            query = _check_query(query, top_k, strategy)
        # The vector searches embed the query without the names most chunks hold (none, or the
        # people of a chat log): embedding starts now, while the names and the keyword hits are
        # looked up (`KnowledgeBaseCorpus.embed_ahead`).
        corpus = self.corpus if wanted != {"keyword"} else replace(self.corpus, by_meaning=False)
        if corpus.by_meaning:
            corpus.embed_ahead(query)
        # graph and fusion rank as hybrid on chat logs (`_as_hybrid`), without a walk; the names
        # lookup reads the same people (`KnowledgeBaseCorpus.persons`, read once)
        conversation = bool(wanted & GRAPH_STRATEGIES) and len(await corpus.persons()) >= 2
        depth, deep = depths(top_k)
        if "fusion" in wanted and not conversation:
            depth = deep
        policy = self.policy
        if not wanted & FUSED_STRATEGIES and not conversation:  # dense, keyword and graph: no dates, no neighbours
            policy = replace(policy, time_weight=0.0, neighbour_weight=0.0)
        signals = await hybrid.gather(corpus, policy, query, depth, now or datetime.now(UTC))
        walk = None
        if wanted & GRAPH_STRATEGIES and not conversation:
            graph_depth, _ = depths(top_k)
            walk = await graph_ranking(
                self.store,
                self.name,
                self.entry,
                query,
                signals.names,
                cast(list[Hit], [hit for hit, _ in signals.dense[:graph_depth]]),
                cast(list[Hit], [hit for hit, _ in signals.keyword[:RELEVANT_DEPTH]]),
                graph_depth,
            )
        listed: list[Hit] = []
        if self.config.list_interleave and (wanted & FUSED_STRATEGIES or conversation) and signals.people:
            listed = await kb_aspects.listed(self.store, self.name, query, signals.people)
        return Gathered(
            self.name,
            self.policy,
            query,
            top_k,
            wanted,
            signals,
            walk,
            conversation,
            tuple(listed),
            self.config.list_interleave,
        )

    async def search(
        self, query: str, *, strategy: str = "hybrid", top_k: int = 5, now: datetime | None = None
    ) -> dict[str, Any]:
        """`rank` of `gather` for one strategy."""
        return rank(await self.gather(query, top_k=top_k, strategies=(strategy,), now=now), strategy)

    async def ingest_texts(self, documents: list[dict], **options: Any) -> list[dict]:
        """`store.knowledge.ingest.ingest_texts` into this knowledge base."""
        return await ingest_texts(self.store, self.name, documents, **options)

    async def ingest_bytes(self, data: bytes, source: str, **options: Any) -> dict:
        """`store.knowledge.ingest.ingest_bytes` into this knowledge base."""
        return await ingest_bytes(self.store, self.name, data, source, **options)

    async def delete_source(self, source: str) -> int | None:
        """Delete one document (its chunks, full text, graph links and record): the number of
        chunks deleted, None when the knowledge base holds no such document."""
        return await delete_document(self.store, self.name, source)

    async def delete(self) -> dict:
        """Delete the whole knowledge base; returns its registry entry as it was."""
        return await delete_kb(self.store, self.name)


async def open(
    store: BaseStore, name: str, *, reader: str | None = None, config: KnowledgeConfig | None = None
) -> KnowledgeBase:
    """Open knowledge base `name` for the user `reader` (None: no read check, for operators and
    the CLI): one registry read. `config` defaults to the environment's KB_* settings.

    Raises KBUnknownError (a ValueError listing what `reader` may read) for a knowledge base that
    does not exist or that `reader` may not read."""
    entry = await get_kb(store, name, reader=reader)
    config = config or knowledge_config()
    return KnowledgeBase(store, name, entry, config, kb_policy(config))
