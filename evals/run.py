"""Run eval suites as LangSmith evaluations (`langsmith.evaluate`, the graph as target).

    python -m evals                       # offline: every suite, scripted policy, no key
    python -m evals react --out /tmp/ev   # one suite, results elsewhere
    python -m evals --online --model openai:gpt-4o-mini [--judge openai:gpt-4o]

Offline: the real graphs driven by the scripted policy of evals/offline.py, nothing uploaded;
prints a table, writes evals/results/<suite>.offline.json and exits 1 when a mean score is below
evals/thresholds.json. Online (LANGSMITH_API_KEY and a real model): the dataset is created from
the JSONL under a name with its content hash (an edited file becomes a new dataset, old
experiments keep theirs), the experiment is uploaded, and the same table and thresholds apply.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.embeddings import Embeddings
from langsmith import Client, evaluate
from langsmith.schemas import Example

from evals import offline
from evals.evaluators import judges as judge_evaluators
from evals.jsonl import numbered_rows
from evals.suites import SUITES, Suite
from evals.targets import BackgroundLoop, TargetEnv, as_sync, environment

ROOT = Path(__file__).resolve().parent
DATASETS = ROOT / "datasets"
THRESHOLDS = ROOT / "thresholds.json"
RESULTS = ROOT / "results"
DATASET_PREFIX = "agent-engine"
EXAMPLE_NAMESPACE = uuid.UUID("6f1c6a52-2f43-4d4e-9a57-6a0d5b1f3c11")


class DatasetError(ValueError):
    """A dataset file is not in LangSmith's example shape."""


def dataset_hash(path: Path) -> str:
    """First 12 hex digits of the file's SHA-256: part of the online dataset name."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def dataset_name(suite: Suite) -> str:
    """The LangSmith dataset name of a suite's current JSONL, e.g. agent-engine-react-1a2b3c4d5e6f."""
    return f"{DATASET_PREFIX}-{suite.name}-{dataset_hash(DATASETS / suite.dataset)}"


def load_examples(path: Path) -> list[Example]:
    """The JSONL's lines as LangSmith Examples (ids derived from the content, so stable)."""
    examples = []
    for number, row in numbered_rows(path, DatasetError):
        keys = sorted(row) if isinstance(row, dict) else type(row).__name__
        if (
            not isinstance(row, dict)
            or set(row) - {"inputs", "outputs", "metadata"}
            or not all(isinstance(row.get(k), dict) for k in ("inputs", "outputs"))
            or not isinstance(row.get("metadata", {}), dict)
        ):
            raise DatasetError(
                f"{path.name}:{number}: an example is an object with 'inputs' and 'outputs' "
                f"objects and optional 'metadata', got {keys}"
            )
        canonical = json.dumps(row, sort_keys=True)
        examples.append(
            Example(
                id=uuid.uuid5(EXAMPLE_NAMESPACE, canonical),
                inputs=row["inputs"],
                outputs=row["outputs"],
                metadata={**row.get("metadata", {}), "line": number},
            )
        )
    if not examples:
        raise DatasetError(f"{path.name}: no examples")
    return examples


def sync_dataset(client: Client, suite: Suite, examples: Sequence[Example]) -> str:
    """Create the suite's dataset in LangSmith unless this content hash exists; return its name."""
    name = dataset_name(suite)
    if not client.has_dataset(dataset_name=name):
        dataset = client.create_dataset(name, description=f"{suite.description} (from evals/datasets/{suite.dataset})")
        client.create_examples(
            dataset_id=dataset.id,
            examples=[{"id": e.id, "inputs": e.inputs, "outputs": e.outputs, "metadata": e.metadata} for e in examples],
        )
    return name


@dataclass
class SuiteResult:
    """One suite's run: per-example rows, mean score per evaluator, threshold failures."""

    suite: str
    mode: str
    model: str
    dataset: str
    experiment: str
    rows: list[dict] = field(default_factory=list)
    means: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    split_means: dict[str, dict[str, float]] = field(default_factory=dict)
    """Means per `metadata.split` (e.g. heldin / heldout), when the dataset has splits."""


