"""`python -m bench`: every benchmark in one run, each figure next to its baseline measured in the
same run, written with the machine's description to bench/results.json and bench/results.md.

    python -m bench                         # default sizes, about 5 minutes
    python -m bench --full                  # bigger: 600 turns, N=1,10,50, memory 1k/10k + 5 seeds
    python -m bench --only overhead,server  # a subset (overhead, persistence, server, memory, kb,
                                            # plan_fanout, research_fanout, embed)
    python -m bench --st-venv /tmp/st-venv  # embed: also sentence-transformers (a venv with torch)
    python -m bench --profile               # also a cProfile of react turns in the results

Figures, never timed tests: on a shared machine they are noisy, so the results carry the load
average at the start and the end. The embedded Postgres is started when needed and stopped at the
end if this command started it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from bench import embed_bench, fanout, kb_bench, memory_bench, overhead, server

BENCH_DIR = Path(__file__).resolve().parent
BENCHES = ("overhead", "persistence", "server", "memory", "kb", "plan_fanout", "research_fanout", "embed")
PACKAGES = (
    "langgraph",
    "langchain",
    "langchain-core",
    "langgraph-api",
    "langgraph-checkpoint-postgres",
    "langsmith",
    "psycopg",
)


def machine() -> dict:
    """What the figures were measured on."""
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    memory_kb = (
        next(
            (
                int(line.split()[1])
                for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")
            ),
            0,
        )
        if Path("/proc/meminfo").exists()
        else 0
    )
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=BENCH_DIR, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=BENCH_DIR,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        commit += " + uncommitted changes" if commit and changed else ""
    except (OSError, subprocess.SubprocessError):
        commit = ""
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gb": round(memory_kb / 1024 / 1024, 1),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "git_commit": commit,
        "packages": versions,
    }


def _memory(full: bool) -> dict:
    argv = (
        []
        if full
        else [
            "--sizes",
            "1000",
            "--queries",
            "40",
            "--real-puts",
            "100",
            "--distinct",
            "300",
            "--no-tenant-check",
            "--seeds",
            "7",
        ]
    )
    return asyncio.run(memory_bench.run(memory_bench.parse_args(argv)))


def _kb() -> dict:
    previous = os.environ.get("POSTGRES_SCHEMA")
    try:
        report, corpus, seconds = asyncio.run(kb_bench.run())
    finally:
        if previous is None:
            os.environ.pop("POSTGRES_SCHEMA", None)
        else:
            os.environ["POSTGRES_SCHEMA"] = previous
    print(kb_bench.render(report, corpus, seconds))
    return {
        "passages": len(corpus.passages),
        "queries": len(corpus.queries),
        "ingest_seconds": seconds,
        "report": report,
    }


def run_bench(name: str, args: argparse.Namespace) -> dict:
    """Run one benchmark and print its figures; returns them."""
    if name == "overhead":
        figures = asyncio.run(overhead.framework_overhead(args.turns, args.rounds))
        print(overhead.render_overhead(figures))
    elif name == "persistence":
        figures = asyncio.run(overhead.persistence_cost(max(30, args.turns // 4), args.rounds))
        print(overhead.render_persistence(figures))
    elif name == "server":
        figures = server.run(args.concurrency, args.batches)
        print(server.render(figures))
    elif name == "memory":
        figures = _memory(args.full)
    elif name == "plan_fanout":
        figures = asyncio.run(fanout.plan_fanout(args.plan_steps, args.fanout_delay, args.fanout_rounds))
        print(fanout.render("plan_execute wave", figures))
    elif name == "research_fanout":
        figures = asyncio.run(fanout.research_fanout(args.research_units, args.fanout_delay, args.fanout_rounds))
        print(fanout.render("deep_research fan-out", figures))
    elif name == "embed":
        figures = embed_bench.run(embed_bench.st_python_from(args.st_venv), 1)
        print(embed_bench.render(figures))
    else:
        figures = _kb()
    return figures


def summary(report: dict) -> str:
    """Markdown: the machine, then one row per headline figure with its baseline and ratio."""
    m, f = report["machine"], report["figures"]
    lines = [
        f"# Benchmark results ({report['started_at']})",
        "",
        f"{m['cpu']}, {m['cpus']} CPUs, {m['memory_gb']} GB, {m['platform']}, Python {m['python']}, "
        f"commit {m['git_commit']}; load average {m['load_average_start']} at the start, "
        f"{m.get('load_average_end')} at the end. {report['note']}",
        "",
        "| figure | measured | baseline (same run) | ratio |",
        "| --- | --- | --- | --- |",
    ]

    def row(label: str, value: str, baseline: str, ratio: float | None) -> None:
        lines.append(f"| {label} | {value} | {baseline} | {'' if ratio is None else f'{ratio:.2f}x'} |")

    for mode, r in (f.get("overhead") or {}).items():
        if isinstance(r, dict) and "react" in r:
            row(
                f"react turn, {mode} (median)",
                f"{r['react']['median_ms']:.2f} ms",
                f"create_agent {r['create_agent']['median_ms']:.2f} ms",
                r["ratio"],
            )
    if (p := f.get("persistence")) and "postgres" in p:
        row(
            "react turn, Postgres saver (median)",
            f"{p['postgres']['median_ms']:.2f} ms "
            f"({p['extra_ms_per_checkpoint']:.2f} ms extra per checkpoint, {p['checkpoints_per_turn']} per turn)",
            f"in-memory saver {p['in_memory']['median_ms']:.2f} ms",
            p["ratio"],
        )
    for n, r in (f.get("server") or {}).items():
        if isinstance(r, dict) and "react" in r:
            token = (
                f", token delay p50 {r['react']['token_delay_p50_ms']:.1f} ms"
                if "token_delay_p50_ms" in r["react"]
                else ""
            )
            row(
                f"server N={n}, react run p50 / p95",
                f"{r['react']['p50_ms']:.0f} / {r['react']['p95_ms']:.0f} ms, "
                f"{r['react']['runs_per_s']:.1f} runs/s{token}",
                f"echo {r['echo']['p50_ms']:.0f} / {r['echo']['p95_ms']:.0f} ms, {r['echo']['runs_per_s']:.1f} runs/s",
                r["react_vs_echo_p50"],
            )
    memory = f.get("memory") or {}
    for r in memory.get("latency", []):
        t = r["timing"]
        row(
            f"memory recall p50, {r['label']}",
            f"weighted {t['weighted']['p50']:.1f} ms",
            f"plain {t['plain']['p50']:.1f} ms, store only {t['store_only']['p50']:.1f} ms",
            t["weighted"]["p50"] / t["plain"]["p50"],
        )
    for target in ("memories", "chat"):
        mean = (memory.get("quality") or {}).get("mean", {})
        if f"{target}/weighted" in mean:
            w, p = mean[f"{target}/weighted"], mean[f"{target}/plain"]
            row(
                f"memory recall@5 / MRR, {target}",
                f"weighted {w['recall@5']:.3f} / {w['mrr']:.3f}",
                f"plain {p['recall@5']:.3f} / {p['mrr']:.3f}",
                w["recall@5"] / p["recall@5"] if p["recall@5"] else None,
            )
    if (kb := f.get("kb")) and "report" in kb:
        dense = kb["report"]["dense"]["all"]
        for strategy in ("hybrid", "keyword"):
            s = kb["report"][strategy]["all"]
            row(
                f"KB nDCG@10 / R@10, {strategy}",
                f"{s['ndcg@10']:.3f} / {s['recall@10']:.3f}, {s['ms_per_query']:.1f} ms/query",
                f"dense {dense['ndcg@10']:.3f} / {dense['recall@10']:.3f}, {dense['ms_per_query']:.1f} ms/query",
                s["ndcg@10"] / dense["ndcg@10"],
            )
    for name, label in (
        ("plan_fanout", "plan_execute: {n} independent steps, each"),
        ("research_fanout", "deep_research: {n} researchers, each search"),
    ):
        if (r := f.get(name)) and "parallel" in r:
            label = label.format(n=r["n"]) + f" {r['delay_s']:.2f} s (median wall)"
            row(
                f"{label}, parallel",
                f"{r['parallel']['median_s']:.3f} s (ideal ratio {r['ideal_ratio']:.2f}x)",
                f"{r['baseline']} {r['serial']['median_s']:.3f} s",
                r["ratio"],
            )
            row(
                f"{label}, vs N x one",
                f"{r['parallel']['median_s']:.3f} s",
                f"{r['n']} x one-item run {r['n'] * r['one']['median_s']:.3f} s",
                r["ratio_vs_n_x_one"],
            )
    for label, value, baseline, ratio in embed_bench.rows(f.get("embed") or {}):
        row(label, value, baseline, ratio)
    for name, figures in f.items():
        if isinstance(figures, dict) and "error" in figures:
            lines.append(f"| {name} | failed: {figures['error']} | | |")
    lines += ["", "Seconds per benchmark: " + ", ".join(f"{k} {v:.0f}" for k, v in report["seconds"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m bench`."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        default=",".join(BENCHES),
        type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
        help=f"benchmarks to run (default all: {','.join(BENCHES)})",
    )
    parser.add_argument("--full", action="store_true", help="the bigger sizes (takes 10+ minutes)")
    parser.add_argument("--turns", type=int, help="overhead: measured turns per contestant (default 200, full 600)")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default 4)")
    parser.add_argument(
        "--concurrency",
        type=lambda s: [int(x) for x in s.split(",")],
        help="server: concurrent runs per batch (default 1,10; full 1,10,50)",
    )
    parser.add_argument("--batches", type=int, help="server: batches per N (default 3, full 5)")
    parser.add_argument("--plan-steps", type=int, default=4, help="plan_fanout: independent steps (default 4)")
    parser.add_argument("--research-units", type=int, default=3, help="research_fanout: researchers (default 3)")
    parser.add_argument(
        "--fanout-delay", type=float, default=0.2, help="plan/research_fanout: seconds per tool call or search"
    )
    parser.add_argument(
        "--fanout-rounds", type=int, help="plan/research_fanout: runs per contestant (default 3, full 5)"
    )
    parser.add_argument("--profile", action="store_true", help="add a cProfile of react turns to the results")
    parser.add_argument(
        "--st-venv",
        default=os.environ.get("BENCH_ST_VENV"),
        help="embed: a venv with torch and sentence-transformers to compare with (default $BENCH_ST_VENV)",
    )
    parser.add_argument("--note", default="", help="free text stored with the results (e.g. 'measured under load')")
    parser.add_argument(
        "--out",
        type=Path,
        default=BENCH_DIR / "results.json",
        help="results file (JSON; a Markdown summary is written next to it)",
    )
    args = parser.parse_args(argv)
    unknown = set(args.only) - set(BENCHES)
    if unknown:
        parser.error(f"unknown benchmark(s) {sorted(unknown)}; known: {', '.join(BENCHES)}")
    args.turns = args.turns or (600 if args.full else 200)
    args.concurrency = args.concurrency or ([1, 10, 50] if args.full else [1, 10])
    args.batches = args.batches or (5 if args.full else 3)
    args.fanout_rounds = args.fanout_rounds or (5 if args.full else 3)
    os.environ.setdefault("LANGSMITH_TRACING", "false")

    was_running = memory_bench._embedded_was_running()
    report: dict = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "note": args.note,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "figures": {},
        "seconds": {},
    }
    try:
        for name in [b for b in BENCHES if b in args.only]:
            print(f"\n== {name}", flush=True)
            started = time.perf_counter()
            try:
                report["figures"][name] = run_bench(name, args)
            except Exception as exc:
                report["figures"][name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
                print(f"{name} failed: {exc}", file=sys.stderr)
            report["seconds"][name] = time.perf_counter() - started
        if args.profile:
            report["profile"] = asyncio.run(overhead.profile_react())
    finally:
        uses_postgres = {"persistence", "server", "memory", "kb", "embed"} & set(args.only)
        if uses_postgres and not was_running and not os.environ.get("POSTGRES_URI"):
            from store.postgres import stop_embedded_postgres

            stop_embedded_postgres()
    report["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    text = summary(report)
    markdown = args.out.with_suffix(".md")
    kept = embed_bench.SECTION.search(markdown.read_text()) if markdown.exists() else None
    if kept and "embed" not in args.only:  # keep the last `python -m bench.embed_bench` section
        text += "\n" + kept.group(0)
    markdown.write_text(text)
    print("\n" + text)
    print(f"results: {args.out} and {args.out.with_suffix('.md')}")
    return 1 if any("error" in f for f in report["figures"].values() if isinstance(f, dict)) else 0


if __name__ == "__main__":
    raise SystemExit(main())
