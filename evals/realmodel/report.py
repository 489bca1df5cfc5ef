"""Figures of a real-model run: per task (from its wire calls and outputs), per graph and split,
and the committed results table (evals/realmodel_results.md, rendered from
evals/realmodel_results.json, which keeps one summary per column: `before`, `after`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from statistics import mean

from evals.realmodel.tasks import SPLITS, SUITES

ROOT = Path(__file__).resolve().parent.parent
RESULTS_JSON = ROOT / "realmodel_results.json"
RESULTS_MD = ROOT / "realmodel_results.md"
COLUMNS = ("before", "after")


def task_figures(calls: Sequence[dict], outputs: dict | None) -> dict:
    """One task's figures from its recorded calls (wire.Call dicts) and target outputs."""
    prompt = [c["usage"].get("prompt_tokens") for c in calls if c.get("usage", {}).get("prompt_tokens") is not None]
    cached = [c["usage"].get("cached_tokens") for c in calls if c.get("usage", {}).get("cached_tokens") is not None]
    checks = [c.get("checks") or {} for c in calls]
    executed = [c for c in (outputs or {}).get("tool_calls") or [] if isinstance(c, dict) and "problem" in c]
    for turn in (outputs or {}).get("told") or []:
        executed += [c for c in turn.get("tool_calls") or [] if "problem" in c]
    return {
        "model_calls": len(calls),
        "failed_calls": sum(1 for c in calls if c.get("error")),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "model_s": round(sum(c.get("wall_s") or 0 for c in calls), 1),
        "structured_tool_calls": sum(c.get("structured", 0) for c in checks),
        "structured_valid": sum(c.get("structured_valid", 0) for c in checks),
        "text_tool_calls": sum(c.get("text", 0) for c in checks),
        "text_valid": sum(c.get("text_valid", 0) for c in checks),
        "executed_tool_calls": len(executed),
        "executed_valid": sum(1 for c in executed if c.get("problem") is None),
    }


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def summarize(rows: Iterable[dict]) -> dict:
    """Aggregate task rows (as run.py writes them) into one group's figures."""
    rows = [r for r in rows if r.get("ran", True)]
    figures = [r["figures"] for r in rows]
    prompt = [t for f in figures for t in f["prompt_tokens"]]
    cached = [t for f in figures for t in f["cached_tokens"]]
    attempts = sum(f["structured_tool_calls"] + f["text_tool_calls"] for f in figures)
    executed = sum(f["executed_tool_calls"] for f in figures)

    def share(check: str) -> float | None:
        having = [r for r in rows if check in r["score"]["checks"]]
        return _rate(sum(bool(r["score"]["checks"][check]) for r in having), len(having))

    counts = [r["score"]["counts"] for r in rows if "counts" in r["score"]]
    stored, true = sum(c["stored"] for c in counts), sum(c["true"] for c in counts)
    plan_done = [r for r in rows if "plan_valid" in r["score"]["checks"] or "finished" in r["score"]["checks"]]
    return {
        "tasks": len(rows),
        "succeeded": sum(bool(r["score"]["success"]) for r in rows),
        "success": _rate(sum(bool(r["score"]["success"]) for r in rows), len(rows)),
        "timeouts": sum(bool(r.get("timed_out")) for r in rows),
        "errors": sum(bool(r.get("error")) and not r.get("timed_out") for r in rows),
        "model_calls": sum(f["model_calls"] for f in figures),
        "model_calls_per_task": _rate(sum(f["model_calls"] for f in figures), len(rows)),
        "failed_calls": sum(f["failed_calls"] for f in figures),
        "prompt_tokens_per_call": mean(prompt) if prompt else None,
        "max_prompt_tokens": max(prompt) if prompt else None,
        "cached_tokens_per_call": mean(cached) if cached else None,
        "cached_share": _rate(sum(cached), sum(prompt)) if cached and prompt else None,
        "tool_call_attempts": attempts,
        "tool_calls_as_text": sum(f["text_tool_calls"] for f in figures),
        "tool_call_validity": _rate(sum(f["structured_valid"] for f in figures), attempts),
        "executed_tool_calls": executed,
        "executed_validity": _rate(sum(f["executed_valid"] for f in figures), executed),
        "wall_s_per_task": mean(r["wall_s"] for r in rows) if rows else None,
        "max_wall_s": max((r["wall_s"] for r in rows), default=None),
        "plan_valid_and_finished": _rate(
            sum(
                bool(r["score"]["checks"].get("plan_valid") and r["score"]["checks"].get("finished")) for r in plan_done
            ),
            len(plan_done),
        ),
        "citations_valid": share("citations_valid"),
        "extracted": share("extracted"),
        "search_down_ended_in_time": share("ended_in_time"),
        "search_down_message_clear": share("message_clear"),
        # writer_facts: items stored, the true ones among them, expected facts found
        "writer_stored": stored if counts else None,
        "writer_false_facts": stored - true if counts else None,
        "writer_precision": (_rate(true, stored) if stored else 1.0) if counts else None,
        "writer_recall": _rate(sum(c["found"] for c in counts), sum(c["facts"] for c in counts)) if counts else None,
    }


