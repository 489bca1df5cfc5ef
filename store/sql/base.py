"""The SQL adapter's shared part: the library's tables it relies on, the start-up checks, items
(atomic insert, locked read-modify-write, listings, bulk delete), where a store's table is, the
vector search in one namespace, and the BM25 statement both full texts share. The owners' statements are beside it: memory.py, knowledge.py, quotas.py,
checkpoints.py, graph.py; schema.py holds the migrations of the project's own tables."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext, suppress
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from langgraph.store.base import Item, SearchItem
from psycopg import AsyncPipeline
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


# Where the `store` table a connection sees is: its schema, and what tells one database apart
# from another (a server's own store and the package's pool beside it must see the same table).
STORE_LOCATION_SQL = (
    "SELECT n.nspname AS schema, current_database() AS db, pg_postmaster_start_time() AS started, "
    "c.oid::bigint AS table_oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.oid = to_regclass('store')"
)

# `update_items`: a transaction-scoped advisory lock per item (a hash of its prefix and key; taken
# in one order, so that two updates of several items never wait on each other), the live values,
# and the store's `put` of the changed ones (no vectors: they are not indexed).
LOCK_ITEMS_SQL = (
    "SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(name, 0) AS h "
    "FROM unnest(%s::text[]) AS name ORDER BY h) AS locks"
)
READ_ITEMS_SQL = (
    "SELECT key, value FROM store WHERE prefix = %s AND key = ANY(%s) AND (expires_at IS NULL OR expires_at > NOW())"
)
WRITE_ITEMS_SQL = (
    "INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) "
    "SELECT %(prefix)s, k, v, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, "
    "NOW() + make_interval(secs => %(ttl)s::float8 * 60), %(ttl)s::float8 "
    "FROM unnest(%(keys)s::text[], %(values)s::jsonb[]) AS written(k, v) "
    "ON CONFLICT (prefix, key) DO UPDATE SET value = EXCLUDED.value, updated_at = CURRENT_TIMESTAMP, "
    "expires_at = EXCLUDED.expires_at, ttl_minutes = EXCLUDED.ttl_minutes"
)
Change = Callable[[str, dict | None], dict | None]  # (key, live value or None) -> value to write, or None


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


async def server_store_sees_vector_type(server_store: Any) -> bool:
    """Whether a LangGraph `AsyncPostgresStore`'s own connections resolve pgvector's `vector`
    type (a vector table and its searches need it on their search_path)."""

    async def sees(conn: Any) -> bool:
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute("SELECT to_regtype('vector') IS NOT NULL AS found")
            row = await cur.fetchone()
        return bool(row and row["found"])

    conn = server_store.conn
    if isinstance(conn, AsyncConnectionPool):
        async with conn.connection() as pooled:
            return await sees(pooled)
    async with server_store.lock:
        return await sees(conn)


def server_store_with_index(server_store: Any, index: dict) -> Any:
    """A LangGraph `AsyncPostgresStore` on a server store's own connection, with the semantic
    `index` (store/index.py `index_server_store` sets its vector table up and takes its index)."""
    from langgraph.store.postgres.aio import AsyncPostgresStore

    return AsyncPostgresStore(conn=server_store.conn, index=index)  # type: ignore[arg-type]


def server_store_conninfo(server_store: Any) -> str:
    """The connection string of a LangGraph `AsyncPostgresStore`'s own connection."""
    conn = server_store.conn
    return str(conn.conninfo) if isinstance(conn, AsyncConnectionPool) else str(conn.info.dsn)


class LibrarySchemaError(RuntimeError):
    """langgraph-checkpoint-postgres's tables are not what store/sql/ was written for."""


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


def _any_of(lexemes: Sequence[str]) -> str:
    """A tsquery matching rows that hold any of `lexemes`."""
    return " | ".join(_tsquery_literal(lexeme) for lexeme in lexemes)


