"""Graph retrieval and fusion over a knowledge base (the graph: store/knowledge/graph.py); the
`graph` and `fusion` presets of store/knowledge/handle.py rank with these.

`graph_ranking`: the query's entities are linked to the graph's (exact resolved names, else the
nearest entity embedding above LINK_SIMILARITY), keeping those with a chunk among the query's
first RELEVANT_DEPTH dense or keyword hits; a personalized PageRank over entities and chunks,
seeded by those entities (weighted by how specific they are: 1 / the chunks mentioning them)
and, more lightly, by the dense scores of the query's best chunks (PASSAGE_SEED_WEIGHT), with
the link of a chunk to what its document is about weighing SUBJECT_WEIGHT, ranks the chunks;
each result carries `path`, the entity names the walk went through from a query entity to it.
Without linked entities the dense order stands.

`fuse_rankings`: weighted reciprocal rank fusion of the hybrid (dense and keyword) and graph
rankings.

Both rank documents, not chunks (`search.per_document`), like every strategy.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import cast

import numpy as np
from langgraph.store.base import BaseStore, GetOp, Item

from store.backend import backend_for
from store.embeddings import get_embeddings
from store.fusion import reciprocal_rank_fusion
from store.graph_part import GraphData
from store.knowledge.config import COMMON_NAME_SHARE
from store.knowledge.extract import STOP_WORDS, SUBJECT_RELATION, entity_key, query_phrases
from store.knowledge.registry import chunk_namespace
from store.knowledge.search import Hit

DAMPING = 0.7  # probability of following an edge
ITERATIONS = 30
PASSAGE_SEED_WEIGHT = 0.01  # per dense seed (scaled by its score), next to the entity seeds (sum 1)
LINK_SIMILARITY = 0.8  # an unmatched query phrase links to its nearest entity at least this close
MAX_NGRAM = 6
PATH_DEPTH = 6  # nodes (entities and chunks) a path may run through
# A linked entity seeds the walk only when one of its chunks is among the first RELEVANT_DEPTH
# dense or keyword hits of the query, and unless it is a common name (`search.common_names`)
# the graph links to fewer chunks than hold it (the speakers of a chat log, whose turns open
# with their name): a name the question shares with a passage about something else must not
# steer the walk.
RELEVANT_DEPTH = 40
SUBJECT_WEIGHT = 4.0  # weight of the link between a chunk and the entity its document is about (others: 1)
DEGREE_DISCOUNT = 0.5  # chunk scores divided by degree ** this (a walk favours well-linked chunks)
# Fusion: weighted reciprocal rank fusion of the hybrid and graph rankings, with a small k so the
# top of each list counts (k = 60, the usual constant, lets documents both lists rank mediocrely
# beat a document only the graph reaches, the second hop).
FUSION_WEIGHTS = {"hybrid": 1.0, "graph": 3.0}
FUSION_K = 5


@dataclass
class _Walkable:
    """A loaded graph in array form: nodes are entities then chunks."""

    generation: int
    entities: list[str]
    names: dict[str, str]
    index: dict[str, int]  # entity key or "chunk:" + chunk key -> node
    chunks: list[str]
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    degree: np.ndarray
    neighbours: list[list[int]]
    chunk_count: np.ndarray  # per entity: chunks mentioning it
    vectors: np.ndarray | None
    vector_keys: list[str]


def _walkable(data: GraphData) -> _Walkable:
    entities = sorted(data.names)
    index = {key: i for i, key in enumerate(entities)}
    chunks = sorted({chunk for chunk, _ in data.mentions} | {c for c, *_ in data.relations if c})
    for offset, chunk in enumerate(chunks):
        index["chunk:" + chunk] = len(entities) + offset
    edges: dict[tuple[int, int], float] = {}
    counts = np.zeros(len(entities))
    subjects = {(chunk, head) for chunk, head, relation, _ in data.relations if relation == SUBJECT_RELATION}
    for chunk, key in data.mentions:
        if key in index:
            a, b = index[key], index["chunk:" + chunk]
            edges[(a, b)] = SUBJECT_WEIGHT if (chunk, key) in subjects else 1.0
            counts[a] += 1
    for _chunk, head, _relation, tail in data.relations:
        if head in index and tail in index:
            a, b = sorted((index[head], index[tail]))
            edges[(a, b)] = edges.get((a, b), 0.0) + 1.0
    size = len(entities) + len(chunks)
    pairs = list(edges)
    src = np.array([a for a, b in pairs] + [b for a, b in pairs], dtype=np.int64)
    dst = np.array([b for a, b in pairs] + [a for a, b in pairs], dtype=np.int64)
    weight = np.array([edges[p] for p in pairs] * 2, dtype=float)
    degree = np.bincount(src, weights=weight, minlength=size) if len(src) else np.zeros(size)
    neighbours: list[list[int]] = [[] for _ in range(size)]
    for a, b in pairs:
        neighbours[a].append(b)
        neighbours[b].append(a)
    keys = [key for key in entities if key in data.embeddings]
    vectors = None
    if keys:
        matrix = np.array([data.embeddings[key] for key in keys], dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        vectors = matrix / np.where(norms == 0, 1, norms)
    return _Walkable(
        data.generation,
        entities,
        data.names,
        index,
        chunks,
        src,
        dst,
        weight,
        degree,
        neighbours,
        counts,
        vectors,
        keys,
    )


async def _graph(store: BaseStore, kb: str) -> _Walkable:
    backend = backend_for(store).graph
    cached = backend.walks.get(kb)
    if cached is not None and cached.generation == await backend.generation(kb):
        return cast(_Walkable, cached)
    walkable = await asyncio.to_thread(_walkable, await backend.load(kb))
    return cast(_Walkable, backend.walks.put(kb, walkable))


async def link_entities(graph: _Walkable, query: str) -> dict[str, float]:
    """Query entities -> graph entity keys with a link strength: exact resolved matches of the
    query's word n-grams (1.0), then for each capitalised phrase of the query left unmatched its
    nearest entity by embedding (its cosine similarity, when at least LINK_SIMILARITY)."""
    words = query.replace("?", " ").replace(",", " ").split()
    linked: dict[str, float] = {}
    covered: set[str] = set()
    taken = [False] * len(words)  # words inside a longer match already linked
    for size in range(min(MAX_NGRAM, len(words)), 0, -1):
        for start in range(len(words) - size + 1):
            span = words[start : start + size]
            if all(taken[start : start + size]) or not any(word[:1].isupper() for word in span):
                continue  # part of a longer name, or no name at all ("chief of staff", "town")
            if size == 1 and (start == 0 or span[0].lower() in STOP_WORDS):
                continue  # capitalised only because it opens the question or a sentence ("Which")
            key = entity_key(" ".join(span))
            if key in graph.index and not key.startswith("chunk:"):
                linked[key] = 1.0
                covered.update(entity_key(w) for w in span)
                taken[start : start + size] = [True] * size
    phrases = [
        p for p in query_phrases(query) if entity_key(p) not in linked and not set(entity_key(p).split()) <= covered
    ]
    if phrases and graph.vectors is not None:
        vectors = np.array(await get_embeddings().aembed_documents(phrases), dtype=np.float32)
        vectors /= np.where(
            np.linalg.norm(vectors, axis=1, keepdims=True) == 0, 1, np.linalg.norm(vectors, axis=1, keepdims=True)
        )
        similarities = vectors @ graph.vectors.T
        for row in similarities:
            best = int(np.argmax(row))
            if row[best] >= LINK_SIMILARITY:
                key = graph.vector_keys[best]
                linked[key] = max(linked.get(key, 0.0), float(row[best]))
    return linked


def personalized_pagerank(graph: _Walkable, seeds: dict[int, float]) -> np.ndarray:
    """Stationary scores of a walk that follows an edge with probability DAMPING (weighted by
    edge weight) and otherwise restarts at a seed (by seed weight)."""
    size = len(graph.degree)
    restart = np.zeros(size)
    for node, value in seeds.items():
        restart[node] += value
    if restart.sum() <= 0:
        return restart
    restart /= restart.sum()
    scores = restart.copy()
    share = np.divide(
        graph.weight, graph.degree[graph.src], out=np.zeros_like(graph.weight), where=graph.degree[graph.src] > 0
    )
    for _ in range(ITERATIONS):
        spread = np.bincount(graph.dst, weights=scores[graph.src] * share, minlength=size)
        scores = (1 - DAMPING) * restart + DAMPING * spread
    return scores


def entity_paths(graph: _Walkable, starts: list[int], targets: set[int]) -> dict[int, list[str]]:
    """For each target chunk node, the entity names on a shortest path from a start entity."""
    parent: dict[int, int] = {node: -1 for node in starts}
    depth = {node: 1 for node in starts}
    queue = deque(starts)
    found: dict[int, list[str]] = {}
    while queue and len(found) < len(targets):
        node = queue.popleft()
        if node in targets and node not in found:
            path, step = [], node
            while step != -1:
                if step < len(graph.entities):
                    path.append(graph.names[graph.entities[step]])
                step = parent[step]
            found[node] = path[::-1]
        if depth[node] >= PATH_DEPTH:
            continue
        for neighbour in graph.neighbours[node]:
            if neighbour not in parent:
                parent[neighbour] = node
                depth[neighbour] = depth[node] + 1
                queue.append(neighbour)
    return found


@dataclass(frozen=True)
class GraphRanking:
    """The graph walk of one question: the chunks it ranks (best first; the dense hits it never
    reached after them), the dense hits that seeded it, and the entity path to each chunk."""

    hits: list[Hit]
    dense: list[Hit]
    paths: dict[str, list[str]]


async def graph_ranking(
    store: BaseStore,
    kb: str,
    entry: dict,
    query: str,
    names: set[str],
    dense: list[Hit],
    keyword: list[Hit],
    depth: int,
) -> GraphRanking:
    """The walk over `kb`'s graph for `query`, from signals already gathered: `names` (the query's
    common names, `search.common_names`), its `dense` hits (`depth` deep) and `keyword` hits (the
    first RELEVANT_DEPTH). Reads the graph (cached per generation) and the chunks the walk reached
    that no signal holds."""
    graph = await _graph(store, kb)
    first = len(graph.entities)
    relevant = {hit.id for hit in (*dense[:RELEVANT_DEPTH], *keyword[:RELEVANT_DEPTH])}
    common = {name.lower() for name in names}
    held = COMMON_NAME_SHARE * int(entry.get("chunks") or 0)  # chunks holding a common name, at least
    linked = {
        key: strength
        for key, strength in (await link_entities(graph, query)).items()
        if not (set(key.split()) <= common and graph.chunk_count[graph.index[key]] < held)
        and any(n >= first and graph.chunks[n - first] in relevant for n in graph.neighbours[graph.index[key]])
    }
    if not linked:
        return GraphRanking(dense, dense, {})
    seeds: dict[int, float] = {}
    for key, strength in linked.items():
        node = graph.index[key]
        seeds[node] = strength / max(1.0, graph.chunk_count[node])
    total = sum(seeds.values())
    seeds = {node: value / total for node, value in seeds.items()}
    top = dense[0].score if dense else 0.0
    for hit in dense:
        chunk_node = graph.index.get("chunk:" + hit.id)
        if chunk_node is not None and top > 0:
            seeds[chunk_node] = seeds.get(chunk_node, 0.0) + PASSAGE_SEED_WEIGHT * max(hit.score, 0.0) / top
    scores = await asyncio.to_thread(personalized_pagerank, graph, seeds)
    chunk_scores = scores[first:] / np.power(np.maximum(graph.degree[first:], 1.0), DEGREE_DISCOUNT)
    order = np.argsort(-chunk_scores, kind="stable")[:depth]
    ranked = [(graph.chunks[i], float(chunk_scores[i])) for i in order if chunk_scores[i] > 0]
    known = {key for key, _ in ranked}
    ranked += [(hit.id, 0.0) for hit in dense if hit.id not in known]  # chunks the graph never reached
    by_id = {hit.id: hit for hit in (*keyword, *dense)}
    missing = [key for key, _ in ranked if key not in by_id]
    items = cast(list[Item | None], await store.abatch([GetOp(chunk_namespace(kb), key, False) for key in missing]))
    by_id.update({key: Hit(key, dict(item.value), 0.0) for key, item in zip(missing, items, strict=True) if item})
    hits = [Hit(key, by_id[key].value, score) for key, score in ranked if key in by_id]
    starts = sorted(graph.index[key] for key in linked)
    targets = {graph.index["chunk:" + hit.id] for hit in hits[:depth] if "chunk:" + hit.id in graph.index}
    paths = entity_paths(graph, starts, targets)
    return GraphRanking(hits, dense, {graph.chunks[node - first]: path for node, path in paths.items()})


def fuse_rankings(rankings: dict[str, list[Hit]]) -> list[Hit]:
    """Weighted reciprocal rank fusion (FUSION_WEIGHTS, FUSION_K) of the named rankings; ties go
    to the graph's order. Each hit's score is its fused score."""
    ranks = {name: {hit.id: rank for rank, hit in enumerate(hits, 1)} for name, hits in rankings.items()}
    by_id = {hit.id: hit for hits in rankings.values() for hit in hits}
    names = list(rankings)
    scores = reciprocal_rank_fusion(
        [[hit.id for hit in rankings[name]] for name in names], FUSION_K, [FUSION_WEIGHTS[name] for name in names]
    )
    last = len(rankings.get("graph", [])) + 1
    fused = sorted(scores, key=lambda pair: (-pair[1], ranks.get("graph", {}).get(pair[0], last), pair[0]))
    return [Hit(key, by_id[key].value, score) for key, score in fused]
