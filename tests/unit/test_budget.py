"""The Postgres connection budget of the production stack (store/budget.py)."""

from __future__ import annotations

import pytest

from store.budget import DEFAULTS, MINIMUM, ConnectionBudgetError, PoolSizes, check, plan

# The embedded Postgres: max_connections 100, 3 reserved for superusers.
LIMIT = 97


def test_the_default_pools_of_two_replicas_do_not_fit_the_embedded_postgres():
    # each replica could open 60 connections: 2 x 60 + 5 > 97 ("too many clients already")
    with pytest.raises(ConnectionBudgetError) as raised:
        check(LIMIT, 2, 5, DEFAULTS)
    message = str(raised.value)
    assert (
        "2 replica(s) x (SQLALCHEMY_POOL_SIZE 10 + SQLALCHEMY_MAX_OVERFLOW 20 + LANGGRAPH_MAX_POOL_SIZE 20" in message
    )
    assert "= 125, but Postgres accepts 97" in message
    assert "Sizes that fit: SQLALCHEMY_POOL_SIZE 10 + SQLALCHEMY_MAX_OVERFLOW 9 + LANGGRAPH_MAX_POOL_SIZE 18" in message


@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("limit", [20, 97, 197, 1000])
def test_planned_pools_fit_and_never_exceed_the_defaults(replicas, limit):
    sizes = plan(limit, replicas, 5)
    if replicas * MINIMUM.per_replica() + 5 > limit:
        with pytest.raises(ConnectionBudgetError, match="Too many replicas"):
            check(limit, replicas, 5, sizes)
        return
    check(limit, replicas, 5, sizes)
    for name, size in vars(sizes).items():
        assert getattr(MINIMUM, name) <= size <= getattr(DEFAULTS, name), name


def test_one_replica_on_the_embedded_postgres_keeps_the_defaults():
    assert plan(LIMIT, 1, 5) == DEFAULTS


def test_two_replicas_share_the_embedded_postgres_to_the_last_connection():
    sizes = plan(LIMIT, 2, 5)
    assert sizes == PoolSizes(10, 9, 18, 9)
    assert 2 * sizes.per_replica() + 5 == LIMIT
