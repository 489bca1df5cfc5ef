"""The checkpoints a run wrote, deleted for the server's rollback (store/postgres.py `PostgresSaver`)."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg.rows import dict_row

from store.sql.base import SQLBase


class CheckpointSQL(SQLBase):
    """The statements of the checkpointer's tables."""

    async def delete_checkpoints_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints the runs wrote, their writes and the blobs no checkpoint of those
        threads references any more (the server's rollback), in one transaction."""
        if not run_ids:
            return
        async with (
            self.pool.connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=dict_row) as cur,
        ):
            await cur.execute(
                "DELETE FROM checkpoints WHERE metadata->>'run_id' = ANY(%s) "
                "RETURNING thread_id, checkpoint_ns, checkpoint_id",
                (list(run_ids),),
            )
            deleted = await cur.fetchall()
            if not deleted:
                return
            await cur.execute(
                "DELETE FROM checkpoint_writes w USING unnest(%s::text[], %s::text[], %s::text[]) "
                "AS d(thread_id, checkpoint_ns, checkpoint_id) "
                "WHERE w.thread_id = d.thread_id AND w.checkpoint_ns = d.checkpoint_ns "
                "AND w.checkpoint_id = d.checkpoint_id",
                (
                    [r["thread_id"] for r in deleted],
                    [r["checkpoint_ns"] for r in deleted],
                    [r["checkpoint_id"] for r in deleted],
                ),
            )
            await cur.execute(
                "DELETE FROM checkpoint_blobs b WHERE b.thread_id = ANY(%s) AND NOT EXISTS ("
                " SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id"
                " AND c.checkpoint_ns = b.checkpoint_ns"
                " AND c.checkpoint->'channel_versions'->>b.channel = b.version)",
                (sorted({row["thread_id"] for row in deleted}),),
            )
