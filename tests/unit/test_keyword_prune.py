"""Which of a query's lexemes a memory keyword search takes its candidates from
(store/sql/base.py `essential`, both keyword searches): the rarest always, common ones left out while the rows holding
only them stay below a share of the query's weight, and, in a large namespace, lexemes most rows
hold never alone."""

from __future__ import annotations

import math

import pytest

from store.bm25 import BM25_K1
from store.sql.base import COMMON_SHARE, PRUNE_ROWS, PRUNE_SHARE, essential


def weight(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5)) * (BM25_K1 + 1)


def test_a_small_namespace_keeps_every_lexeme_a_row_holds():
    assert essential(["hike", "kyoto", "trip"], [40, 3, 0], 100) == (["hike", "kyoto"], 0.0)


def test_the_common_lexemes_within_the_share_are_left_out_and_their_weight_is_the_bound():
    n = 50_000
    lexemes, dfs = ["say", "trip", "maya", "hike"], [9_000, 2_000, 40, 600]
    wanted, bound = essential(lexemes, dfs, n)
    ceiling = sum(weight(df, n) for df in dfs)
    assert wanted == ["trip", "maya", "hike"]  # "trip" too would pass the share
    assert bound == pytest.approx(weight(9_000, n) / ceiling)
    assert bound <= PRUNE_SHARE < (weight(9_000, n) + weight(2_000, n)) / ceiling


def test_a_lexeme_fewer_rows_hold_than_prune_rows_is_kept_whatever_its_weight():
    wanted, bound = essential(["dinner", "lisbon"], [PRUNE_ROWS - 1, 3], 100_000)
    assert wanted == ["dinner", "lisbon"] and bound == 0.0


def test_the_rarest_lexeme_is_kept_however_common():
    assert essential(["say"], [20_000], 50_000) == (["say"], 0.0)
    assert essential(["say", "go"], [20_000, 21_000], 50_000) == (["say", "go"], 0.0)  # each half the weight


def test_a_lexeme_most_rows_hold_finds_nothing_alone_but_only_in_a_large_namespace():
    n = 2 * PRUNE_ROWS
    common = int(COMMON_SHARE * n) + 1
    assert essential(["user"], [common], n) == ([], 0.0)
    assert essential(["user", "coffe"], [common, 30], n) == (["coffe"], 0.0)  # no check: nothing pruned
    assert essential(["user"], [PRUNE_ROWS - 1], PRUNE_ROWS - 1) == (["user"], 0.0)


def test_no_prune_leaves_out_only_the_common():
    n = 50_000
    assert essential(["say", "trip", "user", "maya"], [9_000, 2_000, 49_000, 40], n, prune=False) == (
        ["say", "trip", "maya"],
        0.0,
    )
