"""The versioned migrations (store/migrations.py) of the project's own tables beside the library's."""

from __future__ import annotations

from store.sql.base import (
    DOC_DATE,
    DOC_POSITION,
    DOC_SOURCE,
    KB_PREFIX,
    MEMORY_TEXT_SEARCH_CONFIG,
    THREAD,
    WRITTEN,
    _identifier,
)


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
        # The order a chat thread's messages and a knowledge base's chunks are read in around a
        # hit (neighbours, the message a reply follows), indexed on the library's table: without
        # them each read sorts all of the user's or the knowledge base's rows.
        [
            f"CREATE INDEX IF NOT EXISTS store_thread_order ON store (prefix, ({THREAD}), ({WRITTEN}))",
            "CREATE INDEX IF NOT EXISTS store_document_order"
            f" ON store (prefix, ({DOC_DATE}), ({DOC_SOURCE}), ({DOC_POSITION}))",
        ],
        # Knowledge-base full text indexed by knowledge base and lexeme, as memories' are by
        # namespace: counting the chunks of one knowledge base that hold a word no longer walks
        # every knowledge base's chunks holding it (with btree_gin; without it, `tsv` alone stays).
        # A namespace's memory count and mean length read from an index alone (keyword search's
        # statistics: 9-10 -> 2.5-4.5 ms on 50,000 memories).
        [
            "CREATE INDEX IF NOT EXISTS memory_fulltext_lengths ON memory_fulltext (prefix) INCLUDE (chars)",
            """DO $$ BEGIN
                IF to_regclass('kb_fulltext_scoped') IS NULL THEN
                    BEGIN
                        CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public;
                        CREATE INDEX kb_fulltext_scoped ON kb_fulltext USING gin (kb, tsv) WITH (fastupdate = off);
                    EXCEPTION WHEN OTHERS THEN NULL;
                    END;
                END IF;
                IF to_regclass('kb_fulltext_scoped') IS NOT NULL THEN
                    DROP INDEX IF EXISTS kb_fulltext_tsv;
                END IF;
            END $$""",
        ],
    ]
