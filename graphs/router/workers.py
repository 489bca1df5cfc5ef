"""Retrieve-only worker types: each names a ranking preset of store/knowledge/handle.py.

A worker only ranks the evidence its question's gathered signals hold (graphs/router/retrieval.py);
it never generates an answer and holds no state. The worker name `{kb_prefix}:{agent_type}:{agent_mode}`
(graphs/router/protocol.py) says which knowledge base and which preset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from graphs.router.protocol import DEFAULT_KB, parse_worker_name

WORKER_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "hybrid_agent": "hybrid",
        "dense_agent": "dense",
        "keyword_agent": "keyword",
        "naive_rag_agent": "dense",  # the design's name for plain dense retrieval
        "graph_agent": "graph",  # knowledge-graph walk; results carry the entity `path`
        "fusion_agent": "fusion",  # hybrid and graph fused
    }
)
"""Worker type -> the strategy (ranking preset) it ranks with. Read-only."""

MULTI_HOP_AGENTS = ("fusion_agent", "graph_agent")
"""The worker types the router puts first for a multi-hop question (graphs/router/intent.py)."""


def worker_types() -> list[str]:
    """Every worker type."""
    return sorted(WORKER_TYPES)


@dataclass(frozen=True)
class Worker:
    """What a worker name stands for: a knowledge base, a worker type and its strategy."""

    kb_prefix: str
    agent_type: str
    strategy: str


def worker_for(worker_name: str) -> Worker:
    """The worker `worker_name` names.

    Raises ValueError for a malformed name, a missing knowledge base or agent type, and an
    unknown agent type (naming the known ones).
    """
    parsed = parse_worker_name(worker_name)
    kb = parsed.kb_prefix
    if not kb or kb == DEFAULT_KB or not parsed.agent_type:
        raise ValueError(f"worker_name {worker_name!r} names no knowledge base and agent type")
    strategy = WORKER_TYPES.get(parsed.agent_type)
    if strategy is None:
        raise ValueError(
            f"Unknown agent_type {parsed.agent_type!r} in worker_name {worker_name!r}; "
            f"known: {', '.join(worker_types())}"
        )
    return Worker(kb, parsed.agent_type, strategy)
