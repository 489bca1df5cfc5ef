"""Every eval suite: one dataset JSONL + a target + evaluators. A graph joins with one entry here.

    SUITES["router"] = Suite("router", "router_decisions.jsonl", router_target,
                             (route_match, output_shape), turn_text=lambda inputs: inputs["message"])

and its thresholds in evals/thresholds.json.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evals.evaluators import (
    Evaluator,
    answer_contains,
    answer_excludes,
    output_shape,
    tool_selection,
    trajectory_match,
)
from evals.targets import Target, memory_target, react_target


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
    judges: tuple[str, ...] = ()
    """openevals judges (evals.evaluators.JUDGE_PROMPTS) added when a judge model is configured."""
    description: str = ""


def _last_user_message(inputs: dict) -> str:
    return inputs["messages"][-1]["content"]


SUITES: dict[str, Suite] = {
    suite.name: suite
    for suite in (
        Suite(
            "react", "react_tools.jsonl", react_target,
            (trajectory_match("strict"), trajectory_match("unordered"), trajectory_match("subset"),
             tool_selection, answer_contains, output_shape),
            turn_text=_last_user_message,
            judges=("correctness", "helpfulness"),
            description="react: tool selection and argument trajectories (memory off)",
        ),
        Suite(
            "memory", "memory_recall.jsonl", memory_target,
            (trajectory_match("superset", args="ignore"), answer_contains, answer_excludes, output_shape),
            turn_text=lambda inputs: inputs["question"],
            judges=("correctness", "groundedness"),
            description="react + memory tools: recall across threads, one user's memories only",
        ),
    )
}
