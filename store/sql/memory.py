"""Memory full text (`memory_fulltext`), speakers (`memory_speakers`), BM25 and thread neighbours."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from langgraph.store.base import Item
from psycopg.types.json import Jsonb

from store.clean import strip_nul
from store.sql.base import (
    BM25_B,
    BM25_CEILING_SQL,
    BM25_FREQUENCIES_SQL,
    BM25_K1,
    THREAD,
    WRITTEN,
    SQLBase,
    _any_of,
    _bm25_scores_sql,
    _neighbour_pairs,
    _tsquery_literal,
)

# BM25 over one user's memories of one kind in memory_fulltext (GIN on (prefix, tsv)): the same
# formula as KB_KEYWORD_SQL, statistics over the prefix, counted first (MEMORY_TERM_STATS_SQL).
# The candidates are the rows holding one of the `tsquery` lexemes, scored over all the query's
# `lexemes`: MemorySQL.memory_keyword_search leaves out of `tsquery` the common lexemes a row
# holding only them could never score into the results (MaxScore), and checks it. The best rows
# are joined back to the live store rows one by one (a nested loop in score order that stops at
# the limit: a common word matches thousands of a large namespace's rows, whose values are never
# read).
MEMORY_KEYWORD_SQL = f"""
    WITH candidates AS MATERIALIZED (
        SELECT key, tsv, chars FROM memory_fulltext
        WHERE prefix = %(prefix)s AND tsv @@ %(tsquery)s::tsquery
    ),
    corpus AS (SELECT %(n)s::bigint AS n, %(avgdl)s::numeric AS avgdl),
    document_frequency AS (
        SELECT lexeme, df FROM unnest(%(lexemes)s::text[], %(dfs)s::bigint[]) AS d(lexeme, df) WHERE df > 0
    ),
    {BM25_FREQUENCIES_SQL},{BM25_CEILING_SQL},
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
# hold each of the `terms` (tsquery literals of one lexeme each; counted on the GIN index).
MEMORY_TERM_STATS_SQL = """
    SELECT count(*) AS n, greatest(avg(chars), 1) AS avgdl, ARRAY(
        SELECT (SELECT count(*) FROM memory_fulltext f WHERE f.prefix = %(prefix)s AND f.tsv @@ q.term::tsquery)
        FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, i) ORDER BY q.i
    ) AS dfs
    FROM memory_fulltext WHERE prefix = %(prefix)s
"""
# In a namespace of at least PRUNE_ROWS rows, a lexeme more than COMMON_SHARE of them hold (idf
# below ln(10 / 9) = 0.11, a sixtieth of a lexeme one row in a thousand holds: "user" in every
# memory a writer phrases "User likes ...") scores only rows holding a rarer one of the query's:
# alone it ranks rows by their length, and reading every row that holds it makes a large user's
# recall slow (Elasticsearch's common terms). A speaker's name heading their lines in a chat log
# ("Maya: ...": half a two-person log's lines, more with the times they name each other) stays
# an ordinary lexeme. Then MaxScore: the lexemes
# held by at least PRUNE_ROWS rows, least weight first, whose weights together stay within
# PRUNE_SHARE of the query's are left out of the candidates, so long as the rows found otherwise
# fill the limit above what a row holding only those could score.
PRUNE_ROWS = 500
COMMON_SHARE = 0.9
PRUNE_SHARE = 0.25


def essential(lexemes: Sequence[str], dfs: Sequence[int], n: int, prune: bool = True) -> tuple[list[str], float]:
    """The lexemes a candidate row must hold one of ([]: no row is a candidate), and the most a
    row holding none of them but some of the query's other lexemes can score, as a share of the
    query's ceiling (0: nothing to check). BM25 weights a lexeme held by df of n rows
    idf * (k1 + 1) at most, idf = ln(1 + (n - df + 0.5) / (df + 0.5)). Never leaves out the rarest
    lexeme but a common one (COMMON_SHARE). `prune` False: only the common ones left out."""
    weight = {
        lexeme: math.log(1 + (n - df + 0.5) / (df + 0.5)) * (BM25_K1 + 1)
        for lexeme, df in zip(lexemes, dfs, strict=True)
    }
    ceiling = sum(weight.values())
    held = {lexeme: df for lexeme, df in zip(lexemes, dfs, strict=True) if df > 0}
    common = {lexeme for lexeme, df in held.items() if n >= PRUNE_ROWS and df > COMMON_SHARE * n}
    order = sorted(set(held) - common, key=lambda lexeme: (weight[lexeme], lexeme))
    left_out: set[str] = set()
    pruned = sum(weight[lexeme] for lexeme in common)
    for lexeme in order[:-1] if prune else ():
        if held[lexeme] < PRUNE_ROWS or pruned + weight[lexeme] > PRUNE_SHARE * ceiling:
            break
        left_out.add(lexeme)
        pruned += weight[lexeme]
    wanted = [lexeme for lexeme in held if lexeme not in common | left_out]
    return wanted, (pruned / ceiling if left_out and ceiling > 0 else 0.0)


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
        terms = [_tsquery_literal(lexeme) for lexeme in lexemes]
        return (await self._fetch(MEMORY_TERM_STATS_SQL, {"prefix": prefix, "terms": terms}))[0]

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
        than COMMON_SHARE of them hold is not found (`essential`)."""
        lexemes = await self._lexemes(config, query)
        if not lexemes:
            return []
        stats = await self.keyword_statistics(prefix, lexemes)
        wanted, bound = essential(lexemes, stats["dfs"], stats["n"])
        params = keyword_params(prefix, lexemes, stats, limit=limit, match=match)
        rows = await self._fetch(MEMORY_KEYWORD_SQL, {**params, "tsquery": _any_of(wanted)}) if wanted else []
        if bound > 0 and (len(rows) < limit or rows[-1]["score"] <= bound * (1 + 1e-9)):
            # a row holding only lexemes left out could rank among these: none left out but the common
            wanted, _ = essential(lexemes, stats["dfs"], stats["n"], prune=False)
            rows = await self._fetch(MEMORY_KEYWORD_SQL, {**params, "tsquery": _any_of(wanted)})
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
    """The parameters of MEMORY_KEYWORD_SQL but its `tsquery` (the candidates' lexemes, `_any_of`):
    the query's `lexemes`, the namespace's `stats` (`MemorySQL.keyword_statistics`), k1 and b."""
    return {
        "prefix": prefix,
        "lexemes": list(lexemes),
        "dfs": stats["dfs"],
        "n": stats["n"],
        "avgdl": stats["avgdl"],
        "k1": BM25_K1,
        "b": BM25_B,
        "limit": limit,
        "match": Jsonb(match or {}),
    }
