"""Load on the production stack (`scripts/prod`): does a second Aegra replica add throughput?

    .venv/bin/python -m bench.prod_load [--users 50] [--rounds 3] [--replicas 1,2] [--port 28700]

Starts the stack with a scripted OpenAI-compatible model that answers each call after
`--model-delay` seconds (tests/openai_server.py), then, alternating the configurations round by
round (1, 2, 2, 1, 1, 2, ...: both see the same load on a shared machine), `--users` users at once,
each creating a thread and streaming one react run (`--runs-per-user` in turn), the requests spread
over the configuration's replicas in turn (a load balancer). The stack is started again for each
configuration, on the same Postgres (its tables kept), because every replica's workers take runs
from the one Redis queue: a replica that is up but not sent requests still runs them.

Printed per round and per configuration (all its rounds together): throughput (runs completed per
second of the round), p50/p95/max latency of a run (thread created to stream ended), the CPU time
the replicas' processes and the embedded Postgres used a run, errors by kind (`HTTP <status>`, `run error`, a client
exception's type, `too many clients` counted in the replicas' logs), the load average; then each configuration's throughput over the first one's, as
the median of the rounds' ratios (the rounds are paired: round i of every configuration ran back
to back). Exits 1 when the last configuration had an error or is slower than the first. Loopback
only; not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
KEYS = {"load": "k-load-bench"}
TOO_MANY = "too many clients"


@dataclass
class Round:
    """One round of one configuration: each run's latency (seconds) and the errors by kind."""

    replicas: int
    seconds: float  # wall time of the round, first request to last answer
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cpu: float = 0.0  # CPU seconds the replicas' processes used during the round
    postgres_cpu: float = 0.0  # and the embedded Postgres (0 for another one)


def percentile(values: list[float], q: float) -> float:
    """The `q`-th percentile (0-100) of `values`, linear between the closest ranks (numpy's
    default); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(rounds: list[Round]) -> dict[str, Any]:
    """Figures of a configuration's rounds together: runs completed, throughput (runs per second
    of the rounds' total time), p50/p95/max latency, errors by kind."""
    latencies = [s for r in rounds for s in r.latencies]
    seconds = sum(r.seconds for r in rounds)
    errors: Counter[str] = Counter()
    for r in rounds:
        errors.update(r.errors)
    return {
        "runs": len(latencies),
        "cpu_per_run": sum(r.cpu for r in rounds) / len(latencies) if latencies else 0.0,
        "postgres_cpu_per_run": sum(r.postgres_cpu for r in rounds) / len(latencies) if latencies else 0.0,
        "throughput": len(latencies) / seconds if seconds > 0 else 0.0,
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "max": max(latencies, default=0.0),
        "errors": dict(sorted(errors.items())),
    }


def throughput(r: Round) -> float:
    return len(r.latencies) / r.seconds if r.seconds > 0 else 0.0


def paired_ratio(base: list[Round], other: list[Round]) -> float:
    """Median over rounds of `other`'s throughput over `base`'s (round i with round i: the pairs
    ran back to back); 0.0 when no pair has a base throughput."""
    ratios = [throughput(o) / throughput(b) for b, o in zip(base, other, strict=False) if throughput(b) > 0]
    return statistics.median(ratios) if ratios else 0.0


def order(configs: list[int], rounds: int) -> list[int]:
    """The configurations to run, round by round, reversed every other round (1, 2, 2, 1, 1, 2):
    a drift of the machine's load over time weighs on each configuration alike."""
    sequence: list[int] = []
    for i in range(rounds):
        sequence += configs if i % 2 == 0 else configs[::-1]
    return sequence


def error_kind(exc: BaseException) -> str:
    """A client error by kind: `HTTP <status>` for an answer with an error status, `too many
    clients` when the message says so, else the exception's type."""
    if TOO_MANY in str(exc):
        return TOO_MANY
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    return type(exc).__name__


