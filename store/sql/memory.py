"""Memory full text (`memory_fulltext`), speakers (`memory_speakers`), BM25 and thread neighbours."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from langgraph.store.base import Item
from psycopg.types.json import Jsonb

from store.clean import strip_nul
from store.sql.base import (
    THREAD,
    WRITTEN,
    SQLBase,
    _any_of,
    _neighbour_pairs,
    bm25_params,
    bm25_sql,
    term_counts_sql,
)

# BM25 over one user's memories of one kind in memory_fulltext (GIN on (prefix, tsv), `bm25_sql`),
# the best rows joined back to the live store rows one by one (a nested loop in score order that
# stops at the limit: a common word matches thousands of a large namespace's rows, whose values
# are never read).
MEMORY_KEYWORD_SQL = f"""{bm25_sql("memory_fulltext", "prefix", "key")}
    SELECT s.key, s.value, s.created_at, s.updated_at, sc.score
    FROM (SELECT key, score FROM scored ORDER BY score DESC, key) AS sc
    CROSS JOIN LATERAL (
        SELECT s.key, s.value, s.created_at, s.updated_at FROM store s
        WHERE s.prefix = %(scope)s AND s.key = sc.key
          AND (s.expires_at IS NULL OR s.expires_at > NOW()) AND s.value @> %(match)s
    ) AS s
    ORDER BY sc.score DESC, sc.key
    LIMIT %(limit)s
"""
# Which words (each a tsquery of its lexemes) a live row of the namespace holds.
MEMORY_HOLDS_SQL = """
    SELECT w.word FROM unnest(%(words)s::text[], %(queries)s::text[]) AS w(word, query)
    WHERE EXISTS (
        SELECT 1 FROM memory_fulltext f JOIN store s ON s.prefix = f.prefix AND s.key = f.key
        WHERE f.prefix = %(prefix)s AND f.tsv @@ w.query::tsquery
          AND (s.expires_at IS NULL OR s.expires_at > NOW())
    )
"""
# A namespace's BM25 statistics: its rows, their mean length in characters, and how many of them
# hold each of the `terms`.
MEMORY_TERM_STATS_SQL = f"""
    SELECT count(*) AS n, greatest(avg(chars), 1) AS avgdl, {term_counts_sql("memory_fulltext", "prefix")} AS dfs
    FROM memory_fulltext WHERE prefix = %(scope)s
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

    async def memory_holds(self, prefix: str, words: Sequence[str], config: str) -> set[str]:
        """The `words` a live memory under namespace `prefix` holds a lexeme of (as `config` makes
        them; a stopword makes none)."""
        rows = await self._fetch(
            "SELECT w.word, tsvector_to_array(to_tsvector(%(config)s::regconfig, w.word)) AS lexemes "
            "FROM unnest(%(words)s::text[]) AS w(word)",
            {"config": config, "words": [strip_nul(word) for word in words]},
        )
        queries = {row["word"]: _any_of(row["lexemes"]) for row in rows if row["lexemes"]}
        if not queries:
            return set()
        found = await self._fetch(
            MEMORY_HOLDS_SQL, {"prefix": prefix, "words": list(queries), "queries": list(queries.values())}
        )
        return {row["word"] for row in found}

    async def keyword_statistics(self, prefix: str, lexemes: Sequence[str]) -> dict:
        """Namespace `prefix`'s BM25 statistics for `lexemes` (MEMORY_TERM_STATS_SQL): {"n",
        "avgdl", "dfs"} (rows, mean length, rows holding each lexeme, in order)."""
        return await self._term_statistics(MEMORY_TERM_STATS_SQL, prefix, lexemes)

    async def unindex_memories(self, prefix: str, keys: Sequence[str]) -> None:
        """Delete the full text of these memories under namespace `prefix`."""
        async with self.pool.connection() as conn:
            await conn.execute("DELETE FROM memory_fulltext WHERE prefix = %s AND key = ANY(%s)", (prefix, list(keys)))

    async def memory_keyword_search(
        self, prefix: str, query: str, config: str, *, limit: int, match: dict | None = None
    ) -> list[tuple[Item, float]]:
        """BM25 (item, score as a share of the query's ceiling, 0..1) of the live memories under
        namespace `prefix` for `query`, best first: document frequencies, `n` and the mean length
        over the prefix; `match` keeps only values containing it (jsonb `@>`: a role, a
        category). In a namespace of PRUNE_ROWS rows or more, a row holding only lexemes more
        than COMMON_SHARE of them hold is not found (store/sql/base.py `essential`)."""
        lexemes = await self._lexemes(config, query)
        if not lexemes:
            return []
        stats = await self.keyword_statistics(prefix, lexemes)
        rows = await self._bm25(MEMORY_KEYWORD_SQL, keyword_params(prefix, lexemes, stats, limit=limit, match=match))
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


def keyword_params(prefix: str, lexemes: Sequence[str], stats: dict, *, limit: int, match: dict | None = None) -> dict:
    """The parameters of MEMORY_KEYWORD_SQL but its `tsquery` (`bm25_params`; `match`: values
    containing it)."""
    return {**bm25_params(prefix, lexemes, stats, limit=limit), "match": Jsonb(match or {})}
