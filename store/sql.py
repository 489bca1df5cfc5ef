"""Every SQL statement the project runs against langgraph-checkpoint-postgres's tables, in one place.

The library's public APIs (`BaseStore`, the saver) cannot express a few things the project needs:
memory listings filtered by substring and timestamp range, deleting all of a user's namespaces at
once, deleting the checkpoints a run wrote (rollback), full-text keyword search and the
benchmark's bulk load. Those statements live here, on a connection pool the project opened itself
(`store.postgres.open_pool`), never on the library's private members. `check_tables` runs when
the factories open the store and the checkpointer: it fails with the installed library version
when a table or column these statements rely on is gone (tests/integration/test_store_sql.py
fails the same way when an upgrade changes the schema).

The project's own tables are created and upgraded by the versioned `migrations` (run when the
store opens, store/migrations.py), never lazily. Memory full text lives in `memory_fulltext`
(prefix, key, tsvector), written next to each embedded memory (through store/backend.py) and
deleted with it; `memory_speakers` (prefix, speaker)
lists who said the memories of each namespace (hybrid search reads it before embedding a query).

Knowledge-base full text lives in a table of our own, `kb_fulltext`, not in an index on the
library's `store` table (see docs/knowledge.md): it is written on ingest and delete next to the
store's chunk rows.

`agent_store_meta` (key, value), another table of our own, records facts about the store itself:
the embeddings model its vectors were built with (`record_embeddings_model`, checked when the
store opens).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from langgraph.store.base import Item
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from store.bm25 import BM25_B, BM25_K1
from store.clean import strip_nul

LIBRARY = "langgraph-checkpoint-postgres"

# The library's tables and the columns the statements below read or write.
STORE_COLUMNS = {
    "store": {"prefix", "key", "value", "created_at", "updated_at", "expires_at", "ttl_minutes"},
    "store_vectors": {"prefix", "key", "field_name", "embedding"},
}
CHECKPOINT_COLUMNS = {
    "checkpoints": {"thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint", "metadata"},
    "checkpoint_writes": {"thread_id", "checkpoint_ns", "checkpoint_id"},
    "checkpoint_blobs": {"thread_id", "checkpoint_ns", "channel", "version"},
}

KB_PREFIX = "kb."  # chunk rows of knowledge base <name> have prefix "kb.<name>"
MIGRATION_COMPONENT = "store"  # agent_schema_version's row of `migrations`
MEMORY_TEXT_SEARCH_CONFIG = "english"  # Postgres text search configuration of memory full text


def migrations(text_search_config: str) -> list[list[str]]:
    """The steps (store/migrations.py, component `MIGRATION_COMPONENT`) of the project's own tables
    next to the library's: `agent_store_meta`, `web_quota`, `kb_fulltext` (knowledge-base full
    text, in `text_search_config`), `memory_fulltext` and `memory_speakers`. Step 1 is the schema
    earlier versions created lazily on first use; it also upgrades a database they made: what
    exists is kept, what is missing is created and filled from the rows already stored (the
    chunks' full text, the memories' speakers). Run after the library's `setup()`."""
    config = f"'{_identifier(text_search_config)}'::regconfig"
    return [
        [
            "CREATE TABLE IF NOT EXISTS agent_store_meta (key text PRIMARY KEY, value text NOT NULL)",
            "CREATE TABLE IF NOT EXISTS web_quota (user_id text NOT NULL, kind text NOT NULL,"
            " window_start timestamptz NOT NULL, used integer NOT NULL, PRIMARY KEY (user_id, kind))",
            "CREATE TABLE IF NOT EXISTS kb_fulltext (kb text NOT NULL, chunk_key text NOT NULL,"
            " config regconfig NOT NULL, tsv tsvector NOT NULL, chars integer NOT NULL, PRIMARY KEY (kb, chunk_key))",
            # fastupdate off: new rows go straight into the index, not a pending list the planner
            # avoids until a vacuum flushes it
            "CREATE INDEX IF NOT EXISTS kb_fulltext_tsv ON kb_fulltext USING gin (tsv) WITH (fastupdate = off)",
            "INSERT INTO kb_fulltext (kb, chunk_key, config, tsv, chars) "
            f"SELECT substr(s.prefix, {len(KB_PREFIX) + 1}), s.key, {config}, "
            f" to_tsvector({config}, coalesce(s.value->>'content', '')), length(coalesce(s.value->>'content', '')) "
            f"FROM store s WHERE s.prefix LIKE '{KB_PREFIX}%' AND NOT EXISTS (SELECT 1 FROM kb_fulltext f"
            f" WHERE f.kb = substr(s.prefix, {len(KB_PREFIX) + 1}) AND f.chunk_key = s.key)",
            # the GIN index the first versions put on the library's table
            f"DROP INDEX IF EXISTS store_kb_fts_{_identifier(text_search_config)}",
            "CREATE TABLE IF NOT EXISTS memory_fulltext (prefix text NOT NULL, key text NOT NULL,"
            " tsv tsvector NOT NULL, chars integer NOT NULL, PRIMARY KEY (prefix, key))",
            # a GIN index on (prefix, tsv) needs btree_gin, installed in `public` like pgvector (so
            # dropping one schema never drops it); without it (a managed server refusing the
            # extension) the index covers `tsv` alone
            """DO $$ BEGIN
                IF to_regclass('memory_fulltext_tsv') IS NULL THEN
                    BEGIN
                        CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public;
                        CREATE INDEX memory_fulltext_tsv ON memory_fulltext USING gin (prefix, tsv) WITH (fastupdate = off);
                    EXCEPTION WHEN OTHERS THEN
                        CREATE INDEX memory_fulltext_tsv ON memory_fulltext USING gin (tsv) WITH (fastupdate = off);
                    END;
                END IF;
            END $$""",
            """DO $$ BEGIN
                IF to_regclass('memory_speakers') IS NULL THEN
                    CREATE TABLE memory_speakers (prefix text NOT NULL, speaker text NOT NULL,
                        PRIMARY KEY (prefix, speaker));
                    INSERT INTO memory_speakers (prefix, speaker)
                    SELECT DISTINCT prefix, value->>'speaker' FROM store
                    WHERE prefix LIKE 'memories.%' AND coalesce(value->>'speaker', '') <> '';
                END IF;
            END $$""",
        ],
        # Memories written to a store before these tables stood beside it (a server's own store,
        # such as Aegra's, before the package's tables were kept there): their full text and
        # speakers, from the stored rows.
        [
            "INSERT INTO memory_fulltext (prefix, key, tsv, chars) "
            f"SELECT s.prefix, s.key, to_tsvector('{MEMORY_TEXT_SEARCH_CONFIG}'::regconfig, s.value->>'text'),"
            " length(s.value->>'text') FROM store s "
            "WHERE s.prefix LIKE 'memories.%' AND jsonb_typeof(s.value->'text') = 'string' "
            "ON CONFLICT (prefix, key) DO NOTHING",
            "INSERT INTO memory_speakers (prefix, speaker) "
            "SELECT DISTINCT prefix, value->>'speaker' FROM store "
            "WHERE prefix LIKE 'memories.%' AND coalesce(value->>'speaker', '') <> '' ON CONFLICT DO NOTHING",
        ],
    ]


