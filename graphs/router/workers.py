"""Retrieve-only workers: stateless, one instance per `{kb_prefix}:{agent_type}:{agent_mode}`.

A worker only fetches evidence (`retrieve_with_trace`); it never generates an answer and holds
no session state, so one cached instance serves every thread (the cache key never contains a
thread or session id). New worker types join through `register_worker_type`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from langgraph.store.base import BaseStore

from graphs.router.protocol import AGENT_MODE, DEFAULT_KB, parse_worker_name
from store import knowledge
from store.lru import LRU


class RetrieveWorker(Protocol):
    """What the router needs from a worker."""

    @property
    def kb_prefix(self) -> str: ...  # read-only, so frozen dataclasses qualify

    @property
    def agent_type(self) -> str: ...

    async def retrieve_with_trace(
        self, store: BaseStore, query: str, *, thread_id: str | None, top_k: int
    ) -> dict[str, Any]:
        """The retrieve-only contract: {"context", "retrieval_results", "reference"}."""
        ...


@dataclass(frozen=True)
class KnowledgeWorker:
    """Searches one knowledge base with one strategy of `store.knowledge.retrieve`."""

    kb_prefix: str
    agent_type: str
    strategy: str

    async def retrieve_with_trace(
        self, store: BaseStore, query: str, *, thread_id: str | None, top_k: int
    ) -> dict[str, Any]:
        """Search the knowledge base; `thread_id` is only for tracing, never for caching."""
        _ = thread_id
        return await knowledge.retrieve(store, self.kb_prefix, query, strategy=self.strategy, top_k=top_k)


WorkerFactory = Callable[[str, str], RetrieveWorker]
"""(kb_prefix, agent_type) -> worker."""

_TYPES: dict[str, WorkerFactory] = {}
"""The registry of worker types: the six below at import, plus what `register_worker_type` adds."""
_INSTANCES: LRU[str, RetrieveWorker] = LRU(512)
"""Worker instances by instance key (`{kb}:{type}:{mode}`): a bounded LRU cache (store/lru.py) of
stateless workers, the least recently used of more than 512 made again when next asked for."""


def register_worker_type(agent_type: str, factory: WorkerFactory) -> None:
    """Make `agent_type` available to retrieval plans (replacing an earlier registration)."""
    _TYPES[agent_type] = factory
    for key, _ in _INSTANCES.items():
        if key.split(":")[1] == agent_type:
            _INSTANCES.pop(key)


def worker_types() -> list[str]:
    """Every registered worker type."""
    return sorted(_TYPES)


for _type, _strategy in (
    ("hybrid_agent", "hybrid"),
    ("dense_agent", "dense"),
    ("keyword_agent", "keyword"),
    ("naive_rag_agent", "dense"),  # the design's name for plain dense retrieval
    ("graph_agent", "graph"),  # knowledge-graph walk; results carry the entity `path`
    ("fusion_agent", "fusion"),  # dense, keyword and graph fused
):
    register_worker_type(_type, functools.partial(KnowledgeWorker, strategy=_strategy))


MULTI_HOP_AGENTS = ("fusion_agent", "graph_agent")
"""The worker types the router puts first for a multi-hop question (graphs/router/intent.py)."""


def instance_key(kb_prefix: str, agent_type: str, agent_mode: str = AGENT_MODE) -> str:
    """The cache key of a worker instance (no session, no thread)."""
    return f"{kb_prefix}:{agent_type}:{agent_mode}"


def get_worker(worker_name: str) -> RetrieveWorker:
    """The cached worker for `worker_name`, created on first use.

    Raises ValueError for a malformed name, a missing knowledge base or agent type, and an
    unknown agent type (naming the registered ones).
    """
    parsed = parse_worker_name(worker_name)
    kb = parsed.kb_prefix
    if not kb or kb == DEFAULT_KB or not parsed.agent_type:
        raise ValueError(f"worker_name {worker_name!r} names no knowledge base and agent type")
    factory = _TYPES.get(parsed.agent_type)
    if factory is None:
        raise ValueError(
            f"Unknown agent_type {parsed.agent_type!r} in worker_name {worker_name!r}; "
            f"registered: {', '.join(worker_types())}"
        )
    key = instance_key(kb, parsed.agent_type, parsed.agent_mode)
    return _INSTANCES.get(key) or _INSTANCES.put(key, factory(kb, parsed.agent_type))


def cached_instances() -> dict[str, RetrieveWorker]:
    """The live worker instances by instance key (for inspection and tests)."""
    return dict(_INSTANCES.items())