def _rows(results) -> list[dict]:
    rows = []
    for row in results:
        example, run = row["example"], row["run"]
        scores = {}
        for result in row["evaluation_results"]["results"]:
            scores[result.key] = {"score": result.score, "comment": result.comment}
        rows.append(
            {
                "example_id": str(example.id),
                "line": example.metadata.get("line"),
                "kind": example.metadata.get("kind"),
                "split": example.metadata.get("split"),
                "outputs": run.outputs if run else None,
                "error": run.error if run else "no run",
                "scores": scores,
            }
        )
    return sorted(rows, key=lambda r: r["line"] or 0)


def _means(rows: list[dict]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for row in rows:
        for key, result in row["scores"].items():
            if result["score"] is not None:
                values.setdefault(key, []).append(float(result["score"]))
    return {key: sum(v) / len(v) for key, v in sorted(values.items())}


def split_means(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Means per `metadata.split` value (examples without one count as `heldin`); {} when no
    example of the dataset names a split."""
    if not any(row.get("split") for row in rows):
        return {}
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row.get("split") or "heldin", []).append(row)
    return {name: _means(group) for name, group in sorted(groups.items())}


def check_thresholds(result: SuiteResult, thresholds: dict) -> list[str]:
    """Messages for every evaluator whose mean is below its threshold (or has no score)."""
    failures = []
    for key, minimum in thresholds.get(result.mode, {}).get(result.suite, {}).items():
        mean = result.means.get(key)
        if mean is None:
            failures.append(f"{result.suite}: no scores for {key}")
        elif mean < minimum:
            failures.append(f"{result.suite}: {key} {mean:.3f} < {minimum}")
    return failures


def run_suite(
    suite: Suite,
    *,
    online: bool,
    model: str,
    embeddings: Embeddings,
    loop: BackgroundLoop,
    client: Client,
    judge: str | None = None,
    thresholds: dict | None = None,
) -> SuiteResult:
    """Evaluate one suite; offline with the scripted policy (`model` ignored), online uploaded."""
    examples = load_examples(DATASETS / suite.dataset)
    name = dataset_name(suite)
    if online:
        data = sync_dataset(client, suite, examples)
    else:
        policy = offline.OfflinePolicy()
        for example in examples:
            policy.add_script(suite.turn_text(example.inputs), suite.offline_script(example.inputs, example.outputs))
        model, data = offline.install(policy), examples
    evaluators = list(suite.evaluators)
    if judge:
        evaluators += judge_evaluators(judge, suite.judges)
    env = TargetEnv(model=model, embeddings=embeddings, trace=online)
    # Memory extraction runs right after each turn (the targets wait for it).
    with environment({"MEMORY_EXTRACTION_DELAY": "0"}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*'upload_results' parameter is in beta")
        results = evaluate(
            as_sync(suite.target, env, loop),
            data=data,
            evaluators=evaluators,
            client=client,
            experiment_prefix=f"{suite.name}-{model.replace(':', '-')}",
            description=suite.description,
            upload_results=online,
            max_concurrency=0,
            # Offline, evaluators are not traced either: a judge's model call would otherwise try
            # to post its trace (and retry for minutes without network).
            disable_evaluator_tracing=not online,
            metadata={"model": model, "mode": "online" if online else "offline", "dataset": name, "judge": judge},
        )
        rows = _rows(results)
    result = SuiteResult(
        suite.name,
        "online" if online else "offline",
        model,
        name,
        results.experiment_name,
        rows,
        _means(rows),
        split_means=split_means(rows),
    )
    result.failures = check_thresholds(
        result, thresholds if thresholds is not None else json.loads(THRESHOLDS.read_text())
    )
    return result


def render(results: Sequence[SuiteResult], thresholds: dict) -> str:
    """A plain-text table: suite, evaluator, mean, threshold, pass/FAIL."""
    lines = [f"{'suite':<13} {'evaluator':<28} {'mean':>6} {'min':>6}  result"]
    for result in results:
        limits = thresholds.get(result.mode, {}).get(result.suite, {})
        lines.append(
            f"{result.suite:<13} {len(result.rows)} examples, {result.mode}, {result.model}, dataset {result.dataset}"
        )
        splits = list(result.split_means)
        for key, mean in result.means.items():
            limit = limits.get(key)
            verdict = "-" if limit is None else "pass" if mean >= limit else "FAIL"
            shown = "-" if limit is None else f"{limit:.2f}"
            by_split = "  ".join(f"{s} {result.split_means[s].get(key, float('nan')):.3f}" for s in splits)
            lines.append(f"{'':<13} {key:<28} {mean:>6.3f} {shown:>6}  {verdict:<5} {by_split}".rstrip())
        for row in result.rows:
            failed = {k: v["comment"] for k, v in row["scores"].items() if v["score"] not in (None, 1, True)}
            if failed or row["error"]:
                lines.append(f"{'':<13}   line {row['line']} ({row['kind']}): {row['error'] or ''} {failed}")
    return "\n".join(lines)


def write_results(result: SuiteResult, out: Path) -> Path:
    """Write one suite's rows and means to `out/<suite>.<mode>.json`."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{result.suite}.{result.mode}.json"
    path.write_text(json.dumps(result.__dict__, indent=2, default=str) + "\n")
    return path


def run_suites(
    names: Sequence[str],
    *,
    online: bool = False,
    model: str | None = None,
    judge: str | None = None,
    out: Path = RESULTS,
    embeddings: Embeddings | None = None,
) -> list[SuiteResult]:
    """Run the named suites (all when empty) and write their result files."""
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise SystemExit(f"unknown suite(s) {unknown}; known: {', '.join(SUITES)}")
    key = os.environ.get("LANGSMITH_API_KEY", "")
    if online:
        model = model or os.environ.get("AGENT_MODEL", "")
        if not key:
            raise SystemExit("--online needs LANGSMITH_API_KEY (offline runs need nothing)")
        if not model or model.startswith(f"{offline.PROVIDER}:"):
            raise SystemExit("--online needs a real model: --model provider:model or AGENT_MODEL")
    if embeddings is None:
        from store.embeddings import get_embeddings

        embeddings = get_embeddings()
    # No background batch thread: a firewalled process would otherwise retry uploads for minutes.
    client = Client(api_key=key or "offline-never-sent", auto_batch_tracing=False)
    loop = BackgroundLoop()
    results = []
    try:
        for name in names or list(SUITES):
            result = run_suite(
                SUITES[name],
                online=online,
                model=model or "",
                embeddings=embeddings,
                loop=loop,
                client=client,
                judge=judge,
            )
            write_results(result, out)
            results.append(result)
    finally:
        loop.close()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m evals`."""
    parser = argparse.ArgumentParser(prog="python -m evals", description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="*", help=f"suites to run (default all: {', '.join(SUITES)})")
    parser.add_argument(
        "--online", action="store_true", help="real model + LangSmith upload (needs LANGSMITH_API_KEY and a model)"
    )
    parser.add_argument("--model", help="online: the model under evaluation (default AGENT_MODEL)")
    parser.add_argument(
        "--judge",
        default=os.environ.get("EVAL_JUDGE_MODEL") or None,
        help="judge model for the openevals LLM-as-judge evaluators (env EVAL_JUDGE_MODEL)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results folder (default {RESULTS})")
    args = parser.parse_args(argv)
    if not args.online and not os.environ.get("LANGSMITH_API_KEY"):
        os.environ.setdefault("LANGSMITH_TRACING", "false")
    results = run_suites(args.suites, online=args.online, model=args.model, judge=args.judge, out=args.out)
    print(render(results, json.loads(THRESHOLDS.read_text())))
    failures = [f for r in results for f in r.failures]
    for failure in failures:
        print(f"FAIL {failure}")
    print(f"results in {args.out}/")
    return 1 if failures else 0