# Where the `store` table a connection sees is: its schema, and what tells one database apart
# from another (a server's own store and the package's pool beside it must see the same table).
STORE_LOCATION_SQL = (
    "SELECT n.nspname AS schema, current_database() AS db, pg_postmaster_start_time() AS started, "
    "c.oid::bigint AS table_oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.oid = to_regclass('store')"
)


async def store_location(conn: Any) -> dict | None:
    """Where the `store` table this connection sees is (None: it sees none)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(STORE_LOCATION_SQL)
        return await cur.fetchone()


async def server_store_location(server_store: Any) -> dict | None:
    """`store_location` over a LangGraph `AsyncPostgresStore`'s own connection (a server's store,
    such as Aegra's; its `conn` is a pool or one connection, used under the store's `lock`)."""
    conn = server_store.conn
    if isinstance(conn, AsyncConnectionPool):
        async with conn.connection() as pooled:
            return await store_location(pooled)
    async with server_store.lock:
        return await store_location(conn)


def server_store_conninfo(server_store: Any) -> str:
    """The connection string of a LangGraph `AsyncPostgresStore`'s own connection."""
    conn = server_store.conn
    return str(conn.conninfo) if isinstance(conn, AsyncConnectionPool) else str(conn.info.dsn)


class LibrarySchemaError(RuntimeError):
    """langgraph-checkpoint-postgres's tables are not what store/sql.py was written for."""