# BM25 over one scope of a full-text table (a user's memories of one kind, one knowledge base),
# as both keyword searches run it. The candidates are the scope's rows holding one of the `tsquery`
# lexemes (the GIN index on (scope, tsv)), scored over all the query's `lexemes`, with the
# statistics counted first and passed in (`keyword_statistics`, `bm25_params`): `n` rows, mean
# length `avgdl` in characters, `dfs` rows holding each lexeme (so leaving a lexeme out of the
# candidates changes no score). A candidate's term frequencies are the positions of the query's
# lexemes in its tsvector, picked out by weight (setweight marks them, ts_filter keeps them: a
# third of the time of unnesting every lexeme of an 800-character chunk; the stored tsvectors are
# to_tsvector's, which always hold positions). Scores are divided by the query's ceiling, the sum
# over its lexemes of idf * (k1 + 1) (a lexeme no row holds counts with df 0): the share of the
# query's weight a row matches, comparable across queries (a rare code matched scores high; two
# common words of a paraphrase, low). Yields the relation `scored` (key, score).
def bm25_sql(table: str, scope: str, key: str) -> str:
    """The WITH list of BM25 over `table`'s rows whose `scope` column is %(scope)s, keyed by `key`."""
    return f"""
    WITH candidates AS MATERIALIZED (
        SELECT {_identifier(key)} AS key, tsv, chars FROM {_identifier(table)}
        WHERE {_identifier(scope)} = %(scope)s AND tsv @@ %(tsquery)s::tsquery
    ),
    corpus AS (SELECT %(n)s::bigint AS n, %(avgdl)s::numeric AS avgdl),
    document_frequency AS (
        SELECT lexeme, df FROM unnest(%(lexemes)s::text[], %(dfs)s::bigint[]) AS d(lexeme, df) WHERE df > 0
    ),
    frequencies AS (
        SELECT c.key, c.chars, t.lexeme, cardinality(t.positions) AS tf
        FROM candidates c
        CROSS JOIN LATERAL unnest(ts_filter(setweight(c.tsv, 'A', %(lexemes)s::text[]), '{{a}}')) AS t
    ),
    ceiling AS (
        SELECT sum(ln(1 + (co.n - coalesce(d.df, 0) + 0.5) / (coalesce(d.df, 0) + 0.5)) * (%(k1)s + 1)) AS total
        FROM unnest(%(lexemes)s::text[]) AS q(lexeme) LEFT JOIN document_frequency d USING (lexeme) CROSS JOIN corpus co
    ),
    scored AS (
        SELECT f.key, sum(
            ln(1 + (co.n - d.df + 0.5)::double precision / (d.df + 0.5))
            * f.tf * (%(k1)s + 1)
            / (f.tf + %(k1)s * (1 - %(b)s + %(b)s * f.chars / co.avgdl))
        ) / (SELECT total FROM ceiling) AS score
        FROM frequencies f JOIN document_frequency d USING (lexeme) CROSS JOIN corpus co
        GROUP BY f.key
    )"""


def term_counts_sql(table: str, scope: str) -> str:
    """An array expression: how many of `table`'s rows whose `scope` is %(scope)s hold each of
    %(terms)s (tsquery literals of one lexeme each), in order; counted on the GIN index."""
    return f"""ARRAY(
        SELECT (SELECT count(*) FROM {_identifier(table)} f WHERE f.{_identifier(scope)} = %(scope)s AND f.tsv @@ q.term::tsquery)
        FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, i) ORDER BY q.i
    )"""


# In a scope of at least PRUNE_ROWS rows, a lexeme more than COMMON_SHARE of them hold (idf below
# ln(10 / 9) = 0.11, a sixtieth of a lexeme one row in a thousand holds: "user" in every memory a
# writer phrases "User likes ...") scores only rows holding a rarer one of the query's: alone it
# ranks rows by their length, and reading every row that holds it makes a large user's recall or
# a large knowledge base's search slow (Elasticsearch's common terms). A speaker's name heading
# their lines in a chat log ("Maya: ...": half a two-person log's lines, more with the times they
# name each other) stays an ordinary lexeme. Then MaxScore: the lexemes held by at least
# PRUNE_ROWS rows, least weight first, whose weights together stay within PRUNE_SHARE of the
# query's are left out of the candidates, so long as the rows found otherwise fill the limit
# above what a row holding only those could score (`SQLBase._bm25`).
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


def bm25_params(scope: str, lexemes: Sequence[str], stats: dict, *, limit: int) -> dict:
    """The parameters of a `bm25_sql` statement but its `tsquery` (the candidates' lexemes,
    `_any_of`): the query's `lexemes`, the scope's `stats` ({"n", "avgdl", "dfs"}), k1 and b."""
    return {
        "scope": scope,
        "lexemes": list(lexemes),
        "dfs": list(stats["dfs"]),
        "n": stats["n"],
        "avgdl": stats["avgdl"],
        "k1": BM25_K1,
        "b": BM25_B,
        "limit": limit,
    }