def render(results: dict[int, list[Round]]) -> str:
    """The per-configuration table and the ratios against the first configuration."""
    configs = list(results)
    lines = ["replicas  runs  runs/s   p50 s   p95 s   max s  CPU ms a run (replicas, Postgres)  errors"]
    for replicas in configs:
        s = summary(results[replicas])
        errors = ", ".join(f"{kind} x{n}" for kind, n in s["errors"].items()) or "none"
        lines.append(
            f"{replicas:>8} {s['runs']:>5} {s['throughput']:7.2f} {s['p50']:7.2f} {s['p95']:7.2f} "
            f"{s['max']:7.2f}  {1000 * s['cpu_per_run']:4.0f}, {1000 * s['postgres_cpu_per_run']:4.0f}  {errors}"
        )
    base = configs[0]
    for replicas in configs[1:]:
        lines.append(
            f"throughput {replicas}/{base} replicas: {paired_ratio(results[base], results[replicas]):.2f}x "
            "(median of the paired rounds)"
        )
    return "\n".join(lines)


async def one_user(client: Any, runs: int, round_errors: Counter[str], latencies: list[float]) -> None:
    """Create a thread and stream a react run on it, `runs` times in turn."""
    for _ in range(runs):
        started = time.monotonic()
        try:
            thread = await client.threads.create()
            failed = None
            async for part in client.runs.stream(
                thread["thread_id"],
                "react",
                input={"messages": [{"role": "user", "content": "load: hello"}]},
                stream_mode=["messages-tuple"],
                context={"remember": False, "tools": ["calculator"]},
            ):
                if part.event == "error":
                    failed = json.dumps(part.data)[:200]
            if failed is not None:
                round_errors[TOO_MANY if TOO_MANY in failed else "run error"] += 1
                continue
            latencies.append(time.monotonic() - started)
        except Exception as exc:  # counted by kind; the other users go on
            round_errors[error_kind(exc)] += 1


def cpu_seconds(pids: list[int], children: bool = False) -> float:
    """CPU seconds (user + system) the processes `pids` have used so far; with `children`, also
    their children's, those that ended included (Postgres' backends)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone
            continue
        total += sum(int(f) for f in fields[11 : 15 if children else 13]) / os.sysconf("SC_CLK_TCK")
        if children:
            listed = Path(f"/proc/{pid}/task/{pid}/children")
            kids = [int(k) for k in listed.read_text().split()] if listed.exists() else []
            total += cpu_seconds(kids)
    return total


def postgres_pid() -> list[int]:
    """The embedded Postgres' postmaster (its data folder's `postmaster.pid`), if it runs here."""
    from store.pool import _embedded_dir

    try:
        return [int((_embedded_dir() / "postmaster.pid").read_text().split()[0])]
    except (OSError, ValueError, IndexError):
        return []


def log_mentions(data_dir: Path, text: str) -> int:
    """How many lines of the replicas' logs under `data_dir` mention `text`."""
    total = 0
    for path in (data_dir / "aegra").glob("replica-*.log"):
        total += sum(1 for line in path.read_text(errors="replace").splitlines() if text in line)
    return total


def sdk_client(urls: list[str], timeout: float) -> Any:
    """A langgraph-sdk client whose requests go to each of `urls` in turn."""
    from langgraph_sdk.client import LangGraphClient

    from tests.prod_stack import RoundRobin

    http = httpx.AsyncClient(
        base_url=urls[0],
        transport=RoundRobin(urls),
        headers={"x-api-key": KEYS["load"]},
        timeout=httpx.Timeout(connect=10, read=timeout, write=timeout, pool=timeout),
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=200),
    )
    return LangGraphClient(http)


