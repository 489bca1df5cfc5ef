"""Every eval suite: one dataset JSONL + a target + evaluators. A graph joins with one entry here.

    Suite("router", "router_decisions.jsonl", router_target, (route_match, route_method),
          turn_text=lambda inputs: inputs["message"], offline_script=router_script)

and its thresholds in evals/thresholds.json. `offline_script` turns an example into the offline
model's script for its turn (evals/scripted.py); the default follows `outputs.trajectory`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evals.evaluators import (
    Evaluator,
    answer_contains,
    answer_excludes,
    citation_validity,
    exact_fields,
    fabricated_removed,
    output_shape,
    plan_completion,
    plan_shape,
    report_structure,
    tool_selection,
    trajectory_match,
)
from evals.offline import TurnScript
from evals.scripted import plan_script, react_script, research_script, router_script
from evals.targets import (
    Target,
    deep_research_target,
    memory_target,
    plan_execute_target,
    react_target,
    router_target,
)


@dataclass(frozen=True)
class Suite:
    """An eval suite."""

    name: str
    dataset: str
    """File name under evals/datasets/: one example per line, {"inputs", "outputs", "metadata"}."""
    target: Target
    evaluators: tuple[Evaluator, ...]
    turn_text: Callable[[dict], str]
    """The user message that starts the evaluated turn (the offline policy scripts that turn
    from the example's `outputs.trajectory`)."""
    offline_script: Callable[[dict, dict], TurnScript] = react_script
    """(inputs, reference outputs) -> the offline model's script for the example's turn."""
    judges: tuple[str, ...] = ()
    """openevals judges (evals.evaluators.JUDGE_PROMPTS) added when a judge model is configured."""
    description: str = ""


def _last_user_message(inputs: dict) -> str:
    return inputs["messages"][-1]["content"]


SUITES: dict[str, Suite] = {
    suite.name: suite
    for suite in (
        Suite(
            "react",
            "react_tools.jsonl",
            react_target,
            (
                trajectory_match("strict"),
                trajectory_match("unordered"),
                trajectory_match("subset"),
                tool_selection,
                answer_contains,
                output_shape,
            ),
            turn_text=_last_user_message,
            judges=("correctness", "helpfulness"),
            description="react: tool selection and argument trajectories (memory off)",
        ),
        Suite(
            "memory",
            "memory_recall.jsonl",
            memory_target,
            (trajectory_match("superset", args="ignore"), answer_contains, answer_excludes, output_shape),
            turn_text=lambda inputs: inputs["question"],
            judges=("correctness", "groundedness"),
            description="react + memory tools: recall across threads, one user's memories only",
        ),
        Suite(
            "router",
            "router_decisions.jsonl",
            router_target,
            (
                exact_fields("route", "kb_prefix", "worker_name", key="route_match"),
                exact_fields("method", key="route_method"),
            ),
            turn_text=lambda inputs: inputs["message"],
            offline_script=router_script,
            description="router: route, kb_prefix and worker_name per message (requested / inferred KB, cues)",
        ),
        Suite(
            "plan_execute",
            "plan_execute_tasks.jsonl",
            plan_execute_target,
            (plan_shape, plan_completion, answer_contains),
            turn_text=_last_user_message,
            offline_script=plan_script,
            judges=("correctness", "helpfulness"),
            description="plan_execute: plan shape (a DAG over allowed tools) and completion with the expected facts",
        ),
        Suite(
            "deep_research",
            "deep_research_reports.jsonl",
            deep_research_target,
            (report_structure, citation_validity, fabricated_removed),
            turn_text=_last_user_message,
            offline_script=research_script,
            judges=("helpfulness",),
            description="deep_research: report structure and citation validity (no fabricated URL survives)",
        ),
    )
}
