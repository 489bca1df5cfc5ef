"""Benchmark of the calculator tool: how fast hostile input is refused and normal input evaluated.

Run from the repository root:  python -m bench.calculator_bench [--runs N]

For every expression it prints the median wall time over N runs and the ratio to the baseline
`1+1` measured in the same run, then the slowest refusal against the 100 ms budget per refusal.
Exits with status 1 if any refusal exceeds the budget or a hostile expression is not refused.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from tools.calculator import calculator
from tools.errors import ToolInputError

REFUSAL_BUDGET_MS = 100.0
BASELINE = "1+1"

NORMAL = [
    "2**100",
    "0.1 + 0.2",
    "1/3",
    "sqrt(2) * sin(pi / 4)",
    "log(1000, 10)",
    "factorial(1000)",
    "10**9999",
    "1.0001**100000",
    "+".join(["1"] * 200),
]

HOSTILE = [
    "9**9**9**9",
    "10**10**10",
    "2**10000000",
    "factorial(100000)",
    "factorial(10**100)",
    "2**33000 * 2**33000",
    "lcm(2**20000 - 1, 2**20000 + 1)",
    "1e100000",
    "0.5**-100000",
    "2**-10000000",
    "exp(1000)",
    "(" * 500 + "1" + ")" * 500,
    "+".join(["1"] * 10_000),
    "(" * 300 + "1" + ")" * 300,
    "-" * 300 + "1",
    "+".join(["1"] * 300),
    "__import__('os')",
    "().__class__",
    "open('x')",
    "lambda: 1",
    "[x for x in (1, 2)]",
    "(1, 2)[0]",
    "'abc'",
    "f'{1}'",
    "x + 1",
    "1/0",
    "sqrt(-1)",
    "log(0)",
    "asin(2)",
    "2 << 3",
]


def median_ms(expression: str, runs: int) -> tuple[float, str]:
    """Median milliseconds of one evaluation, and "ok" or "refused"."""
    times = []
    outcome = "ok"
    for _ in range(runs):
        start = time.perf_counter()
        try:
            calculator(expression)
        except ToolInputError:
            outcome = "refused"
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), outcome


def label(expression: str) -> str:
    return expression if len(expression) <= 40 else f"{expression[:30]}... ({len(expression)} chars)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=51, help="evaluations per expression (default 51)")
    runs = parser.parse_args(argv).runs

    baseline, _ = median_ms(BASELINE, runs)
    print(f"baseline {BASELINE!r}: median {baseline * 1000:.1f} us over {runs} runs\n")
    print(f"{'expression':<50} {'outcome':<8} {'median ms':>10} {'x baseline':>11}")
    worst_refusal = 0.0
    failures = []
    for group, expressions in (("normal", NORMAL), ("hostile", HOSTILE)):
        print(f"-- {group}")
        for expression in expressions:
            median, outcome = median_ms(expression, runs)
            print(f"{label(expression):<50} {outcome:<8} {median:>10.3f} {median / baseline:>11.1f}")
            if group == "hostile":
                worst_refusal = max(worst_refusal, median)
                if outcome != "refused":
                    failures.append(f"not refused: {expression!r}")
                elif median > REFUSAL_BUDGET_MS:
                    failures.append(f"refusal over {REFUSAL_BUDGET_MS:.0f} ms: {label(expression)!r}")
    print(f"\nmax refusal time: {worst_refusal:.3f} ms (budget {REFUSAL_BUDGET_MS:.0f} ms per refusal)")
    for failure in failures:
        print(f"FAIL {failure}")
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
