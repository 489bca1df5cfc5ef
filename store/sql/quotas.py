"""Per-user quotas and budgets in fixed windows (`web_quota`; tools/quota.py)."""

from __future__ import annotations

from psycopg.rows import dict_row

from store.sql.base import SQLBase


class QuotaSQL(SQLBase):
    """The statements of quotas: one use counted, or an amount taken from a budget if it fits."""

    async def charge_quota(self, user_id: str, kind: str, window_seconds: float) -> tuple[int, float]:
        """Count one use of `kind` by `user_id` in the current fixed window of `window_seconds`
        (windows aligned on the epoch, shared by every server process on this database) in the
        project's table `web_quota`; returns (uses in this window, this
        one included; seconds until the window ends)."""
        rows = await self._fetch(
            "WITH w AS (SELECT to_timestamp(floor(extract(epoch FROM clock_timestamp()) / %(window)s) "
            " * %(window)s) AS start) "
            "INSERT INTO web_quota AS q (user_id, kind, window_start, used) "
            "SELECT %(user)s, %(kind)s, w.start, 1 FROM w "
            "ON CONFLICT (user_id, kind) DO UPDATE SET "
            " used = CASE WHEN q.window_start = excluded.window_start THEN q.used + 1 ELSE 1 END,"
            " window_start = excluded.window_start "
            "RETURNING used, extract(epoch FROM (window_start + make_interval(secs => %(window)s)"
            " - clock_timestamp()))::float8 AS retry_after",
            {"user": user_id, "kind": kind, "window": window_seconds},
        )
        return int(rows[0]["used"]), max(0.0, float(rows[0]["retry_after"]))

    async def charge_budget(
        self, user_id: str, kind: str, window_seconds: float, amount: int, limit: int
    ) -> tuple[bool, int, float]:
        """Take `amount` from `user_id`'s budget of `limit` for `kind` in the current fixed window
        (table `web_quota`, like `charge_quota`), only if it fits: an amount that does not fit is
        not counted. Returns (granted, used in this window after the call, seconds until the
        window ends). The row is locked for the check, so concurrent charges never overdraw."""
        async with (
            self.pool.connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=dict_row) as cur,
        ):
            params = {"user": user_id, "kind": kind, "window": window_seconds}
            await cur.execute(
                "INSERT INTO web_quota (user_id, kind, window_start, used) "
                "VALUES (%(user)s, %(kind)s, to_timestamp(0), 0) ON CONFLICT (user_id, kind) DO NOTHING",
                params,
            )
            await cur.execute(
                "SELECT used, window_start = w.start AS current, w.start,"
                " extract(epoch FROM (w.start + make_interval(secs => %(window)s) - clock_timestamp()))::float8"
                " AS retry_after "
                "FROM web_quota, (SELECT to_timestamp(floor(extract(epoch FROM clock_timestamp()) / %(window)s)"
                " * %(window)s) AS start) AS w "
                "WHERE user_id = %(user)s AND kind = %(kind)s FOR UPDATE OF web_quota",
                params,
            )
            row = await cur.fetchone()
            assert row is not None
            used = int(row["used"]) if row["current"] else 0
            retry_after = max(0.0, float(row["retry_after"]))
            if used + amount > limit:
                return False, used, retry_after
            await cur.execute(
                "UPDATE web_quota SET used = %(used)s, window_start = %(start)s WHERE user_id = %(user)s AND kind = %(kind)s",
                {**params, "used": used + amount, "start": row["start"]},
            )
            return True, used + amount, retry_after
