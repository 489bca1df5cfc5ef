"""The router's context: the shared `Context` plus routing and retrieval settings.

The router passes its context to the sub-agent graphs it calls, so it carries every field they
read: a sub-agent whose context adds fields joins as an extra base class here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphs.deep_research.context import ResearchContext
from graphs.plan_execute.context import PlanExecuteContext
from graphs.runtime.context import env_field


@dataclass(kw_only=True)
class RouterContext(PlanExecuteContext, ResearchContext):
    """Per-run settings of the `router` graph (and of the sub-agents it hands messages to)."""

    kb: str | None = env_field("ROUTER_KB")
    auto_route: bool = env_field("KB_AUTO_ROUTE")
    route: str | None = field(
        default=None,
        metadata={
            "description": "Force a route: general, retrieval, react, or another served "
            "sub-agent (plan_execute, deep_research). Unset: decided per message."
        },
    )
    retrieval_agents: list[str] = env_field("ROUTER_RETRIEVAL_AGENTS")
    retrieval_top_k: int = env_field("ROUTER_TOP_K")
    route_confidence: float = env_field("ROUTER_CONFIDENCE")
    kb_similarity: float = env_field("ROUTER_KB_SIMILARITY")

    def __post_init__(self) -> None:
        super().__post_init__()
        from graphs.router.workers import worker_types

        unknown = [name for name in self.retrieval_agents if name not in worker_types()]
        if not self.retrieval_agents or unknown:
            raise ValueError(
                f"Invalid context field `retrieval_agents`: {', '.join(unknown) or 'empty'}; "
                f"worker types: {', '.join(worker_types())}."
            )
