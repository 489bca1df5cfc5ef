"""Knowledge-base full text (`kb_fulltext`): indexing, BM25, document frequencies, chunk neighbours."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from langgraph.store.base import Item

from store.clean import strip_nul
from store.sql.base import (
    DOC_DATE,
    DOC_POSITION,
    DOC_SOURCE,
    KB_PREFIX,
    SQLBase,
    _neighbour_pairs,
    bm25_params,
    bm25_sql,
    term_counts_sql,
)

# BM25 over one knowledge base's chunks in kb_fulltext (GIN on (kb, tsv), `bm25_sql`): the
# statistics are the registry's chunk count and mean length, and the chunks holding each lexeme
# (KB_TERM_COUNTS_SQL), counted first.
KB_KEYWORD_SQL = f"""{bm25_sql("kb_fulltext", "kb", "chunk_key")}
    SELECT key, score FROM scored ORDER BY score DESC, key LIMIT %(limit)s
"""
KB_TERM_COUNTS_SQL = f"SELECT {term_counts_sql('kb_fulltext', 'kb')} AS dfs"


class KnowledgeSQL(SQLBase):
    """The statements of knowledge bases' full text (store/knowledge/ through store/backend.py)."""

    async def sync_kb_fulltext(self, config: str) -> None:
        """Re-derive the `kb_fulltext` rows written with another text search configuration than
        `config` (KB_TEXT_SEARCH_CONFIG changed since)."""
        await self._fetch(
            "UPDATE kb_fulltext f SET config = %(config)s::regconfig, "
            " tsv = to_tsvector(%(config)s::regconfig, coalesce(s.value->>'content', '')) "
            "FROM store s WHERE f.config <> %(config)s::regconfig "
            " AND s.prefix = %(root)s || f.kb AND s.key = f.chunk_key",
            {"config": config, "root": KB_PREFIX},
        )

    async def index_kb_chunks(self, kb: str, chunks: Iterable[tuple[str, str]], config: str) -> None:
        """Write the full text of (chunk key, content) pairs of knowledge base `kb` (upsert)."""
        pairs = [(key, strip_nul(content)) for key, content in chunks]
        if not pairs:
            return
        keys, contents = [key for key, _ in pairs], [content for _, content in pairs]
        async with self.pool.connection() as conn:
            await conn.execute(
                "INSERT INTO kb_fulltext (kb, chunk_key, config, tsv, chars) "
                "SELECT %(kb)s, c.key, %(config)s::regconfig, "
                " to_tsvector(%(config)s::regconfig, c.content), length(c.content) "
                "FROM unnest(%(keys)s::text[], %(contents)s::text[]) AS c(key, content) "
                "ON CONFLICT (kb, chunk_key) DO UPDATE "
                "SET config = excluded.config, tsv = excluded.tsv, chars = excluded.chars",
                {"kb": kb, "config": config, "keys": keys, "contents": contents},
            )

    async def unindex_kb_chunks(self, kb: str, keys: Sequence[str] | None = None) -> None:
        """Delete the full text of these chunks of `kb` (None: of the whole knowledge base)."""
        async with self.pool.connection() as conn:
            if keys is None:
                await conn.execute("DELETE FROM kb_fulltext WHERE kb = %s", (kb,))
            elif keys:
                await conn.execute("DELETE FROM kb_fulltext WHERE kb = %s AND chunk_key = ANY(%s)", (kb, list(keys)))

    async def kb_document_frequencies(self, kb: str, words: Sequence[str], config: str) -> dict[str, int]:
        """How many chunks of `kb` hold each word (as `config` stems it; stop words: 0)."""
        rows = await self._fetch(
            "SELECT w.word, (SELECT count(*) FROM kb_fulltext"
            "  WHERE kb = %(kb)s AND tsv @@ plainto_tsquery(%(config)s::regconfig, w.word)) AS df "
            "FROM unnest(%(words)s::text[]) AS w(word) "
            "WHERE numnode(plainto_tsquery(%(config)s::regconfig, w.word)) > 0",
            {"kb": kb, "config": config, "words": [strip_nul(word) for word in words]},
        )
        return {row["word"]: int(row["df"]) for row in rows}

    async def kb_keyword_search(
        self, kb: str, query: str, config: str, *, n: int, avgdl: float, limit: int
    ) -> list[tuple[str, float]]:
        """BM25 (chunk key, score as a share of the query's ceiling, 0..1) of `kb`'s chunks for
        `query`, best first: query lexemes from `to_tsvector(config, query)`, term frequencies
        from the stored tsvectors, lengths in characters; `n` and `avgdl` (the knowledge base's
        chunk count and mean chunk length) from the registry, the chunks holding each lexeme
        counted first. In a knowledge base of PRUNE_ROWS chunks or more, a chunk holding only
        lexemes more than COMMON_SHARE of them hold is not found (store/sql/base.py `essential`)."""
        lexemes = await self._lexemes(config, query)
        if not lexemes:
            return []
        dfs = (await self._term_statistics(KB_TERM_COUNTS_SQL, kb, lexemes))["dfs"]
        # a registry behind the chunks (written after them) counts at least the rows seen
        stats = {"n": max(n, *dfs), "avgdl": avgdl, "dfs": dfs}
        rows = await self._bm25(KB_KEYWORD_SQL, bm25_params(kb, lexemes, stats, limit=limit))
        return [(row["key"], float(row["score"])) for row in rows]

    async def kb_neighbours(self, prefix: str, keys: Sequence[str], window: int) -> list[tuple[str, Item]]:
        """(hit key, neighbour) pairs: for each of `keys` (chunks in namespace `prefix`), the
        `window` chunks just before it and the `window` just after it in the order (document
        date, source, position), undated chunks only within their own document."""
        order = f"{DOC_DATE}, {DOC_SOURCE}, {DOC_POSITION}"
        backwards = f"{DOC_DATE} DESC, {DOC_SOURCE} DESC, {DOC_POSITION} DESC"
        rows = await self._fetch(
            f"""
            WITH hit AS (
                SELECT key, {DOC_DATE} AS at, {DOC_SOURCE} AS source, {DOC_POSITION} AS position,
                       value->>'source' AS document
                FROM store WHERE prefix = %(prefix)s AND key = ANY(%(keys)s)
            )
            SELECT hit.key AS hit, n.key, n.value, n.created_at, n.updated_at FROM hit
            CROSS JOIN LATERAL (
                (SELECT s.key, s.value, s.created_at, s.updated_at FROM store s
                 WHERE s.prefix = %(prefix)s AND ({order}) < (hit.at, hit.source, hit.position)
                   AND (hit.at <> '' OR s.value->>'source' = hit.document)
                   AND (s.expires_at IS NULL OR s.expires_at > NOW())
                 ORDER BY {backwards} LIMIT %(window)s)
                UNION ALL
                (SELECT s.key, s.value, s.created_at, s.updated_at FROM store s
                 WHERE s.prefix = %(prefix)s AND ({order}) > (hit.at, hit.source, hit.position)
                   AND (hit.at <> '' OR s.value->>'source' = hit.document)
                   AND (s.expires_at IS NULL OR s.expires_at > NOW())
                 ORDER BY {order} LIMIT %(window)s)
            ) AS n
            """,
            {"prefix": prefix, "keys": list(keys), "window": window},
        )
        return _neighbour_pairs(prefix, rows)
