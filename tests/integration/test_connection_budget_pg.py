"""The production stack's Postgres connection budget (store/budget.py) against a real Postgres:
`python -m store.budget plan` (what scripts/prod runs) sizes the pools to fit its limit, keeps
what the operator set, and a replica's start-up check refuses pools that do not fit."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import psycopg
import pytest
from psycopg.rows import dict_row

from server import http
from store.budget import DEFAULTS, ConnectionBudgetError, postgres_limit
from tests.integration.conftest import ROOT

pytestmark = pytest.mark.integration

AEGRA_DEFAULTS = {
    "SQLALCHEMY_POOL_SIZE": DEFAULTS.SQLALCHEMY_POOL_SIZE,
    "SQLALCHEMY_MAX_OVERFLOW": DEFAULTS.SQLALCHEMY_MAX_OVERFLOW,
    "LANGGRAPH_MAX_POOL_SIZE": DEFAULTS.LANGGRAPH_MAX_POOL_SIZE,
}


async def limit_of(uri: str) -> int:
    async with await psycopg.AsyncConnection.connect(uri, autocommit=True, row_factory=dict_row) as conn:
        return await postgres_limit(conn)


def plan(uri: str, **env: str) -> tuple[dict[str, int], str]:
    done = subprocess.run(
        [sys.executable, "-m", "store.budget", "plan"],
        cwd=ROOT,
        env={**os.environ, "POSTGRES_URI": uri, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    sizes = {}
    for line in done.stdout.splitlines():
        name, _, value = line.partition("=")
        sizes[name] = int(value)
    return sizes, done.stderr


@pytest.mark.parametrize("replicas", [1, 2, 4])
async def test_planned_pools_fit_the_postgres_limit(pg_uri, replicas):
    limit = await limit_of(pg_uri)
    sizes, said = plan(pg_uri, REPLICAS=str(replicas))
    assert set(sizes) == {*AEGRA_DEFAULTS, "POSTGRES_POOL_SIZE"}
    assert replicas * sum(sizes.values()) + 5 <= limit
    assert f"{replicas} replica(s)" in said and f"of {limit}" in said


async def test_the_start_up_check_refuses_pools_that_do_not_fit(pg_uri, monkeypatch, caplog):
    limit = await limit_of(pg_uri)
    monkeypatch.setattr(http, "server_pool_sizes", lambda: AEGRA_DEFAULTS)
    monkeypatch.setenv("POSTGRES_POOL_SIZE", "10")
    replicas = limit // DEFAULTS.per_replica() + 1  # one more than the defaults fit
    monkeypatch.setenv("REPLICAS", str(replicas))
    from psycopg_pool import AsyncConnectionPool

    async with AsyncConnectionPool(pg_uri, kwargs={"autocommit": True, "row_factory": dict_row}) as pool:
        with pytest.raises(ConnectionBudgetError, match=f"{replicas} replica\\(s\\) x .* but Postgres accepts {limit}"):
            await http._check_connection_budget(pool)
        monkeypatch.setenv("REPLICAS", "1")
        with caplog.at_level(logging.INFO):
            await http._check_connection_budget(pool)
        assert "1 replica(s) x (SQLALCHEMY_POOL_SIZE 10" in caplog.text and f"of {limit}" in caplog.text