# The store's vector search in one namespace (store_vectors + store, as the library lays them out):
# of the namespace's live items whose values contain `match` (and, with `{span}` filled, whose
# date field is in a range), the `vectors` nearest vectors, each item once at its nearest, the
# `limit` best, score = 1 - cosine distance, as the library's search scores them. The library's
# own statement also matches the namespaces below (`prefix = %s OR prefix LIKE '%s.%'`), which the
# planner answers by scanning all of `store` on a store of a few users (12-20 ms a search where
# this takes 4-6 ms, bench/results.md); here the namespace's vectors are read by the vector
# table's primary key, or, for a namespace of many items, the planner walks the HNSW index
# (iterative scans on, store/pool.py). SQLBackend.vector_search falls back to the library's search
# for an index it does not phrase (another distance or vector type: a server's own index).
VECTOR_SEARCH_SQL = """
    SELECT s.key, s.value, s.created_at, s.updated_at, 1 - n.distance AS score
    FROM (
        SELECT DISTINCT ON (v.key) v.key, v.distance FROM (
            SELECT sv.key, sv.embedding <=> %(vector)s::vector AS distance
            FROM store_vectors sv JOIN store s ON s.prefix = sv.prefix AND s.key = sv.key
            WHERE sv.prefix = %(prefix)s AND s.prefix = %(prefix)s
              AND (s.expires_at IS NULL OR s.expires_at > NOW()) AND s.value @> %(match)s {span}
            ORDER BY distance LIMIT %(vectors)s
        ) AS v
        ORDER BY v.key, v.distance
    ) AS n
    JOIN store s ON s.prefix = %(prefix)s AND s.key = n.key
    ORDER BY n.distance, s.key
    LIMIT %(limit)s
"""
VECTOR_SPAN_SQL = "AND s.value->>%(date_field)s >= %(start)s AND s.value->>%(date_field)s < %(end)s"


