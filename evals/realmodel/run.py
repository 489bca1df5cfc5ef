"""`python -m evals.realmodel`: the real-model tier.

    OPENAI_BASE_URL=http://127.0.0.1:18080/v1 OPENAI_API_KEY=local AGENT_MODEL=openai:qwen2.5-coder-1.5b \\
        .venv/bin/python -m evals.realmodel --column before --model-timeout 900

Runs the tasks of evals/datasets/realmodel_tasks.jsonl one after the other, each graph in-process
(LangSmith offline, tracing off), through a recording proxy in front of the endpoint that counts
every model call's tokens, cached tokens and tool calls. Writes every task as it finishes to
evals/results/realmodel-<time>.jsonl, the run's summary next to it, and (with --column) the
committed evals/realmodel_results.json / .md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import langsmith

from evals.realmodel import report
from evals.realmodel.scoring import score
from evals.realmodel.tasks import SPLITS, SUITES, TASKS_FILE, Task, load_tasks, select
from evals.realmodel.wire import RecordingProxy, recheck
from evals.targets import TargetEnv, environment
from graphs.runtime.context import default_model_timeout
from graphs.runtime.memory_schedule import wait_for_local_extractions
from settings import settings

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
PRODUCT_DIRS = ("graphs", "tools", "store", "server", "settings")


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT.parent, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def check_endpoint(base_url: str, api_key: str) -> str:
    """The endpoint's first model id; SystemExit with what to do when it does not answer."""
    try:
        response = httpx.get(
            base_url.rstrip("/") + "/models", headers={"Authorization": f"Bearer {api_key}"}, timeout=15
        )
        response.raise_for_status()
        data = response.json().get("data") or [{}]
        return str(data[0].get("id", "?"))
    except (httpx.HTTPError, ValueError) as exc:
        raise SystemExit(
            f"the model endpoint {base_url} does not answer ({exc}); start it first "
            "(evals/README.md: ../shared/realmodel/serve_model.py) or set OPENAI_BASE_URL"
        ) from None


async def run_task(task: Task, env: TargetEnv, proxy: RecordingProxy, timeout_s: float) -> dict:
    """Run one task (bounded by `timeout_s`), score it and gather its wire figures."""
    from evals.realmodel.targets import TARGETS

    proxy.task = task.id
    started = time.monotonic()
    outputs: dict | None = None
    error, timed_out = None, False
    try:
        with langsmith.tracing_context(enabled=False):
            outputs = await asyncio.wait_for(TARGETS[task.suite](task.inputs, env), timeout_s)
    except TimeoutError:
        timed_out, error = True, f"no result within the task timeout ({timeout_s:g} s)"
    except Exception as exc:  # a failed task is a result, scored like any other
        error = f"{type(exc).__name__}: {str(exc)[:1000]}"
    # A cancelled task may leave a background extraction behind: do not let it run into the next.
    await wait_for_local_extractions(now=True)
    await asyncio.sleep(0.2)  # the proxy records a hung-up call when its upstream request closes
    wall = round(time.monotonic() - started, 1)
    if error:
        outputs = {**(outputs or {}), "error": error}
    calls = [c.as_dict() for c in proxy.calls_of(task.id)]
    return {
        "id": task.id,
        "suite": task.suite,
        "split": task.split,
        "ran": True,
        "wall_s": wall,
        "error": error,
        "timed_out": timed_out,
        "score": score(task, outputs),
        "figures": report.task_figures(calls, outputs),
        "outputs": outputs,
        "calls": calls,
    }


def progress_line(row: dict) -> str:
    f = row["figures"]
    verdict = "ok  " if row["score"]["success"] else "FAIL"
    tokens = "/".join(str(t) for t in f["prompt_tokens"]) or "-"
    cached = "/".join(str(t) for t in f["cached_tokens"]) or "-"
    why = "" if row["score"]["success"] else "  " + "; ".join(row["score"]["notes"])[:300]
    return (
        f"{verdict} {row['suite']:<13} {row['split']:<7} {row['id']:<22} {row['wall_s']:>6.0f} s  "
        f"calls {f['model_calls']}  prompt {tokens}  cached {cached}  text-calls {f['text_tool_calls']}{why}"
    )


