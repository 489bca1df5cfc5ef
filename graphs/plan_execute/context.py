"""Context of the `plan_execute` graph: the shared run context plus the plan's limits."""

from __future__ import annotations

from dataclasses import dataclass

from graphs.runtime.context import Context, context_fields, env_field


@dataclass(kw_only=True)
class PlanExecuteContext(Context):
    """Per-run settings of `plan_execute`: every shared field plus the plan's limits."""

    approve_plan: bool = env_field("AGENT_APPROVE_PLAN")
    max_plan_steps: int = env_field("AGENT_MAX_PLAN_STEPS")
    max_parallel_steps: int = env_field("AGENT_MAX_PARALLEL_STEPS")
    max_replans: int = env_field("AGENT_MAX_REPLANS")
    step_timeout: float = env_field("AGENT_STEP_TIMEOUT")


def plan_context_fields() -> list[tuple[str, str]]:
    """(name, description) of the fields `plan_execute` adds to the shared context."""
    shared = {name for name, _ in context_fields(Context)}
    return [(name, text) for name, text in context_fields(PlanExecuteContext) if name not in shared]
