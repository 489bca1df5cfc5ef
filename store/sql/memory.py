"""Memory full text (`memory_fulltext`), speakers (`memory_speakers`), BM25 and thread neighbours."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from langgraph.store.base import Item
from psycopg.types.json import Jsonb

from store.clean import strip_nul
from store.sql.base import BM25_TERMS_SQL, THREAD, WRITTEN, SQLBase, _bm25_scores_sql, _neighbour_pairs

# BM25 over one user's memories of one kind in memory_fulltext (GIN on (prefix, tsv)): the same
# formula as KB_KEYWORD_SQL, statistics over the prefix, the best rows joined back to the live
# store rows one by one (a nested loop in score order that stops at the limit: a common word
# matches thousands of a large namespace's rows, whose values are never read).
MEMORY_KEYWORD_SQL = f"""
    WITH candidates AS MATERIALIZED (
        SELECT key, tsv, chars FROM memory_fulltext
        WHERE prefix = %(prefix)s AND tsv @@ %(tsquery)s::tsquery
    ),
    corpus AS MATERIALIZED (
        SELECT count(*) AS n, greatest(avg(chars), 1) AS avgdl FROM memory_fulltext
        WHERE prefix = %(prefix)s
    ),
    {BM25_TERMS_SQL},
    scored AS ({_bm25_scores_sql("co.avgdl")})
    SELECT s.key, s.value, s.created_at, s.updated_at, sc.score
    FROM (SELECT key, score FROM scored ORDER BY score DESC, key) AS sc
    CROSS JOIN LATERAL (
        SELECT s.key, s.value, s.created_at, s.updated_at FROM store s
        WHERE s.prefix = %(prefix)s AND s.key = sc.key
          AND (s.expires_at IS NULL OR s.expires_at > NOW()) AND s.value @> %(match)s
    ) AS s
    ORDER BY sc.score DESC, sc.key
    LIMIT %(limit)s
"""


class MemorySQL(SQLBase):
    """The statements of memories (store/memory/ through store/backend.py)."""

    async def index_memories(
        self, prefix: str, rows: Iterable[tuple[str, str]], config: str, speaker: str | None = None
    ) -> None:
        """Write the full text of (key, text) memories under namespace `prefix` (upsert), and
        `speaker`, who said them, into the namespace's speakers."""
        pairs = [(key, strip_nul(text)) for key, text in rows]
        if not pairs:
            return
        async with self.pool.connection() as conn:
            if speaker:
                await conn.execute(
                    "INSERT INTO memory_speakers (prefix, speaker) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    (prefix, strip_nul(speaker)),
                )
            await conn.execute(
                "INSERT INTO memory_fulltext (prefix, key, tsv, chars) "
                "SELECT %(prefix)s, m.key, to_tsvector(%(config)s::regconfig, m.text), length(m.text) "
                "FROM unnest(%(keys)s::text[], %(texts)s::text[]) AS m(key, text) "
                "ON CONFLICT (prefix, key) DO UPDATE SET tsv = excluded.tsv, chars = excluded.chars",
                {"prefix": prefix, "config": config, "keys": [k for k, _ in pairs], "texts": [t for _, t in pairs]},
            )

    async def memory_neighbours(self, prefix: str, keys: Sequence[str], window: int) -> list[tuple[str, Item]]:
        """(hit key, neighbour) pairs: for each of `keys` in namespace `prefix` that has a
        `thread_id`, the `window` live items of the same thread written just before it and the
        `window` just after it (by the value's `created_at`, UTC ISO stamps of one format)."""
        rows = await self._fetch(
            f"""
            WITH hit AS (
                SELECT key, {THREAD} AS thread, {WRITTEN} AS at FROM store s
                WHERE prefix = %(prefix)s AND key = ANY(%(keys)s) AND value ? 'thread_id'
            )
            SELECT hit.key AS hit, n.key, n.value, n.created_at, n.updated_at FROM hit
            CROSS JOIN LATERAL (
                (SELECT s.key, s.value, s.created_at, s.updated_at FROM store s
                 WHERE s.prefix = %(prefix)s AND {THREAD} = hit.thread
                   AND {WRITTEN} < hit.at AND (s.expires_at IS NULL OR s.expires_at > NOW())
                 ORDER BY {WRITTEN} DESC LIMIT %(window)s)
                UNION ALL
                (SELECT s.key, s.value, s.created_at, s.updated_at FROM store s
                 WHERE s.prefix = %(prefix)s AND {THREAD} = hit.thread
                   AND {WRITTEN} > hit.at AND (s.expires_at IS NULL OR s.expires_at > NOW())
                 ORDER BY {WRITTEN} LIMIT %(window)s)
            ) AS n
            """,
            {"prefix": prefix, "keys": list(keys), "window": window},
        )
        return _neighbour_pairs(prefix, rows)

    async def memory_thread_last(self, prefix: str, thread: str, before: str) -> Item | None:
        """The live item of namespace `prefix` in thread `thread` written last before `before`
        (the value's `created_at`, UTC ISO stamps of one format), or None."""
        rows = await self._fetch(
            f"""
            SELECT %(prefix)s AS hit, s.key, s.value, s.created_at, s.updated_at FROM store s
            WHERE s.prefix = %(prefix)s AND {THREAD} = %(thread)s
              AND {WRITTEN} < %(before)s AND (s.expires_at IS NULL OR s.expires_at > NOW())
            ORDER BY {WRITTEN} DESC LIMIT 1
            """,
            {"prefix": prefix, "thread": thread, "before": before},
        )
        return next((item for _, item in _neighbour_pairs(prefix, rows)), None)

    async def memory_speakers(self, prefix: str) -> list[str]:
        """Who said the memories of namespace `prefix` (speakers given when they were written;
        a speaker stays listed after single deletions, until `delete_under`)."""
        rows = await self._fetch("SELECT speaker FROM memory_speakers WHERE prefix = %s", (prefix,))
        return [row["speaker"] for row in rows]

    async def unindex_memories(self, prefix: str, keys: Sequence[str]) -> None:
        """Delete the full text of these memories under namespace `prefix`."""
        async with self.pool.connection() as conn:
            await conn.execute("DELETE FROM memory_fulltext WHERE prefix = %s AND key = ANY(%s)", (prefix, list(keys)))

    async def memory_keyword_search(
        self, prefix: str, query: str, config: str, *, limit: int, match: dict | None = None
    ) -> list[tuple[Item, float]]:
        """BM25 (item, score as a share of the query's ceiling, 0..1) of the live memories under
        namespace `prefix` for `query`, best first: document frequencies over the prefix's
        matching rows, `n` and the mean length over the prefix; `match` keeps only values
        containing it (jsonb `@>`: a role, a category)."""
        rows = await self._bm25(MEMORY_KEYWORD_SQL, config, query, prefix=prefix, limit=limit, match=Jsonb(match or {}))
        return [
            (
                Item(
                    value=row["value"],
                    key=row["key"],
                    namespace=tuple(prefix.split(".")),
                    created_at=row["created_at"],
                    updated_at=row["updated_at"],
                ),
                float(row["score"]),
            )
            for row in rows
        ]
