"""Context of the `plan_execute` graph: the shared run context plus the plan's limits."""

from __future__ import annotations

from dataclasses import dataclass

from graphs.runtime.context import Context, context_fields, env_field, parse_bool


@dataclass(kw_only=True)
class PlanExecuteContext(Context):
    """Per-run settings of `plan_execute`: every shared field plus the plan's limits."""

    approve_plan: bool = env_field(
        "AGENT_APPROVE_PLAN", "false", parse_bool,
        "Stop after planning and wait for the client to approve, edit or reject the plan "
        "(an interrupt; resume with Command(resume={'action': 'approve'|'edit'|'reject', 'plan': [...]})) "
        "(default false).",
    )
    max_plan_steps: int = env_field(
        "AGENT_MAX_PLAN_STEPS", "8", int,
        "Most steps one plan (or one revision of it) may have; longer plans are sent back to the "
        "planner (default 8).",
        minimum=1, maximum=50,
    )
    max_parallel_steps: int = env_field(
        "AGENT_MAX_PARALLEL_STEPS", "4", int,
        "Most plan steps run at the same time; a wave holds at most this many ready steps (default 4).",
        minimum=1, maximum=32,
    )
    max_replans: int = env_field(
        "AGENT_MAX_REPLANS", "2", int,
        "Most revisions of the remaining plan per request (after failures or new findings) (default 2).",
        minimum=0, maximum=10,
    )
    step_timeout: float = env_field(
        "AGENT_STEP_TIMEOUT", "300", float,
        "Seconds one plan step may take (its tool with retries, or its agent run; the model "
        "fallback gets as long again); a step over it fails and goes to recovery (default 300).",
        minimum=0.1, maximum=21600,
    )


def plan_context_fields() -> list[tuple[str, str]]:
    """(name, description) of the fields `plan_execute` adds to the shared context."""
    shared = {name for name, _ in context_fields(Context)}
    return [(name, text) for name, text in context_fields(PlanExecuteContext) if name not in shared]