class SQLBase:
    """The pool the statements run on, and the statements every owner shares."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:  # any row type: cursors set dict_row
        self.pool = pool

    async def _fetch(self, sql: str, params: Any = None) -> list[dict]:
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql, params)
            return await cur.fetchall() if cur.description else []

    async def vector_search(
        self,
        prefix: str,
        vector: Sequence[float],
        *,
        limit: int,
        vectors: int,
        match: dict,
        span: tuple[str, str, str] | None = None,
    ) -> list[SearchItem]:
        """The `limit` items of namespace `prefix` nearest to `vector` (VECTOR_SEARCH_SQL), best
        first, among its `vectors` nearest vectors: live, values containing `match`; `span`
        (date field, start, end) keeps the values whose date field is in [start, end) (text
        order: UTC ISO stamps of one format)."""
        params: dict[str, Any] = {
            "prefix": prefix,
            "vector": "[" + ",".join(map(str, vector)) + "]",
            "match": Jsonb(match),
            "vectors": vectors,
            "limit": limit,
        }
        if span is not None:
            params.update(zip(("date_field", "start", "end"), span, strict=True))
        rows = await self._fetch(VECTOR_SEARCH_SQL.format(span=VECTOR_SPAN_SQL if span else ""), params)
        namespace = tuple(prefix.split("."))
        return [
            SearchItem(namespace, row["key"], row["value"], row["created_at"], row["updated_at"], float(row["score"]))
            for row in rows
        ]

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
                f"{LIBRARY} {library_version()} set up tables store/sql/ does not know: "
                f"{'; '.join(problems)}. Install the version pinned in constraints.txt, or update "
                "store/sql/ (and its schema test) for the new tables."
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

    async def update_items(
        self, namespace: Sequence[str], keys: Sequence[str], change: Change, ttl_minutes: float | None = None
    ) -> dict[str, dict]:
        """Read-modify-write of items (not indexed for search) that concurrent updates of the same
        items (other tasks, other processes) never undo: under a transaction-scoped advisory lock
        per item, `change(key, live value or None)` gives each key's new value (None: leave it),
        and the changed ones are written as the store's `put` would (`ttl_minutes`: its default
        TTL). Returns the written values by key. Its cost: one connection (a get and a put took
        one each) and, pipelined, two round trips (lock and read; write and commit)."""
        prefix = ".".join(namespace)
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        async with self.pool.connection() as conn:
            try:
                pipelined = conn.pipeline() if AsyncPipeline.is_supported() else nullcontext()  # libpq >= 14
                async with pipelined, conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute("BEGIN")
                    await cur.execute(LOCK_ITEMS_SQL, ([f"{prefix}\x1f{key}" for key in wanted],))
                    await cur.execute(READ_ITEMS_SQL, (prefix, wanted))
                    current = {row["key"]: row["value"] for row in await cur.fetchall()}
                    written = {key: value for key in wanted if (value := change(key, current.get(key))) is not None}
                    if written:
                        values = [Jsonb(strip_nul(value)) for value in written.values()]
                        params = {"prefix": prefix, "keys": list(written), "values": values, "ttl": ttl_minutes}
                        await cur.execute(WRITE_ITEMS_SQL, params)
                    await cur.execute("COMMIT")
            except BaseException:
                with suppress(Exception):  # a broken connection: the pool replaces it
                    await conn.rollback()  # nothing to do when the transaction is over
                raise
        return written

    async def scan_items(self, prefix: Sequence[str], limit: int | None = None) -> list[Item]:
        """The live items in the namespace `prefix` and below it (as the store's search without
        a query matches them), newest first, at most `limit` (None: all). Then by namespace and
        key: the store's search orders by `updated_at` alone, and pages of it (LIMIT / OFFSET)
        return some rows twice and others never when rows written by one statement tie."""
        joined = ".".join(prefix)
        rows = await self._fetch(
            "SELECT prefix, key, value, created_at, updated_at FROM store "
            "WHERE (prefix = %(prefix)s OR prefix LIKE %(below)s) AND (expires_at IS NULL OR expires_at > NOW()) "
            "ORDER BY updated_at DESC, prefix, key" + ("" if limit is None else " LIMIT %(limit)s"),
            {"prefix": joined, "below": f"{_escape_like(joined)}.%", "limit": limit},
        )
        return [_item(row) for row in rows]

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
        return [_item(row) for row in rows]

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

    # --- full text ------------------------------------------------------------------------------

    async def _lexemes(self, config: str, query: str) -> list[str]:
        """The lexemes Postgres's text search configuration `config` makes of `query`."""
        rows = await self._fetch(
            "SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s)) AS lexemes", (config, strip_nul(query))
        )
        return list(rows[0]["lexemes"])

    async def _term_statistics(self, statement: str, scope: str, lexemes: Sequence[str]) -> dict:
        """The one row of a statistics `statement` of `scope` over `term_counts_sql` for `lexemes`
        (each as a tsquery of its own)."""
        terms = [_tsquery_literal(lexeme) for lexeme in lexemes]
        return (await self._fetch(statement, {"scope": scope, "terms": terms}))[0]

    async def _bm25(self, statement: str, params: dict) -> list[dict]:
        """The rows of a `bm25_sql` `statement` (ordered by score, at most `params["limit"]`) for
        `bm25_params`: the candidates are the rows holding one of the `essential` lexemes; when
        some were left out and a row holding only those could rank among the rows found, the
        rows holding any lexeme but the common ones are scored instead (the same results)."""
        lexemes, dfs, n, limit = params["lexemes"], params["dfs"], params["n"], params["limit"]
        wanted, bound = essential(lexemes, dfs, n)
        rows = await self._fetch(statement, {**params, "tsquery": _any_of(wanted)}) if wanted else []
        if bound > 0 and (len(rows) < limit or rows[-1]["score"] <= bound * (1 + 1e-9)):
            wanted, _ = essential(lexemes, dfs, n, prune=False)
            rows = await self._fetch(statement, {**params, "tsquery": _any_of(wanted)})
        return rows


def _item(row: dict) -> Item:
    """The item of a `store` row read with its prefix, key, value and stamps."""
    return Item(
        value=row["value"],
        key=row["key"],
        namespace=tuple(row["prefix"].split(".")),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _first(row: Any) -> Any:
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def _identifier(name: str) -> str:
    if not name.replace("_", "").isalnum() or not name.isascii():
        raise ValueError(f"{name!r} is not a plain identifier")
    return name


# Expressions of a `store` row that the indexes of the migrations' step 3 (store/sql/schema.py)
# are built on: a query filters and orders by exactly these to use them. Each is cut to a bounded
# length, so no row's index entry can outgrow a btree page whatever a value holds (chat thread
# ids are at most 256 characters; a source sharing its first 200 with another sorts beside it).
THREAD = "left(value->>'thread_id', 256)"  # a chat message's thread
WRITTEN = "left(value->>'created_at', 40)"  # when a memory or chat message was written (UTC ISO stamp)
DOC_DATE = "left(coalesce(value->>'date', ''), 40)"  # a knowledge-base chunk's document date ('' undated)
DOC_SOURCE = "left(value->>'source', 200)"  # its document's source
DOC_POSITION = "lpad(left(value->>'position', 12), 12, '0')"  # its position in the document, as sortable text


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