async def load_round(
    urls: list[str], users: int, runs_per_user: int, timeout: float, pids: list[int]
) -> tuple[float, Any, Any, float, float]:
    """One round: `users` users at once; (seconds, latencies, errors, CPU seconds the processes
    `pids` used meanwhile, CPU seconds of the embedded Postgres)."""
    client = sdk_client(urls, timeout)
    errors: Counter[str] = Counter()
    latencies: list[float] = []
    # Warm-up: each replica's graphs loaded, its first connections open.
    warm = [one_user(client, 1, Counter(), []) for _ in urls]
    await asyncio.gather(*warm)
    started, cpu, pg = time.monotonic(), cpu_seconds(pids), cpu_seconds(postgres_pid(), children=True)
    await asyncio.wait_for(
        asyncio.gather(*(one_user(client, runs_per_user, errors, latencies) for _ in range(users))),
        timeout=timeout * runs_per_user + 60,
    )
    seconds, cpu = time.monotonic() - started, cpu_seconds(pids) - cpu
    pg = cpu_seconds(postgres_pid(), children=True) - pg
    await client.aclose()
    return seconds, latencies, errors, cpu, pg


def main_with(args: argparse.Namespace) -> int:
    from bench.prod_faults import replica_pids
    from tests.openai_server import spawn_openai_server
    from tests.prod_stack import ProdStack

    configs = [int(c) for c in args.replicas.split(",")]
    sequence = order(configs, args.rounds)
    results: dict[int, list[Round]] = {c: [] for c in configs}
    data_root = ROOT / ".data" / "prod_load"  # a folder a round: its replicas' logs, its Redis
    shutil.rmtree(data_root, ignore_errors=True)
    total = len(sequence) * args.users * args.runs_per_user + 10 * len(sequence)
    with spawn_openai_server() as model:
        model.script("default", [{"content": "done", "delay": args.model_delay}] * total)
        env = {
            **os.environ,
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "bench",
            "AGENT_MODEL": "openai:scripted",
            "AGENT_API_KEYS": ",".join(f"{user}={key}" for user, key in KEYS.items()),
            "PORT": str(args.port),
            "LANGSMITH_TRACING": "false",
        }
        print(f"{args.users} users x {args.runs_per_user} streamed react run(s), model answers after "
              f"{args.model_delay:g} s; configurations in order {sequence}", flush=True)  # fmt: skip
        for index, replicas in enumerate(sequence):
            data_dir = data_root / f"round-{index}-{replicas}"
            stack = ProdStack(env, data_dir=data_dir)
            try:
                started = time.monotonic()
                stack.start(replicas)
                up = time.monotonic() - started
                seconds, latencies, errors, cpu, pg = asyncio.run(
                    load_round(stack.urls, args.users, args.runs_per_user, args.timeout, replica_pids())
                )
                too_many = log_mentions(data_dir, TOO_MANY)
                if too_many:
                    errors[f"{TOO_MANY} (replica logs)"] += too_many
                r = Round(replicas, seconds, latencies, errors, os.getloadavg(), cpu, pg)
                results[replicas].append(r)
                s = summary([r])
                print(
                    f"  {replicas} replica(s) (up in {up:.1f} s): {s['runs']} runs in {seconds:.1f} s = "
                    f"{s['throughput']:.2f} runs/s, p50 {s['p50']:.2f} s, p95 {s['p95']:.2f} s, CPU a run: "
                    f"replicas {1000 * s['cpu_per_run']:.0f} ms, Postgres {1000 * s['postgres_cpu_per_run']:.0f} ms, "
                    f"errors {s['errors'] or 'none'}, load average {' '.join(f'{x:.2f}' for x in r.load)}",
                    flush=True,
                )
            finally:
                stack.stop()
    print(render(results))
    last, first = summary(results[configs[-1]]), configs[0]
    ratio = paired_ratio(results[first], results[configs[-1]])
    return 0 if not last["errors"] and ratio >= 1.0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--runs-per-user", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replicas", default="1,2", help="configurations, the first is the baseline")
    parser.add_argument("--model-delay", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a run may take")
    parser.add_argument("--port", type=int, default=28700)
    return main_with(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
