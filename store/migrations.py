"""Versioned migrations of the project's own Postgres tables.

`agent_schema_version` (component, version, applied_at) records, per component, the number of
migration steps applied. `migrate` applies the steps a database lacks, in order, in one
transaction under an advisory lock (two processes starting at once apply each step once), and
records the new version. A step is a list of SQL statements; steps are only ever appended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg_pool import AsyncConnectionPool

VERSION_TABLE_SQL = (
    "CREATE TABLE IF NOT EXISTS agent_schema_version ("
    " component text PRIMARY KEY, version integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
)
LOCK_ID = 2_026_112_527  # pg_advisory_xact_lock key of the project's migrations


async def schema_version(pool: AsyncConnectionPool[Any], component: str) -> int:
    """The number of `component`'s steps applied (0: none, or no version table yet)."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT to_regclass('agent_schema_version') IS NOT NULL")
        row = await cur.fetchone()
        if not row or not list(row.values() if isinstance(row, dict) else row)[0]:
            return 0
        cur = await conn.execute("SELECT version FROM agent_schema_version WHERE component = %s", (component,))
        found = await cur.fetchone()
    if not found:
        return 0
    return int(found["version"] if isinstance(found, dict) else found[0])


async def migrate(pool: AsyncConnectionPool[Any], component: str, steps: Sequence[Sequence[str]]) -> int:
    """Apply `component`'s missing `steps`; return the version the database is at afterwards."""
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_ID,))
        await conn.execute(VERSION_TABLE_SQL)
        cur = await conn.execute("SELECT version FROM agent_schema_version WHERE component = %s", (component,))
        row = await cur.fetchone()
        current = int((row["version"] if isinstance(row, dict) else row[0]) if row else 0)
        if current > len(steps):
            raise RuntimeError(
                f"The database's {component} tables are at version {current}, newer than this package "
                f"knows ({len(steps)}): run the newer package, or restore a matching backup."
            )
        for step in steps[current:]:
            for statement in step:
                await conn.execute(statement)  # type: ignore[arg-type]
        if len(steps) != current:
            await conn.execute(
                "INSERT INTO agent_schema_version (component, version) VALUES (%s, %s) "
                "ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version, applied_at = now()",
                (component, len(steps)),
            )
    return len(steps)
