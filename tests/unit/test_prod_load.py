"""The load bench's figures (bench/prod_load.py): percentiles, per-configuration summary, the
paired throughput ratio, the alternating order of the rounds, errors by kind."""

from __future__ import annotations

from collections import Counter

import httpx
import numpy as np
import pytest

from bench.prod_load import Round, error_kind, order, paired_ratio, percentile, render, summary


@pytest.mark.parametrize("q", [0, 25, 50, 95, 100])
@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], [0.5 * i for i in range(50, 0, -1)]])
def test_percentile_is_numpys_linear_percentile(values, q):
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_of_nothing_is_zero():
    assert percentile([], 95) == 0.0


def test_summary_pools_the_rounds_of_a_configuration():
    rounds = [
        Round(1, 10.0, [1.0, 2.0, 3.0], Counter({"HTTP 503": 1})),
        Round(1, 5.0, [4.0], Counter({"HTTP 503": 2, "run error": 1})),
    ]
    s = summary(rounds)
    assert s["runs"] == 4
    assert s["throughput"] == pytest.approx(4 / 15)
    assert s["p50"] == pytest.approx(2.5)
    assert s["max"] == 4.0
    assert s["errors"] == {"HTTP 503": 3, "run error": 1}


def test_paired_ratio_is_the_median_of_the_rounds_ratios():
    one = [Round(1, 10.0, [1.0] * 50), Round(1, 10.0, [1.0] * 40), Round(1, 10.0, [1.0] * 30)]
    two = [Round(2, 10.0, [1.0] * 50), Round(2, 10.0, [1.0] * 60), Round(2, 10.0, [1.0] * 15)]
    # ratios 1.0, 1.5, 0.5
    assert paired_ratio(one, two) == pytest.approx(1.0)
    assert paired_ratio([Round(1, 10.0, [])], [Round(2, 10.0, [1.0])]) == 0.0


def test_rounds_alternate_so_each_configuration_runs_first_as_often():
    assert order([1, 2], 3) == [1, 2, 2, 1, 1, 2]
    assert order([1, 2], 4) == [1, 2, 2, 1, 1, 2, 2, 1]
    assert order([1, 2, 4], 2) == [1, 2, 4, 4, 2, 1]


def test_errors_are_counted_by_kind():
    request = httpx.Request("POST", "http://127.0.0.1/threads")
    refused = httpx.HTTPStatusError("busy", request=request, response=httpx.Response(503, request=request))
    assert error_kind(refused) == "HTTP 503"
    assert error_kind(RuntimeError("FATAL: sorry, too many clients already")) == "too many clients"
    assert error_kind(httpx.ReadTimeout("slow")) == "ReadTimeout"


def test_render_prints_each_configuration_and_the_ratio():
    results = {1: [Round(1, 10.0, [1.0] * 50)], 2: [Round(2, 8.0, [2.0] * 50, Counter({"HTTP 500": 1}))]}
    text = render(results)
    assert "       1    50    5.00" in text
    assert "HTTP 500 x1" in text
    assert "throughput 2/1 replicas: 1.25x" in text