async def run_tasks(
    tasks: list[Task], env: TargetEnv, proxy: RecordingProxy, *, timeout_s: float, budget_s: float | None, log: Path
) -> list[dict]:
    rows: list[dict] = []
    started = time.monotonic()
    with log.open("a") as sink:
        for index, task in enumerate(tasks, 1):
            if budget_s is not None and time.monotonic() - started > budget_s:
                rows += [{"id": t.id, "suite": t.suite, "split": t.split, "ran": False} for t in tasks[index - 1 :]]
                print(f"time budget of {budget_s:g} s used: {len(tasks) - index + 1} task(s) not run", flush=True)
                break
            row = await run_task(task, env, proxy, timeout_s)
            rows.append(row)
            sink.write(json.dumps(row, default=str) + "\n")
            sink.flush()
            print(f"[{index}/{len(tasks)}] {progress_line(row)}", flush=True)
    return rows


def combine_runs(paths: list[Path], tasks: list[Task]) -> dict:
    """One summary from the row files of finished runs (scored again with the current scoring),
    with the first run's description (its `.summary.json`) and every run's selection and load."""
    by_id = {t.id: t for t in tasks}
    rows: dict[str, dict] = {}
    metas = []
    for path in paths:
        summary_file = path.with_name(path.stem + ".summary.json")
        if summary_file.exists():
            metas.append(json.loads(summary_file.read_text())["meta"])
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("ran") and row["id"] in by_id and row["id"] not in rows:
                row["score"] = score(by_id[row["id"]], row.get("outputs"))
                for call in row.get("calls") or []:
                    call["checks"] = recheck(call)
                row["figures"] = report.task_figures(row.get("calls") or [], row.get("outputs"))
                rows[row["id"]] = row
    ran = list(rows.values())
    meta = dict(metas[0]) if metas else {"commit": "unknown", "date": "unknown"}
    meta.update(
        tasks_total=len(tasks),
        tasks_run=len(ran),
        selection=" + ".join(m.get("selection", "?") for m in metas) + f" ({len(paths)} run(s) combined)",
        wall_min=max((m.get("wall_min", 0) for m in metas), default=0),
        load_end=metas[-1].get("load_end") if metas else "?",
        rows=[str(p) for p in paths],
    )
    return {"meta": meta, "suites": report.summarize_run(ran), "examples": report.failure_examples(ran)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.realmodel", description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated suites (default all: {','.join(SUITES)})")
    parser.add_argument("--split", choices=SPLITS, help="one split only")
    parser.add_argument("--limit", type=int, help="at most N tasks per suite (both splits, interleaved)")
    parser.add_argument("--ids", help="comma-separated task ids")
    parser.add_argument("--model", help="model spec (default AGENT_MODEL), e.g. openai:qwen2.5-coder-1.5b")
    parser.add_argument("--task-timeout", type=float, default=1200, help="seconds per task (default 1200)")
    parser.add_argument(
        "--model-timeout", type=float, help="AGENT_MODEL_TIMEOUT for the run (default: the product's default)"
    )
    parser.add_argument("--budget-min", type=float, help="start no task after this many minutes")
    parser.add_argument("--column", choices=report.COLUMNS, help="also update this column of the committed table")
    parser.add_argument(
        "--partial",
        metavar="NAME",
        help="also store the run in the committed results as a run of selected tasks, in a section NAME",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results folder (default {RESULTS})")
    parser.add_argument(
        "--from",
        dest="rows_files",
        type=Path,
        nargs="+",
        metavar="ROWS",
        help="run nothing: score the rows of finished runs (evals/results/realmodel-*.jsonl) again and "
        "combine them (on a repeated task the first file's row wins); with --column, store the result",
    )
    parser.add_argument("--tasks-file", type=Path, default=TASKS_FILE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rows_files:
        summary = combine_runs(args.rows_files, load_tasks(args.tasks_file))
        out = args.rows_files[0].with_name(args.rows_files[0].stem + ".combined.summary.json")
        out.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"summary -> {out}")
        if args.column:
            report.update_results(args.column, summary)
            print(f"updated {report.RESULTS_MD} ({args.column})")
        if args.partial:
            report.update_results(args.partial, summary, partial=True)
            print(f"updated {report.RESULTS_MD} ({args.partial})")
        return 0

    config = settings()
    upstream = config.OPENAI_BASE_URL
    model = args.model or config.AGENT_MODEL
    if not upstream:
        raise SystemExit("set OPENAI_BASE_URL to the OpenAI-compatible endpoint (e.g. http://127.0.0.1:18080/v1)")
    if not model.startswith("openai:"):
        raise SystemExit(f"the model must be an OpenAI-compatible one ('openai:<name>'), got {model!r}")
    api_key = config.OPENAI_API_KEY.get_secret_value() if config.OPENAI_API_KEY else "local"
    served = check_endpoint(upstream, api_key)
    all_tasks = load_tasks(args.tasks_file)
    tasks = select(
        all_tasks,
        only=args.only.split(",") if args.only else None,
        split=args.split,
        limit=args.limit,
        ids=args.ids.split(",") if args.ids else None,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    log = args.out / f"realmodel-{stamp}.jsonl"
    load_start = os.getloadavg()
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"  # the code that runs (not the one at the end)
    dirty = bool(_git("status", "--porcelain", "--", *PRODUCT_DIRS))
    print(f"{len(tasks)} task(s) against {model} at {upstream} (serves {served}); rows -> {log}", flush=True)

    from store.embeddings import get_embeddings

    started = time.monotonic()
    with RecordingProxy(upstream) as proxy:
        variables: dict[str, str | None] = {
            "OPENAI_BASE_URL": proxy.base_url,
            "OPENAI_API_KEY": api_key,
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "MEMORY_EXTRACTION_DELAY": "0",
        }
        if args.model_timeout:
            variables["AGENT_MODEL_TIMEOUT"] = f"{args.model_timeout:g}"
        with environment(variables):
            env = TargetEnv(model=model, embeddings=get_embeddings(), trace=False)
            budget = args.budget_min * 60 if args.budget_min else None
            rows = asyncio.run(run_tasks(tasks, env, proxy, timeout_s=args.task_timeout, budget_s=budget, log=log))
            model_timeout = settings().AGENT_MODEL_TIMEOUT or default_model_timeout(model)
    ran = [r for r in rows if r.get("ran")]
    selection = (
        ", ".join(
            part
            for part in (
                f"suites {args.only}" if args.only else "",
                f"split {args.split}" if args.split else "",
                f"limit {args.limit} per suite" if args.limit else "",
                f"ids {args.ids}" if args.ids else "",
                f"budget {args.budget_min:g} min" if args.budget_min else "",
            )
            if part
        )
        or "all tasks"
    )
    summary = {
        "meta": {
            "commit": commit,
            "dirty": dirty,
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "model": model,
            "endpoint": upstream,
            "served_model": served,
            "model_timeout": f"{model_timeout:g} s",
            "task_timeout_s": args.task_timeout,
            "tasks_total": len(all_tasks),
            "tasks_run": len(ran),
            "tasks_not_run": [r["id"] for r in rows if not r.get("ran")],
            "selection": selection,
            "wall_min": (time.monotonic() - started) / 60,
            "load_start": " ".join(f"{x:.2f}" for x in load_start),
            "load_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "cpus": os.cpu_count(),
            "rows": str(log),
        },
        "suites": report.summarize_run(ran),
        "examples": report.failure_examples(ran),
    }
    (args.out / f"realmodel-{stamp}.summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if args.column:
        report.update_results(args.column, summary)
        print(f"updated {report.RESULTS_MD} ({args.column})", flush=True)
    if args.partial:
        report.update_results(args.partial, summary, partial=True)
        print(f"updated {report.RESULTS_MD} ({args.partial})", flush=True)
    for suite, groups in summary["suites"].items():
        g = groups["all"]
        print(
            f"{suite:<13} {g['succeeded']}/{g['tasks']} succeeded  calls/task {g['model_calls_per_task']:.1f}  "
            f"prompt/call {g['prompt_tokens_per_call'] or 0:.0f}  cached/call {g['cached_tokens_per_call'] or 0:.0f}  "
            f"text tool calls {g['tool_calls_as_text']}/{g['tool_call_attempts']}  wall/task {g['wall_s_per_task']:.0f} s"
        )
        if g.get("writer_precision") is not None:
            for split in ("all", *SPLITS):
                if split in groups:
                    print(f"{'':<13} {split:<7} {report.writer_line(groups[split])}")
    return 0