def library_version() -> str:
    """The installed langgraph-checkpoint-postgres version."""
    try:
        return version(LIBRARY)
    except PackageNotFoundError:
        return "not installed"


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _tsquery_literal(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


# The parts of BM25 both keyword searches share: the candidates' term frequencies of the query's
# lexemes, their document frequencies, and the query's ceiling, the sum over its lexemes of
# idf * (k1 + 1) (a lexeme no candidate holds counts with df 0). Scores are divided by the
# ceiling: the share of the query's weight a row matches, comparable across queries (a rare code
# matched scores high; two common words of a paraphrase, low). Each search defines `candidates`
# (key, tsv, chars) and a one-row relation `corpus` (n: how many rows the statistics cover).
BM25_TERMS_SQL = """
    frequencies AS (
        SELECT c.key, c.chars, t.lexeme, coalesce(cardinality(t.positions), 1) AS tf
        FROM candidates c CROSS JOIN LATERAL unnest(c.tsv) AS t
        WHERE t.lexeme = ANY(%(lexemes)s::text[])
    ),
    document_frequency AS (
        SELECT lexeme, count(*) AS df FROM frequencies GROUP BY lexeme
    ),
    ceiling AS (
        SELECT sum(ln(1 + (co.n - coalesce(d.df, 0) + 0.5) / (coalesce(d.df, 0) + 0.5)) * (%(k1)s + 1)) AS total
        FROM unnest(%(lexemes)s::text[]) AS q(lexeme) LEFT JOIN document_frequency d USING (lexeme) CROSS JOIN corpus co
    )
"""


def _bm25_scores_sql(avgdl: str) -> str:
    """SELECT of (key, score) per candidate over BM25_TERMS_SQL, with the mean length `avgdl`."""
    return f"""
    SELECT f.key, sum(
        ln(1 + (co.n - d.df + 0.5) / (d.df + 0.5))
        * f.tf * (%(k1)s + 1)
        / (f.tf + %(k1)s * (1 - %(b)s + %(b)s * f.chars / {avgdl}))
    ) / (SELECT total FROM ceiling) AS score
    FROM frequencies f JOIN document_frequency d USING (lexeme) CROSS JOIN corpus co
    GROUP BY f.key
"""


# BM25 over kb_fulltext. The `@@` predicate is served by the GIN index on `tsv`; document
# frequencies are exact because every chunk holding a query lexeme is a candidate; N and the
# mean length come from the registry.
KB_KEYWORD_SQL = f"""
    WITH candidates AS MATERIALIZED (
        SELECT chunk_key AS key, tsv, chars FROM kb_fulltext
        WHERE kb = %(kb)s AND tsv @@ %(tsquery)s::tsquery
    ),
    corpus AS MATERIALIZED (
        SELECT greatest(%(n)s, (SELECT count(*) FROM candidates)) AS n
    ),
    {BM25_TERMS_SQL}
    {_bm25_scores_sql("%(avgdl)s")}
    ORDER BY score DESC, f.key
    LIMIT %(limit)s
"""


# BM25 over one user's memories of one kind in memory_fulltext (GIN on (prefix, tsv)): the same
# formula as KB_KEYWORD_SQL, statistics over the prefix, rows joined back to the live store rows.
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
    FROM scored sc JOIN store s ON s.prefix = %(prefix)s AND s.key = sc.key
    WHERE (s.expires_at IS NULL OR s.expires_at > NOW()) AND s.value @> %(match)s
    ORDER BY sc.score DESC, s.key
    LIMIT %(limit)s
"""


class StoreSQL:
    """The project's SQL on the library's tables and on `kb_fulltext`, over a pool we opened."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:  # any row type: cursors set dict_row
        self.pool = pool

    async def _fetch(self, sql: str, params: Any = None) -> list[dict]:
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql, params)
            return await cur.fetchall() if cur.description else []

    # --- start-up check ---------------------------------------------------------------------

    async def check_tables(self, expected: dict[str, set[str]]) -> None:
        """Raise LibrarySchemaError naming the library version when an expected table or column
        is missing from the current schema (run after the library's `setup()`)."""
        rows = await self._fetch(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ANY(%s)",
            (list(expected),),
        )
        present: dict[str, set[str]] = {}
        for row in rows:
            present.setdefault(row["table_name"], set()).add(row["column_name"])
        problems = [
            f"table {table} is missing"
            if table not in present
            else f"table {table} lacks column(s) {', '.join(sorted(columns - present[table]))}"
            for table, columns in expected.items()
            if columns - present.get(table, set())
        ]
        if problems:
            raise LibrarySchemaError(
                f"{LIBRARY} {library_version()} set up tables store/sql.py does not know: "
                f"{'; '.join(problems)}. Install the version pinned in constraints.txt, or update "
                "store/sql.py (and its schema test) for the new tables."
            )

    async def vector_dims(self) -> int | None:
        """The dimension of the store's existing vector column (None: no table yet, -1: untyped)."""
        rows = await self._fetch(
            "SELECT a.atttypmod AS dims FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass('store_vectors') AND a.attname = 'embedding'"
        )
        return rows[0]["dims"] if rows else None

    async def record_embeddings_model(self, model: str) -> tuple[str, bool]:
        """The embeddings model the store's vectors were built with, from our own table
        `agent_store_meta` (key, value); when none is recorded yet, `model` is recorded. Returns
        (recorded model, whether this call recorded it); of concurrent first opens, one records."""
        inserted = await self._fetch(
            "INSERT INTO agent_store_meta (key, value) VALUES ('embeddings_model', %s) "
            "ON CONFLICT (key) DO NOTHING RETURNING value",
            (model,),
        )
        if inserted:
            return model, True
        rows = await self._fetch("SELECT value FROM agent_store_meta WHERE key = 'embeddings_model'")
        return str(rows[0]["value"]) if rows else model, False

    # --- items ----------------------------------------------------------------------------------

    async def insert_if_absent(self, namespace: Sequence[str], key: str, value: dict) -> bool:
        """Put an item (not indexed for search) only when `namespace`/`key` holds no live item, in
        one statement: of concurrent calls for one key exactly one returns True (the store's `put`
        always overwrites). An expired item counts as absent."""
        rows = await self._fetch(
            "INSERT INTO store (prefix, key, value, created_at, updated_at) "
            "VALUES (%s, %s, %s, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP) "
            "ON CONFLICT (prefix, key) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at,"
            " updated_at = EXCLUDED.updated_at, expires_at = NULL, ttl_minutes = NULL "
            "WHERE store.expires_at IS NOT NULL AND store.expires_at <= NOW() "
            "RETURNING key",
            (".".join(namespace), key, Jsonb(strip_nul(value))),
        )
        return bool(rows)

    # --- memories -------------------------------------------------------------------------------

    async def list_items(
        self,
        prefixes: Sequence[str],
        limit: int,
        keywords: Sequence[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        order: str = "created_at",
    ) -> list[Item]:
        """Live items under the exact `prefixes` whose text or keywords contain ANY keyword
        (case-insensitive) and whose value's `created_at` is in [start, end); ordered by matched
        keyword count, then the value's `order` timestamp newest first, then key."""
        haystack = "coalesce(value->>'text', '') || ' ' || coalesce(value->>'keywords', '')"
        where = ["prefix = ANY(%(prefixes)s)", "(expires_at IS NULL OR expires_at > NOW())"]
        params: dict[str, Any] = {"prefixes": list(prefixes), "limit": limit}
        ranking = ""
        if keywords:
            params["patterns"] = [f"%{_escape_like(k)}%" for k in keywords]
            where.append(f"{haystack} ILIKE ANY(%(patterns)s)")
            ranking = (
                f"(SELECT count(*) FROM unnest(%(patterns)s::text[]) AS p(pattern) "
                f"WHERE {haystack} ILIKE p.pattern) DESC, "
            )
        if start is not None:
            where.append("(value->>'created_at')::timestamptz >= %(start)s")
            params["start"] = start
        if end is not None:
            where.append("(value->>'created_at')::timestamptz < %(end)s")
            params["end"] = end
        order_field = {"created_at": "created_at", "updated_at": "updated_at"}[order]
        rows = await self._fetch(
            "SELECT prefix, key, value, created_at, updated_at FROM store WHERE "
            + " AND ".join(where)
            + f" ORDER BY {ranking}(value->>'{order_field}')::timestamptz DESC NULLS LAST, key"
            + " LIMIT %(limit)s",
            params,
        )
        return [
            Item(
                value=row["value"],
                key=row["key"],
                namespace=tuple(row["prefix"].split(".")),
                created_at=row["created_at"],
                updated_at=row["updated_at"],
            )
            for row in rows
        ]

    async def delete_under(self, prefix: Sequence[str]) -> int:
        """Delete every item in the namespace `prefix` and below it (vectors cascade); returns how many."""
        joined = ".".join(prefix)
        async with self.pool.connection() as conn, conn.cursor() as cur:
            await cur.execute(
                "DELETE FROM store WHERE prefix = %s OR prefix LIKE %s",
                (joined, f"{_escape_like(joined)}.%"),
            )
            deleted = cur.rowcount
            for table in ("memory_fulltext", "memory_speakers"):
                await cur.execute(
                    f"DELETE FROM {table} WHERE prefix = %s OR prefix LIKE %s",
                    (joined, f"{_escape_like(joined)}.%"),
                )
            return deleted

    # --- knowledge-base full text ---------------------------------------------------------------

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

    async def _lexemes(self, config: str, query: str) -> list[str]:
        """The lexemes Postgres's text search configuration `config` makes of `query`."""
        rows = await self._fetch(
            "SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s)) AS lexemes", (config, strip_nul(query))
        )
        return list(rows[0]["lexemes"])

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

    async def _bm25(self, sql: str, config: str, query: str, **params: Any) -> list[dict]:
        """Rows of a BM25 statement (KB_KEYWORD_SQL, MEMORY_KEYWORD_SQL) for `query`: its lexemes
        as `config` makes them (none: no rows), k1 and b of store/bm25.py, and `params`."""
        lexemes = await self._lexemes(config, query)
        if not lexemes:
            return []
        tsquery = " | ".join(_tsquery_literal(lexeme) for lexeme in lexemes)
        return await self._fetch(sql, {"tsquery": tsquery, "lexemes": lexemes, "k1": BM25_K1, "b": BM25_B, **params})

    async def kb_keyword_search(
        self, kb: str, query: str, config: str, *, n: int, avgdl: float, limit: int
    ) -> list[tuple[str, float]]:
        """BM25 (chunk key, score as a share of the query's ceiling, 0..1) of `kb`'s chunks for
        `query`, best first: query lexemes from `to_tsvector(config, query)`, term frequencies
        from the stored tsvectors, lengths in characters; `n` and `avgdl` (the knowledge base's
        chunk count and mean chunk length) from the registry."""
        rows = await self._bm25(KB_KEYWORD_SQL, config, query, kb=kb, n=n, avgdl=avgdl, limit=limit)
        return [(row["key"], float(row["score"])) for row in rows]

    # --- memory full text ----------------------------------------------------------------------

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
            """
            WITH hit AS (
                SELECT key, value->>'thread_id' AS thread, value->>'created_at' AS at FROM store
                WHERE prefix = %(prefix)s AND key = ANY(%(keys)s) AND value ? 'thread_id'
            )
            SELECT hit.key AS hit, n.key, n.value, n.created_at, n.updated_at FROM hit
            CROSS JOIN LATERAL (
                (SELECT s.key, s.value, s.created_at, s.updated_at FROM store s
                 WHERE s.prefix = %(prefix)s AND s.value->>'thread_id' = hit.thread
                   AND s.value->>'created_at' < hit.at AND (s.expires_at IS NULL OR s.expires_at > NOW())
                 ORDER BY s.value->>'created_at' DESC LIMIT %(window)s)
                UNION ALL
                (SELECT s.key, s.value, s.created_at, s.updated_at FROM store s
                 WHERE s.prefix = %(prefix)s AND s.value->>'thread_id' = hit.thread
                   AND s.value->>'created_at' > hit.at AND (s.expires_at IS NULL OR s.expires_at > NOW())
                 ORDER BY s.value->>'created_at' LIMIT %(window)s)
            ) AS n
            """,
            {"prefix": prefix, "keys": list(keys), "window": window},
        )
        return _neighbour_pairs(prefix, rows)

    async def kb_neighbours(self, prefix: str, keys: Sequence[str], window: int) -> list[tuple[str, Item]]:
        """(hit key, neighbour) pairs: for each of `keys` (chunks in namespace `prefix`), the
        `window` chunks just before it and the `window` just after it in the order (document
        date, source, position), undated chunks only within their own document."""
        order = "coalesce(s.value->>'date', ''), s.value->>'source', (s.value->>'position')::int"
        backwards = "coalesce(s.value->>'date', '') DESC, s.value->>'source' DESC, (s.value->>'position')::int DESC"
        rows = await self._fetch(
            f"""
            WITH hit AS (
                SELECT key, coalesce(value->>'date', '') AS at, value->>'source' AS source,
                       (value->>'position')::int AS position
                FROM store WHERE prefix = %(prefix)s AND key = ANY(%(keys)s)
            )
            SELECT hit.key AS hit, n.key, n.value, n.created_at, n.updated_at FROM hit
            CROSS JOIN LATERAL (
                (SELECT s.key, s.value, s.created_at, s.updated_at FROM store s
                 WHERE s.prefix = %(prefix)s AND ({order}) < (hit.at, hit.source, hit.position)
                   AND (hit.at <> '' OR s.value->>'source' = hit.source)
                   AND (s.expires_at IS NULL OR s.expires_at > NOW())
                 ORDER BY {backwards} LIMIT %(window)s)
                UNION ALL
                (SELECT s.key, s.value, s.created_at, s.updated_at FROM store s
                 WHERE s.prefix = %(prefix)s AND ({order}) > (hit.at, hit.source, hit.position)
                   AND (hit.at <> '' OR s.value->>'source' = hit.source)
                   AND (s.expires_at IS NULL OR s.expires_at > NOW())
                 ORDER BY {order} LIMIT %(window)s)
            ) AS n
            """,
            {"prefix": prefix, "keys": list(keys), "window": window},
        )
        return _neighbour_pairs(prefix, rows)

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

    async def explain_memory_search(
        self, prefix: str, embedding: Sequence[float], query: str, config: str, limit: int = 100
    ) -> dict[str, str]:
        """EXPLAIN ANALYZE (benchmarks) of one namespace's two hybrid-recall queries: the vector
        search as the library phrases it (prefix equality or LIKE, ORDER BY distance) and
        MEMORY_KEYWORD_SQL. Returns {"vector": plan, "keyword": plan}."""
        lexemes = await self._lexemes(config, query)
        explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) "
        vector = "[" + ",".join(f"{x:.6f}" for x in embedding) + "]"
        statements = {
            "vector": (
                explain + "SELECT store.key, sv.embedding <=> %(v)s::vector AS distance FROM store "
                "JOIN store_vectors sv ON store.prefix = sv.prefix AND store.key = sv.key "
                "WHERE (store.prefix = %(p)s OR store.prefix LIKE %(like)s) "
                "ORDER BY sv.embedding <=> %(v)s::vector LIMIT %(limit)s",
                {"v": vector, "p": prefix, "like": f"{_escape_like(prefix)}.%", "limit": 2 * limit + 1},
            ),
            "keyword": (
                explain + MEMORY_KEYWORD_SQL,
                {
                    "prefix": prefix,
                    "tsquery": " | ".join(_tsquery_literal(x) for x in lexemes) or "''",
                    "lexemes": lexemes,
                    "k1": BM25_K1,
                    "b": BM25_B,
                    "limit": limit,
                    "match": Jsonb({}),
                },
            ),
        }
        plans = {}
        for name, (sql, params) in statements.items():
            plans[name] = "\n".join(next(iter(row.values())) for row in await self._fetch(sql, params))
        return plans

    # --- web quotas (tools/quota.py) ------------------------------------------------------------

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

    # --- checkpoints ------------------------------------------------------------------------------

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

    # --- benchmark bulk load ----------------------------------------------------------------------

    async def copy_items(
        self,
        rows: Iterable[tuple[str, str, dict, Any]],
        field: str,
        fulltext_config: str | None = None,
        analyze: bool = True,
    ) -> None:
        """Bulk-load (prefix, key, value, vector) rows with COPY: the value into `store`, the
        vector (a numpy array, through pgvector's psycopg adapter) into `store_vectors` under
        `field`, and with `fulltext_config` the value's text into `memory_fulltext`; then, with
        `analyze`, `analyze_items`. For benchmarks: no embedding, no dedupe, no TTL."""
        from pgvector.psycopg import register_vector_async
        from psycopg.types.json import Jsonb

        rows = list(rows)
        async with self.pool.connection() as conn:
            await register_vector_async(conn)  # before the cursor: a cursor copies the type map
            async with conn.transaction(), conn.cursor() as cur:
                async with cur.copy("COPY store (prefix, key, value) FROM STDIN") as copy:
                    for prefix, key, value, _vector in rows:
                        await copy.write_row((prefix, key, Jsonb(value)))
                async with cur.copy(
                    "COPY store_vectors (prefix, key, field_name, embedding) FROM STDIN WITH (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["text", "text", "text", "vector"])
                    for prefix, key, _value, vector in rows:
                        await copy.write_row((prefix, key, field, vector))
        if fulltext_config:
            by_prefix: dict[str, list[tuple[str, str]]] = {}
            for prefix, key, value, _vector in rows:
                by_prefix.setdefault(prefix, []).append((key, str(value.get("text", ""))))
            for prefix, pairs in by_prefix.items():
                await self.index_memories(prefix, pairs, fulltext_config)
        if analyze:
            await self.analyze_items(fulltext=bool(fulltext_config))

    async def analyze_items(self, fulltext: bool = False) -> None:
        """ANALYZE the store's tables (and `memory_fulltext`) so the planner sees a bulk load."""
        async with self.pool.connection() as conn:
            await conn.execute("ANALYZE store")
            await conn.execute("ANALYZE store_vectors")
            if fulltext:
                await conn.execute("ANALYZE memory_fulltext")


def _first(row: Any) -> Any:
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def _identifier(name: str) -> str:
    if not name.replace("_", "").isalnum() or not name.isascii():
        raise ValueError(f"{name!r} is not a plain identifier")
    return name


def _neighbour_pairs(prefix: str, rows: list[dict]) -> list[tuple[str, Item]]:
    """(hit key, neighbour item) pairs from the rows of a neighbour query in namespace `prefix`."""
    namespace = tuple(prefix.split("."))
    return [
        (
            row["hit"],
            Item(
                value=row["value"],
                key=row["key"],
                namespace=namespace,
                created_at=row["created_at"],
                updated_at=row["updated_at"],
            ),
        )
        for row in rows
    ]
