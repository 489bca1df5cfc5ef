"""Plan schemas (structured output) and the checks a plan must pass before it runs.

A plan is a DAG: each step names the earlier steps whose results it needs (`depends_on`). The
executor runs every step whose dependencies succeeded, in waves.

A step's `args` (and description) may use an earlier step's result by writing its id in braces,
`{s1}`: the reference is a dependency (added to `depends_on` when the planner left it out), and
when the step runs it is replaced by that step's result text (`resolve_references`; the tool's
argument validation turns "42" into a number where the parameter is one). A reference to a step
that does not exist, to the step itself or to a step that failed, and a step id written as plain
text in a tool's arguments ("s1 + 12"), are refused at validation so the planner is asked again.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

OK_STATUSES = ("completed", "recovered")
"""Statuses whose result a dependent step may use."""


class PlanStep(BaseModel):
    """One step of the plan."""

    model_config = ConfigDict(coerce_numbers_to_str=True)

    id: str = Field(description="Short unique id of the step, e.g. 's1'.")
    description: str = Field(description="What this step does and what result it should produce.")
    tool: str | None = Field(
        default=None,
        description="Name of the one tool to call directly with `args`; omit when the step needs "
        "reasoning or several tool calls.",
    )
    args: dict[str, Any] = Field(
        default_factory=dict,
        description="Arguments of `tool`. Write {id} to use an earlier step's result, e.g. "
        '{"expression": "{s1} + 12"}; it is replaced by that result before the call.',
    )
    depends_on: list[str] = Field(
        default_factory=list,
        description="Ids of the earlier steps whose results this step needs (every {id} it uses).",
    )


class Plan(BaseModel):
    """The plan for the user's task: steps forming a dependency graph."""

    steps: list[PlanStep] = Field(description="The steps; independent steps run in parallel.")


class Replan(BaseModel):
    """What to do with the rest of the plan after a wave of steps."""

    action: Literal["continue", "revise", "finish"] = Field(
        description="'continue' with the remaining steps as they are, 'revise' to replace them "
        "with `steps`, or 'finish' to stop and answer with what is known."
    )
    reason: str = Field(description="Why, in one sentence.")
    steps: list[PlanStep] = Field(
        default_factory=list,
        description="With 'revise': the new remaining steps (new ids; they may depend on finished steps).",
    )


class PlanError(ValueError):
    """A plan that cannot run: the message tells the planner what to fix."""


def parse_steps(raw: Any, max_steps: int) -> list[PlanStep]:
    """Steps from a client's edited plan (a list of step objects); PlanError if malformed or
    longer than `max_steps` (counted before any step is read)."""
    if isinstance(raw, dict) and "steps" in raw:
        raw = raw["steps"]
    if not isinstance(raw, list):
        raise PlanError("the plan must be a list of steps")
    _check_length(len(raw), max_steps)
    try:
        return [PlanStep.model_validate(item) for item in raw]
    except ValidationError as exc:
        raise PlanError(f"malformed step: {exc}") from exc


def parse_plan(raw: Any, tools: set[str], max_steps: int) -> list[dict]:
    """A client's edited plan, read and checked (`parse_steps`, then `validate_steps`)."""
    return validate_steps(parse_steps(raw, max_steps), tools, max_steps)


def validate_steps(
    steps: list[PlanStep], tools: set[str], max_steps: int, finished: dict[str, str] | None = None
) -> list[dict]:
    """Check a plan (or a revision of the remaining plan) and return its steps as dicts.

    `finished` maps the ids of steps already run to their status: new steps may depend on the
    successful ones but must not reuse any of their ids. Raises PlanError naming every problem
    found: duplicate ids, unknown tools, dangling dependencies and cycles. A plan over `max_steps`
    is refused first, before any other check: the checks grow faster than the plan, and a plan
    comes from a model or a client (thousands of steps must cost no more than a few).
    """
    _check_length(len(steps), max_steps)
    finished = finished or {}
    problems: list[str] = []
    known = {step.id.strip() for step in steps} | set(finished)
    named = _named_ids(known)
    steps = [_with_referenced(step, known, named, problems) for step in steps]
    ids = [step.id.strip() for step in steps]
    counts = Counter(ids)
    for step_id in sorted({i for i in ids if counts[i] > 1 or i in finished}):
        problems.append(f"step id {step_id!r} is used more than once")
    if any(not step_id for step_id in ids):
        problems.append("every step needs a non-empty id")
    for step in steps:
        if not step.description.strip():
            problems.append(f"step {step.id!r} has no description")
        if step.tool is not None and step.tool not in tools:
            problems.append(f"step {step.id!r} uses unknown tool {step.tool!r}; available: {', '.join(sorted(tools))}")
        for dep in step.depends_on:
            if dep == step.id:
                problems.append(f"step {step.id!r} depends on itself")
            elif dep in finished and finished[dep] not in OK_STATUSES:
                problems.append(f"step {step.id!r} depends on step {dep!r}, which {finished[dep]}")
            elif dep not in ids and dep not in finished:
                problems.append(f"step {step.id!r} depends on unknown step {dep!r}")
    if cycle := _cycle(steps):
        problems.append("the dependencies form a cycle: " + " -> ".join(cycle))
    if problems:
        raise PlanError("; ".join(problems))
    return [step.model_dump() | {"id": step.id.strip()} for step in steps]