def summarize_run(rows: Sequence[dict]) -> dict:
    """{suite: {"all": figures, "heldin": ..., "heldout": ...}} for every suite that ran."""
    out: dict[str, dict] = {}
    for suite in SUITES:
        mine = [r for r in rows if r["suite"] == suite and r.get("ran", True)]
        if not mine:
            continue
        out[suite] = {"all": summarize(mine)}
        for split in SPLITS:
            part = [r for r in mine if r["split"] == split]
            if part:
                out[suite][split] = summarize(part)
    return out


def failure_examples(rows: Sequence[dict], per_suite: int = 3) -> dict[str, list[str]]:
    """A few failed tasks per suite with why (for the note under the table)."""
    examples: dict[str, list[str]] = {}
    for row in rows:
        if row.get("ran", True) and not row["score"]["success"] and len(examples.get(row["suite"], [])) < per_suite:
            why = "; ".join(row["score"]["notes"]) or "failed"
            examples.setdefault(row["suite"], []).append(f"`{row['id']}`: {why}")
    return examples


# --- the committed table --------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f} %"


def _num(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


TARGETS = (
    ("react tool tasks succeed", "react", "success", 0.9),
    ("router route choice", "router", "success", 0.9),
    ("plan_execute valid plan and finished", "plan_execute", "plan_valid_and_finished", 0.8),
    ("deep_research cites only retrieved sources", "deep_research", "citations_valid", 1.0),
    ("deep_research, search down: ends within 60 s", "deep_research", "search_down_ended_in_time", 1.0),
    ("deep_research, search down: clear message", "deep_research", "search_down_message_clear", 1.0),
    ("memory told in one thread, recalled in another", "memory", "success", 0.9),
    ("memory_writer extracts from a turn stating a fact", "memory_writer", "extracted", 0.8),
    ("memory_writer precision: stored items that are true facts", "writer_facts", "writer_precision", 0.95),
    ("memory_writer recall: expected facts stored", "writer_facts", "writer_recall", 0.8),
)


def _target_cell(column: dict | None, suite: str, key: str) -> str:
    if not column or suite not in column["suites"]:
        return "not run"
    group = column["suites"][suite]
    cell = _pct(group["all"].get(key))
    parts = [f"{s} {_pct(group[s].get(key))}" for s in SPLITS if s in group and group[s].get(key) is not None]
    return f"{cell} ({', '.join(parts)})" if parts else cell


def writer_line(group: dict) -> str:
    """The writer_facts figures of one group: precision, recall and false facts."""
    return (
        f"precision {_pct(group['writer_precision'])}, recall {_pct(group['writer_recall'])}, "
        f"{group['writer_false_facts']} false fact(s) of {group['writer_stored']} stored over {group['tasks']} turns"
    )


def _meta_line(name: str, meta: dict) -> str:
    return (
        f"**{name}**: commit `{meta['commit']}`{' (with uncommitted changes)' if meta.get('dirty') else ''}, "
        f"{meta['date']}, model `{meta['model']}` at `{meta['endpoint']}`, model timeout "
        f"{meta['model_timeout']}, task timeout {meta['task_timeout_s']:g} s, {meta['tasks_run']} of "
        f"{meta['tasks_total']} tasks run ({meta['selection']}), {meta['wall_min']:.0f} min, load average "
        f"{meta['load_start']} at start / {meta['load_end']} at end on {meta['cpus']} CPUs."
    )


_HEADER = (
    "| graph | split | tasks | success | model calls / task | prompt tok / call | cached tok / call "
    "| tool calls: as text / all | tool-call validity | executed calls valid | wall s / task (max) | timeouts |"
)


def _column_lines(name: str, column: dict) -> list[str]:
    """A run's per-graph table, writer figures, failed examples and note."""
    lines = [_HEADER, "|" + "---|" * 12]
    for suite, groups in column["suites"].items():
        for split in ("all", *SPLITS):
            if split not in groups:
                continue
            g = groups[split]
            lines.append(
                f"| {suite if split == 'all' else ''} | {split} | {g['tasks']} | {_pct(g['success'])} "
                f"| {_num(g['model_calls_per_task'], 1)} | {_num(g['prompt_tokens_per_call'])} "
                f"| {_num(g['cached_tokens_per_call'])} | {g['tool_calls_as_text']} / {g['tool_call_attempts']} "
                f"| {_pct(g['tool_call_validity'])} | {_pct(g['executed_validity'])} "
                f"| {_num(g['wall_s_per_task'])} ({_num(g['max_wall_s'])}) | {g['timeouts']} |"
            )
    if "writer_facts" in column["suites"]:
        groups = column["suites"]["writer_facts"]
        lines += ["", "Memory writer extraction (writer_facts):", ""]
        lines += [f"- {split}: {writer_line(groups[split])}" for split in ("all", *SPLITS) if split in groups]
    if column.get("examples"):
        lines += ["", f"Failed tasks ({name}), a few per graph:", ""]
        for suite, examples in column["examples"].items():
            lines += [f"- {suite}: " + " · ".join(examples)]
    if column.get("note"):
        lines += ["", column["note"]]
    return lines


def render_markdown(results: dict) -> str:
    """The committed results page from {column: {"meta", "suites", "examples"}}, and the runs of a
    selection of tasks kept apart (`partial`: {name: summary})."""
    lines = [
        "# Real-model eval results",
        "",
        "Produced by `python -m evals.realmodel` (see evals/README.md): the graphs in-process against a",
        "real model behind an OpenAI-compatible endpoint, the tasks in evals/datasets/realmodel_tasks.jsonl",
        "(a third `heldout`, reported apart), success judged deterministically (evals/realmodel/scoring.py).",
        "Percentages are over the tasks that ran; `(heldin …, heldout …)` splits them.",
        "",
    ]
    for name in COLUMNS:
        column = results.get(name)
        lines += [_meta_line(name, column["meta"]) if column else f"**{name}**: not measured yet.", ""]
    lines += ["## Targets", "", "| target | goal | before | after |", "|---|---|---|---|"]
    for label, suite, key, goal in TARGETS:
        cells = [_target_cell(results.get(c), suite, key) for c in COLUMNS]
        shown = "every task" if goal == 1.0 else f"≥ {_pct(goal)}"
        lines.append(f"| {label} | {shown} | {cells[0]} | {cells[1]} |")
    for name in COLUMNS:
        if column := results.get(name):
            lines += ["", f"## Per graph: {name}", "", *_column_lines(name, column)]
    return "\n".join(lines) + "\n" + render_partial(results)


PARTIAL_MARKER = "<!-- runs of selected tasks -->"


def render_partial(results: dict) -> str:
    """The sections of the runs of selected tasks (`partial`), after PARTIAL_MARKER ("" if none)."""
    lines: list[str] = []
    for name, column in (results.get("partial") or {}).items():
        lines += ["", f"## {name}", "", _meta_line(name, column["meta"]), "", *_column_lines(name, column)]
    return "\n".join(["", PARTIAL_MARKER, *lines]) + "\n" if lines else ""


def update_results(
    column: str, summary: dict, json_path: Path | None = None, md_path: Path | None = None, *, partial: bool = False
) -> None:
    """Store `summary` as `column` (before / after), or with `partial` as a run of a selection of
    tasks under that name, shown in a section of its own; re-render the markdown."""
    json_path, md_path = json_path or RESULTS_JSON, md_path or RESULTS_MD
    results = json.loads(json_path.read_text()) if json_path.exists() else {}
    if partial:  # the page above the marker may carry notes written by hand: kept as it is
        results.setdefault("partial", {})[column] = summary
        json_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        page = md_path.read_text() if md_path.exists() else render_markdown({})
        md_path.write_text(page.split("\n" + PARTIAL_MARKER)[0].rstrip("\n") + "\n" + render_partial(results))
        return
    if column not in COLUMNS:
        raise ValueError(f"column must be one of {', '.join(COLUMNS)}")
    keep_note = (results.get(column) or {}).get("note")
    results[column] = summary if not keep_note or summary.get("note") else {**summary, "note": keep_note}
    json_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    md_path.write_text(render_markdown(results))
