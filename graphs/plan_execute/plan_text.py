"""A plan as numbered text a person reads and edits (the plan approval's form), and back.

    1. [a] Multiply 17 by 23
       tool: calculator {"expression": "17*23"}
    2. [b] Add 5 to the product
       tool: calculator {"expression": "{a} + 5"}
       after: a

Each step is a numbered line (`N.` or `N)`; the numbers are only read as "a new step") with
the step's id in brackets, then optional lines: `tool:` with the tool's name and its arguments as
a JSON object, and `after:` with the ids of the steps it waits for. Any other line continues the
description. A step written without an id gets `s<N>`. The text is read in one pass, and text
longer than `MAX_PLAN_TEXT` is refused before it is read; the steps then go through the plan's
checks (plan.py `parse_steps`, `validate_steps`) like any edited plan.
"""

from __future__ import annotations

import json
import re
from typing import Any

from graphs.plan_execute.plan import PlanError

MAX_PLAN_TEXT = 64_000
"""Characters of plan text read at most (a long plan of full steps is a few thousand)."""

_STEP = re.compile(r"^\s*\d{1,4}[.)]\s+(?:\[([^\]\s]{1,64})\]\s*)?(.*)$")
_FIELD = re.compile(r"^\s*(tool|after)\s*:\s*(.*)$", re.IGNORECASE)
_IDS = re.compile(r"[\s,]+")
HELP = (
    "one numbered line per step, '1. [id] what the step does', optionally followed by "
    "'tool: NAME {\"arg\": ...}' and 'after: id, id'"
)


def plan_text(steps: list[dict]) -> str:
    """`steps` (validated plan steps) as numbered text."""
    lines: list[str] = []
    for n, step in enumerate(steps, 1):
        description = " ".join(str(step.get("description", "")).split())
        lines.append(f"{n}. [{step['id']}] {description}")
        if step.get("tool"):
            lines.append(f"   tool: {step['tool']} {json.dumps(step.get('args') or {}, ensure_ascii=False)}")
        if step.get("depends_on"):
            lines.append(f"   after: {', '.join(step['depends_on'])}")
    return "\n".join(lines)


def looks_like_plan_text(value: Any) -> bool:
    """Whether an edited `steps` value is plan text (not a list of steps or its JSON)."""
    return isinstance(value, str) and not value.lstrip().startswith(("[", "{"))


def parse_plan_text(text: str) -> list[dict[str, Any]]:
    """The steps written in `text`, as step objects for `parse_steps`; PlanError naming the line
    that cannot be read."""
    if len(text) > MAX_PLAN_TEXT:
        raise PlanError(f"the plan text has {len(text):,} characters; at most {MAX_PLAN_TEXT:,} are read")
    steps: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if start := _STEP.match(line):
            steps.append({"id": start.group(1) or "", "description": start.group(2).strip(), "depends_on": []})
            continue
        if not steps:
            raise PlanError(f"line {number} is not a step: write {HELP}")
        step = steps[-1]
        field = _FIELD.match(line)
        if field is None:
            step["description"] = f"{step['description']} {line.strip()}".strip()
        elif field.group(1).lower() == "after":
            step["depends_on"] = [i for i in _IDS.split(field.group(2)) if i]
        else:
            step.update(_tool(field.group(2), number))
    if not steps:
        raise PlanError(f"the plan has no steps: write {HELP}")
    taken = {step["id"] for step in steps}
    for n, step in enumerate(steps, 1):
        if not step["id"]:
            step["id"] = _free_id(f"s{n}", taken)
            taken.add(step["id"])
    return steps


def _tool(spec: str, number: int) -> dict[str, Any]:
    """`NAME {json args}` of a `tool:` line."""
    name, _, raw = spec.strip().partition(" ")
    if not name:
        raise PlanError(f"line {number}: 'tool:' needs the tool's name, then its arguments as JSON")
    if not raw.strip():
        return {"tool": name, "args": {}}
    try:
        args = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PlanError(f"line {number}: the arguments of {name} are not valid JSON ({exc.msg})") from None
    if not isinstance(args, dict):
        raise PlanError(f'line {number}: the arguments of {name} must be a JSON object, e.g. {{"expression": "2*3"}}')
    return {"tool": name, "args": args}


def _free_id(wanted: str, taken: set[str]) -> str:
    candidate, n = wanted, 1
    while candidate in taken:
        n += 1
        candidate = f"{wanted}_{n}"
    return candidate