_REFERENCE = re.compile(r"\$?\{\{?\s*([A-Za-z0-9_][\w-]*)\s*\}?\}")
"""`{s1}` (also `{{s1}}`, `${s1}`): the result of step s1."""
_STEP_LIKE = re.compile(r"[A-Za-z_-]*\d+")
"""Ids that look like step ids (s1, step_2, 3): `{x}` with such an unknown id is an error, not text."""
_NAMED_STEP = re.compile(r"[A-Za-z_-]+\d+")
"""Step ids (s1, step_2; not bare numbers) that, written as plain text in a tool's args, were meant
as references."""


def _strings(value: Any) -> list[str]:
    """Every string inside a JSON-like value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _strings(item)]
    return []


def references(value: Any) -> list[str]:
    """The step ids referenced as `{id}` in the strings of `value`, in order, once each."""
    return list(dict.fromkeys(m.group(1) for text in _strings(value) for m in _REFERENCE.finditer(text)))


def _check_length(count: int, max_steps: int) -> None:
    if count > max_steps:
        raise PlanError(f"the plan has {count} steps; at most {max_steps} are allowed")


def _named_ids(known: set[str]) -> re.Pattern[str] | None:
    """One pattern finding any of the step ids in `known` that look like step ids (s1, step_2)
    written as a word, or None when there are none."""
    named = sorted((i for i in known if _NAMED_STEP.fullmatch(i)), key=lambda i: (-len(i), i))
    if not named:
        return None
    return re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, named)) + r")(?![\w])")


def _with_referenced(step: PlanStep, known: set[str], named: re.Pattern[str] | None, problems: list[str]) -> PlanStep:
    """`step` with every step its args or description reference added to `depends_on`; the
    references that cannot be used are added to `problems`. `known` holds the ids of the plan's
    and the finished steps, `named` finds those of them written as plain text (`_named_ids`)."""
    own = step.id.strip()
    deps = list(step.depends_on)
    for ref in references([step.args, step.description]):
        if ref == own:
            problems.append(f"step {own!r} refers to its own result {{{ref}}}")
        elif ref in known:
            if ref not in deps:
                deps.append(ref)
        elif _STEP_LIKE.fullmatch(ref):
            problems.append(f"step {own!r} refers to {{{ref}}}, but there is no step {ref!r}")
    if step.tool is not None and named is not None:
        bare = " ".join(_REFERENCE.sub(" ", text) for text in _strings(step.args))
        for other in sorted(set(named.findall(bare)) - {own}):
            problems.append(
                f"step {own!r} has {other!r} as plain text in its args; write {{{other}}} "
                f"to use the result of step {other!r}"
            )
    return step.model_copy(update={"depends_on": deps}) if deps != step.depends_on else step


def resolve_references(args: dict[str, Any], results: dict[str, str]) -> dict[str, Any]:
    """`args` with each `{id}` replaced by that step's result text (ids not in `results` stay as
    written). A value that is only a reference becomes the result without surrounding blanks; the
    tool's argument validation reads "42" as a number where the parameter is one."""

    def resolve(value: Any) -> Any:
        if isinstance(value, str):
            whole = _REFERENCE.fullmatch(value.strip())
            if whole and whole.group(1) in results:
                return results[whole.group(1)].strip()
            return _REFERENCE.sub(lambda m: results.get(m.group(1), m.group(0)), value)
        if isinstance(value, dict):
            return {key: resolve(item) for key, item in value.items()}
        if isinstance(value, list):
            return [resolve(item) for item in value]
        return value

    return {key: resolve(value) for key, value in args.items()}


def _cycle(steps: list[PlanStep]) -> list[str]:
    """One dependency cycle among the steps (ids, first repeated at the end), or []."""
    deps = {step.id: [d for d in step.depends_on if d != step.id] for step in steps}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for dep in deps.get(node, []):
            if dep not in deps:
                continue
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return []

    for step_id in deps:
        if step_id not in state and (found := visit(step_id)):
            return found
    return []


def pending_steps(plan: list[dict], log: list[dict]) -> list[dict]:
    """Steps of the plan that have not run (no execution-log entry yet)."""
    logged = {entry["step_id"] for entry in log}
    return [step for step in plan if step["id"] not in logged]


def ready_steps(plan: list[dict], log: list[dict]) -> list[dict]:
    """Pending steps whose dependencies all succeeded."""
    status = {entry["step_id"]: entry["status"] for entry in log}
    return [
        step for step in pending_steps(plan, log) if all(status.get(dep) in OK_STATUSES for dep in step["depends_on"])
    ]


def blocked_steps(plan: list[dict], log: list[dict]) -> list[tuple[dict, list[str]]]:
    """Pending steps that can never run, with the dependencies that failed or were skipped."""
    status = {entry["step_id"]: entry["status"] for entry in log}
    blocked = []
    for step in pending_steps(plan, log):
        bad = [dep for dep in step["depends_on"] if dep in status and status[dep] not in OK_STATUSES]
        if bad:
            blocked.append((step, bad))
    return blocked
