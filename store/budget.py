"""The Postgres connection budget of the production stack (Aegra replicas sharing one Postgres).

Each replica opens at most

    per replica = SQLALCHEMY_POOL_SIZE + SQLALCHEMY_MAX_OVERFLOW   (Aegra: threads, runs, assistants)
                + LANGGRAPH_MAX_POOL_SIZE                          (Aegra: checkpoints and the store)
                + POSTGRES_POOL_SIZE                               (the package's tables beside the store)

connections, and the stack fits when

    REPLICAS x per replica + POSTGRES_RESERVED_CONNECTIONS
        <= max_connections - superuser_reserved_connections - reserved_connections

(`POSTGRES_RESERVED_CONNECTIONS`: migrations, the CLI, psql, the package's probes while a pool is
busy). `plan` sizes the pools to fit, never above their defaults (`DEFAULTS`); `scripts/prod` uses
it (`python -m store.budget plan`) for every pool size the operator has not set, and each replica
checks the sum of the sizes it runs with when it starts (`check`, `ConnectionBudgetError` naming
every figure).
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Any


class ConnectionBudgetError(RuntimeError):
    """The replicas' pools can open more connections than Postgres accepts."""


@dataclass(frozen=True)
class PoolSizes:
    """The most connections each pool of one replica opens."""

    SQLALCHEMY_POOL_SIZE: int
    SQLALCHEMY_MAX_OVERFLOW: int
    LANGGRAPH_MAX_POOL_SIZE: int
    POSTGRES_POOL_SIZE: int

    def per_replica(self) -> int:
        return sum(asdict(self).values())

    def formula(self) -> str:
        return " + ".join(f"{name} {size}" for name, size in asdict(self).items())


DEFAULTS = PoolSizes(
    SQLALCHEMY_POOL_SIZE=10, SQLALCHEMY_MAX_OVERFLOW=20, LANGGRAPH_MAX_POOL_SIZE=20, POSTGRES_POOL_SIZE=10
)
# The least a replica can serve with: two connections for Aegra's tables, two for checkpoints and
# the store (a run and a request at once), one for the package's tables.
MINIMUM = PoolSizes(SQLALCHEMY_POOL_SIZE=2, SQLALCHEMY_MAX_OVERFLOW=0, LANGGRAPH_MAX_POOL_SIZE=2, POSTGRES_POOL_SIZE=1)


def available(max_connections: int, reserved: int) -> int:
    """Connections the replicas may share: Postgres' limit (`max_connections` less its reserved
    slots) less the `reserved` ones (POSTGRES_RESERVED_CONNECTIONS)."""
    return max_connections - reserved


def check(max_connections: int, replicas: int, reserved: int, sizes: PoolSizes) -> None:
    """Raise `ConnectionBudgetError` when `replicas` replicas with `sizes` can open more than
    Postgres' `max_connections` (less its reserved slots) minus `reserved`."""
    needed = replicas * sizes.per_replica() + reserved
    if needed > max_connections:
        fit = plan(max_connections, replicas, reserved)
        fits = replicas * fit.per_replica() + reserved <= max_connections
        raise ConnectionBudgetError(
            f"The Postgres connections do not add up: {replicas} replica(s) x ({sizes.formula()} = "
            f"{sizes.per_replica()}) + POSTGRES_RESERVED_CONNECTIONS {reserved} = {needed}, but Postgres accepts "
            f"{max_connections} (max_connections less its reserved slots). "
            + (f"Sizes that fit: {fit.formula()}; " if fits else "Too many replicas for this Postgres: ")
            + "lower the pool sizes or REPLICAS, raise max_connections, or put a pooler (PgBouncer) in front."
        )


def plan(max_connections: int, replicas: int, reserved: int) -> PoolSizes:
    """Pool sizes for `replicas` replicas that fit in Postgres' `max_connections` (less its
    reserved slots) minus `reserved`, each at most its default: the package's pool a fifth of a
    replica's share, the rest split between Aegra's LangGraph pool and its SQLAlchemy pool (half
    of that one kept open, half overflow). Below `MINIMUM` the sizes are the minimum (and `check`
    fails)."""
    share = max(available(max_connections, reserved) // max(replicas, 1), 0)
    package = max(min(DEFAULTS.POSTGRES_POOL_SIZE, share // 5), MINIMUM.POSTGRES_POOL_SIZE)
    langgraph = max(min(DEFAULTS.LANGGRAPH_MAX_POOL_SIZE, (share - package) // 2), MINIMUM.LANGGRAPH_MAX_POOL_SIZE)
    sqlalchemy = min(
        DEFAULTS.SQLALCHEMY_POOL_SIZE + DEFAULTS.SQLALCHEMY_MAX_OVERFLOW,
        max(share - package - langgraph, MINIMUM.SQLALCHEMY_POOL_SIZE),
    )
    pool_size = min(DEFAULTS.SQLALCHEMY_POOL_SIZE, max((sqlalchemy + 1) // 2, MINIMUM.SQLALCHEMY_POOL_SIZE))
    return PoolSizes(pool_size, max(sqlalchemy - pool_size, 0), langgraph, package)


async def postgres_limit(conn: Any) -> int:
    """Connections Postgres accepts from ordinary roles: `max_connections` less
    `superuser_reserved_connections` and (Postgres 16+) `reserved_connections`."""
    cursor = await conn.execute(
        "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int"
        " - coalesce(current_setting('reserved_connections', true)::int, 0) AS limit"
    )
    row = await cursor.fetchone()
    return int(row["limit"] if isinstance(row, dict) else row[0])


def main(argv: list[str]) -> int:
    """`python -m store.budget plan`: `NAME=size` lines (scripts/prod exports each one the
    operator has not set), sized from REPLICAS and the limit of the Postgres at POSTGRES_URI; a
    line on stderr says what they add up to."""
    import asyncio

    import psycopg

    from settings import settings

    if argv != ["plan"]:
        print(__doc__, file=sys.stderr)
        return 2
    config = settings()
    uri = config.POSTGRES_URI.get_secret_value() if config.POSTGRES_URI else ""

    async def limit() -> int:
        async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
            return await postgres_limit(conn)

    max_connections = asyncio.run(limit())
    replicas, reserved = config.REPLICAS, config.POSTGRES_RESERVED_CONNECTIONS
    sizes = plan(max_connections, replicas, reserved)
    for name, size in asdict(sizes).items():
        print(f"{name}={size}")
    print(
        f"Postgres connections planned: {replicas} replica(s) x ({sizes.formula()} = {sizes.per_replica()}) + "
        f"{reserved} reserved = {replicas * sizes.per_replica() + reserved} of {max_connections}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
