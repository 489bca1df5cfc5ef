"""The real-model tasks: evals/datasets/realmodel_tasks.jsonl, one task per line.

    {"id": "react-percent", "suite": "react", "split": "heldin",
     "inputs": {"messages": [{"role": "user", "content": "What is 17% of 2340?"}]},
     "expect": {"tools_called": ["calculator"], "answer_contains": ["397.8"]}}

`split` is `heldin` (free to tune the product against) or `heldout` (reported apart; do not tune
against it). `expect` holds the deterministic checks of evals/realmodel/scoring.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from evals.jsonl import numbered_rows

TASKS_FILE = Path(__file__).resolve().parent.parent / "datasets" / "realmodel_tasks.jsonl"
SUITES = ("react", "router", "plan_execute", "deep_research", "memory", "memory_writer", "writer_facts")
SPLITS = ("heldin", "heldout")


class TaskError(ValueError):
    """A task line is malformed."""


@dataclass(frozen=True)
class Task:
    id: str
    suite: str
    split: str
    inputs: dict
    expect: dict


def load_tasks(path: Path = TASKS_FILE) -> list[Task]:
    """Every task of the file, checked: known suite and split, unique ids, object inputs/expect."""
    tasks: list[Task] = []
    seen: set[str] = set()
    for number, row in numbered_rows(path, TaskError):
        if not isinstance(row, dict) or set(row) != {"id", "suite", "split", "inputs", "expect"}:
            got = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise TaskError(f"{path.name}:{number}: a task has exactly id, suite, split, inputs, expect; got {got}")
        if row["suite"] not in SUITES:
            raise TaskError(f"{path.name}:{number}: unknown suite {row['suite']!r}; known: {', '.join(SUITES)}")
        if row["split"] not in SPLITS:
            raise TaskError(f"{path.name}:{number}: split must be one of {', '.join(SPLITS)}, got {row['split']!r}")
        if not isinstance(row["inputs"], dict) or not isinstance(row["expect"], dict) or not row["expect"]:
            raise TaskError(f"{path.name}:{number}: inputs must be an object and expect a non-empty object")
        if not isinstance(row["id"], str) or not row["id"] or row["id"] in seen:
            raise TaskError(f"{path.name}:{number}: id {row['id']!r} is empty or repeated")
        seen.add(row["id"])
        tasks.append(Task(row["id"], row["suite"], row["split"], row["inputs"], row["expect"]))
    if not tasks:
        raise TaskError(f"{path.name}: no tasks")
    return tasks


def select(
    tasks: list[Task],
    *,
    only: list[str] | None = None,
    split: str | None = None,
    limit: int | None = None,
    ids: list[str] | None = None,
) -> list[Task]:
    """The tasks to run, interleaved so that a run stopped early has covered every suite and
    split: suites take turns, and within a suite held-in and held-out tasks alternate.

    only: suites to keep; split: one split; limit: at most this many tasks per suite (taken in
    the interleaved order, so both splits are represented); ids: these tasks only."""
    unknown = sorted(set(only or []) - set(SUITES))
    if unknown:
        raise TaskError(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(SUITES)}")
    known_ids = {t.id for t in tasks}
    missing = sorted(set(ids or []) - known_ids)
    if missing:
        raise TaskError(f"unknown task id(s) {', '.join(missing)}")
    chosen = [
        t
        for t in tasks
        if (not only or t.suite in only) and (not split or t.split == split) and (not ids or t.id in ids)
    ]
    per_suite: dict[str, list[Task]] = {}
    for suite in SUITES:
        mine = [t for t in chosen if t.suite == suite]
        by_split = [[t for t in mine if t.split == s] for s in SPLITS]
        ordered = [t for pair in zip_longest(*by_split) for t in pair if t is not None]
        per_suite[suite] = ordered[:limit] if limit else ordered
    return [t for group in zip_longest(*per_suite.values()) for t in group if t is not None]
