"""Knowledge bases on the real Postgres store: full-text BM25, hybrid, re-ingest, the CLI (knowledge
bases and memory deletion) and the tool."""

from __future__ import annotations

import functools
import http.server
import json
import math
import os
import threading

import psycopg
import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore

from store import knowledge
from store.embeddings import get_embeddings
from store.knowledge import KBUnknownError
from store.postgres import store
from store.sql import KB_KEYWORD_SQL
from tests.integration.conftest import KB_DATA, cli, sql
from tools.knowledge import KNOWLEDGE_TOOLS

pytestmark = pytest.mark.integration


def count_chunks(pg_uri: str, schema: str, kb: str, source: str | None = None) -> tuple[int, int]:
    """(rows in store, rows in store_vectors) for a knowledge base, optionally one source."""
    where = "prefix = %s" + (" AND value->>'source' = %s" if source else "")
    params = (f"kb.{kb}", source) if source else (f"kb.{kb}",)
    rows = sql(pg_uri, f"SELECT count(*) FROM {schema}.store WHERE {where}", params)[0][0]
    vectors = sql(
        pg_uri,
        f"SELECT count(*) FROM {schema}.store_vectors v JOIN {schema}.store s USING (prefix, key) WHERE s.{where}",
        params,
    )[0][0]
    return rows, vectors


async def test_folder_ingest_and_every_strategy(pg_schema, pg_uri):
    async with store() as pg_store:
        await knowledge.create_kb(pg_store, "demo", "fixtures")
        result = await knowledge.ingest_path(pg_store, "demo", KB_DATA)
        assert len(result["documents"]) == 5 and result["skipped"] == [str(KB_DATA / "nested" / "ignored.csv")]
        entry = await knowledge.get_kb(pg_store, "demo")
        assert count_chunks(pg_uri, pg_schema, "demo") == (entry["chunks"], entry["chunks"])

        keyword = await knowledge.keyword_search(pg_store, "demo", "what does fault ZX-4480 mean", top_k=5)
        top = keyword["retrieval_results"][0]
        assert top["title"] == "Greenhouse Irrigation Guide" and "ZX-4480" in top["content"]
        # english stemming on Postgres: "requesting" matches "requests"
        stemmed = await knowledge.keyword_search(pg_store, "demo", "requesting holidays form", top_k=3)
        assert stemmed["retrieval_results"][0]["page"] == 1 and "HR-2209" in stemmed["retrieval_results"][0]["content"]

        query = "what sound device is used when the sea mist rolls in"
        dense = await knowledge.dense_search(pg_store, "demo", query, top_k=3)
        assert dense["retrieval_results"][0]["title"] == "lighthouse"
        hybrid = await knowledge.hybrid_search(pg_store, "demo", query, top_k=5)
        assert "lighthouse" in [r["title"] for r in hybrid["retrieval_results"]]
        for result in (keyword, dense, hybrid):
            hits = result["retrieval_results"]
            assert [r["index"] for r in result["reference"]] == list(range(1, len(hits) + 1))
            assert all(f"[{h['index']}] {h['title']}" in result["context"] for h in hits)

        code = await knowledge.hybrid_search(pg_store, "demo", "cost centre QP-118", top_k=3)
        assert code["retrieval_results"][0]["page"] == 2 and code["retrieval_results"][0]["ranks"]["keyword"] == 1


async def test_postgres_bm25_scores_follow_the_formula_and_use_the_gin_index(pg_schema, pg_uri):
    async with store() as pg_store:
        await knowledge.create_kb(pg_store, "fruit")
        texts = {"a.txt": "red apple red", "b.txt": "green apple", "c.txt": "blue sky"}
        for source, text in texts.items():
            await knowledge.ingest_text(pg_store, "fruit", text, source)
        result = await knowledge.keyword_search(pg_store, "fruit", "red apples", top_k=5)
        scores = {r["source"]: r["score"] for r in result["retrieval_results"]}
        assert set(scores) == {"a.txt", "b.txt"}
        n, average = 3, sum(map(len, texts.values())) / 3

        def term(tf, df, chars):
            return math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * chars / average))

        def idf(df):
            return math.log(1 + (n - df + 0.5) / (df + 0.5))

        ceiling = (idf(1) + idf(2)) * 2.2  # a share of the query's ceiling: red (df 1), appl (df 2)
        assert math.isclose(scores["a.txt"], (term(2, 1, 13) + term(1, 2, 13)) / ceiling, rel_tol=1e-5)
        assert math.isclose(scores["b.txt"], term(1, 2, 11) / ceiling, rel_tol=1e-5)
        # a query word no chunk holds counts in the ceiling (df 0): the same chunk matches less of it
        wider = await knowledge.keyword_search(pg_store, "fruit", "red apples orchard", top_k=5)
        orchard = idf(0) * 2.2
        share = {r["source"]: r["score"] for r in wider["retrieval_results"]}["b.txt"]
        assert math.isclose(share, term(1, 2, 11) / (ceiling + orchard), rel_tol=1e-5)

        # the full text lives in the project's own table, GIN-indexed, not on the library's table
        assert sql(pg_uri, f"SELECT count(*) FROM {pg_schema}.kb_fulltext WHERE kb = 'fruit'") == [(3,)]
        params = {
            "scope": "fruit",
            "tsquery": "'red' | 'appl'",
            "lexemes": ["red", "appl"],
            "dfs": [1, 2],
            "n": 3,
            "k1": 1.2,
            "b": 0.75,
            "avgdl": 12.0,
            "limit": 5,
        }
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f"SET search_path = {pg_schema}")
            # a knowledge base of realistic size, where few chunks hold the query terms
            conn.execute(
                "INSERT INTO kb_fulltext (kb, chunk_key, config, tsv, chars) SELECT 'fruit', 'filler-' || g, "
                "'english', to_tsvector('english', 'orchard ledger entry ' || g || ' about pears and plums'), 40 "
                "FROM generate_series(1, 20000) AS g"
            )
            conn.execute("ANALYZE kb_fulltext")
            plan = conn.execute("EXPLAIN " + KB_KEYWORD_SQL, params).fetchall()
        assert "kb_fulltext_scoped" in "\n".join(row[0] for row in plan)


async def test_fallback_ranks_like_postgres_on_unstemmed_words(pg_schema):
    """The in-process fallback (InMemoryStore) and the production SQL agree on the order when the
    words need no stemming and chunk lengths in characters and tokens are proportional."""
    texts = {
        "a.txt": "quartz quartz basalt",
        "b.txt": "quartz basalt basalt",
        "c.txt": "quartz granite schist",
        "d.txt": "marble slate shale",
        "e.txt": "quartz quartz quartz",
    }
    memory_store = InMemoryStore(index={"dims": 384, "embed": get_embeddings(), "fields": ["content"]})
    orders = []
    async with store() as pg_store:
        for target in (pg_store, memory_store):
            await knowledge.create_kb(target, "rocks")
            for source, text in texts.items():
                await knowledge.ingest_text(target, "rocks", text, source)
            found = await knowledge.keyword_search(target, "rocks", "quartz basalt", top_k=5)
            orders.append([r["source"] for r in found["retrieval_results"]])
    assert orders[0] == orders[1]
    assert orders[0] == ["b.txt", "a.txt", "e.txt", "c.txt"]  # idf(basalt) > idf(quartz)


async def test_kb_fulltext_follows_delete_and_is_rebuilt_from_the_store(pg_schema, pg_uri):
    async with store() as pg_store:
        await knowledge.create_kb(pg_store, "tmp")
        await knowledge.ingest_text(pg_store, "tmp", "kestrels hover over meadows", "birds.txt")
        await knowledge.create_kb(pg_store, "keep")
        await knowledge.ingest_text(pg_store, "keep", "otters float on kelp", "otters.txt")
        await knowledge.delete_kb(pg_store, "tmp")
    assert sql(pg_uri, f"SELECT kb FROM {pg_schema}.kb_fulltext") == [("keep",)]
    # a database from before kb_fulltext existed: the table is rebuilt from the store's chunks
    sql(pg_uri, f"DROP TABLE {pg_schema}.kb_fulltext")
    sql(pg_uri, f"DELETE FROM {pg_schema}.agent_schema_version WHERE component = 'store'")  # nor migrations
    async with store() as pg_store:
        found = await knowledge.keyword_search(pg_store, "keep", "otter", top_k=3)
    assert [r["source"] for r in found["retrieval_results"]] == ["otters.txt"]


async def test_reingest_replaces_rows_in_the_database(pg_schema, pg_uri):
    long_text = "\n\n".join(f"Section {i}: the observatory logged comet C-{i:03d} on night {i}." for i in range(30))
    async with store() as pg_store:
        await knowledge.create_kb(pg_store, "obs")
        first = await knowledge.ingest_text(pg_store, "obs", long_text, "log.txt", chunk_size=120, chunk_overlap=0)
        await knowledge.ingest_text(pg_store, "obs", "Unrelated note on telescopes.", "note.txt")
        assert first["chunks"] > 5
        assert count_chunks(pg_uri, pg_schema, "obs", "log.txt") == (first["chunks"], first["chunks"])
        unchanged = await knowledge.ingest_text(pg_store, "obs", long_text, "log.txt", chunk_size=120, chunk_overlap=0)
        assert unchanged["status"] == "unchanged"
        second = await knowledge.ingest_text(
            pg_store, "obs", long_text[:300], "log.txt", chunk_size=120, chunk_overlap=0
        )
        assert second["status"] == "updated" and second["removed"] == first["chunks"] - second["chunks"]
        assert count_chunks(pg_uri, pg_schema, "obs", "log.txt") == (second["chunks"], second["chunks"])
        assert count_chunks(pg_uri, pg_schema, "obs") == (second["chunks"] + 1, second["chunks"] + 1)
        found = await knowledge.keyword_search(pg_store, "obs", "comet C-029", top_k=3)
        assert all("C-029" not in r["content"] for r in found["retrieval_results"])
        entry = await knowledge.get_kb(pg_store, "obs")
        assert (entry["documents"], entry["chunks"]) == (2, second["chunks"] + 1)

        deleted = await knowledge.delete_kb(pg_store, "obs")
        assert deleted["chunks"] == second["chunks"] + 1
        assert count_chunks(pg_uri, pg_schema, "obs") == (0, 0)


async def test_unknown_kb_lists_existing_ones(pg_schema):
    async with store() as pg_store:
        await knowledge.create_kb(pg_store, "movie")
        await knowledge.create_kb(pg_store, "edu")
        with pytest.raises(KBUnknownError, match="Existing knowledge bases: edu, movie"):
            await knowledge.retrieve(pg_store, "books", "anything", strategy="keyword")


async def test_tool_through_tool_node_with_the_postgres_store(pg_schema):
    async with store() as pg_store:
        await knowledge.create_kb(pg_store, "demo")
        await knowledge.ingest_path(pg_store, "demo", KB_DATA / "greenhouse.md")
        builder = StateGraph(MessagesState)
        builder.add_node("tools", ToolNode(list(KNOWLEDGE_TOOLS), handle_tool_errors=True))
        builder.add_edge(START, "tools")
        graph = builder.compile(store=pg_store)
        calls = [
            {
                "name": "knowledge_base_search",
                "args": {"query": "ZX-4471", "kb": "demo", "strategy": "keyword"},
                "id": "a",
            },
            {"name": "knowledge_base_search", "args": {"query": "x", "kb": "missing"}, "id": "b"},
            {"name": "list_knowledge_bases", "args": {}, "id": "c"},
        ]
        out = await graph.ainvoke({"messages": [AIMessage("", tool_calls=calls)]})
        messages = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
        found = json.loads(messages["a"].content)
        assert messages["a"].status == "success" and "ZX-4471" in found["retrieval_results"][0]["content"]
        assert messages["b"].status == "error" and "Existing knowledge bases: demo" in messages["b"].content
        assert json.loads(messages["c"].content)[0]["name"] == "demo"


@pytest.fixture
def page_server():
    """A loopback HTTP server serving tests/data/kb."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(KB_DATA))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_cli_ingests_lists_searches_and_reports_errors(pg_schema, pg_uri, page_server):
    env = {**os.environ, "POSTGRES_URI": pg_uri, "POSTGRES_SCHEMA": pg_schema, "WEB_ALLOW_LOOPBACK": "1"}
    url = f"{page_server}/otters.html"
    ingested = cli("ingest", "demo", str(KB_DATA), url, "--description", "CLI fixtures", env=env)
    assert ingested.returncode == 0, ingested.stderr
    assert "knowledge base demo: 6 documents" in ingested.stdout
    assert f"created       3 chunks  html     {url}  (Sea otters)" in ingested.stdout
    assert "skipped   unsupported file type:" in ingested.stdout

    listed = cli("list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    (kb,) = json.loads(listed.stdout)
    assert (kb["name"], kb["description"], kb["documents"]) == ("demo", "CLI fixtures", 6)
    assert kb["chunks"] == count_chunks(pg_uri, pg_schema, "demo")[0]

    found = cli("search", "demo", "form for leave requests", "--strategy", "keyword", "--top-k", "2", "--json", env=env)
    assert found.returncode == 0, found.stderr
    top = json.loads(found.stdout)["retrieval_results"][0]
    assert top["source"] == "handbook.pdf" and top["page"] == 1  # the file name: no server path in results

    missing = cli("search", "nope", "anything", env=env)
    assert missing.returncode == 1 and "Existing knowledge bases: demo" in missing.stderr


def test_cli_ingests_a_pdf_url_and_reports_each_failed_source(pg_schema, pg_uri, page_server, tmp_path):
    env = {**os.environ, "POSTGRES_URI": pg_uri, "POSTGRES_SCHEMA": pg_schema, "WEB_ALLOW_LOOPBACK": "1"}
    pdf, missing, nowhere = f"{page_server}/handbook.pdf", f"{page_server}/missing.html", "/no/such/folder"
    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(b"%PDF-1.4 broken")
    ingested = cli("ingest", "mixed", str(KB_DATA / "nested"), pdf, missing, nowhere, str(damaged), env=env)
    # what went in is printed, each failed source with its reason, and a summary on stderr
    assert ingested.returncode == 1
    lines = ingested.stdout.splitlines()
    assert any(line.startswith("created") and line.endswith(f"pdf      {pdf}  (Staff Handbook)") for line in lines), (
        ingested.stdout
    )
    assert any(line.startswith("created") and str(KB_DATA / "nested" / "faq.md") in line for line in lines)
    assert f"skipped   unsupported file type: {KB_DATA / 'nested' / 'ignored.csv'}" in lines
    assert f"failed    {missing}: Could not fetch {missing}:" in ingested.stdout
    assert f"failed    {nowhere}: No such file or folder: {nowhere}" in ingested.stdout
    assert f"failed    {damaged}: Could not read the PDF" in ingested.stdout
    assert ingested.stderr.strip().splitlines()[-1] == (
        f"error: 3 source(s) failed ({missing}, {nowhere}, {damaged}); 2 document(s) from the others were ingested"
    )
    listed = json.loads(cli("list", "--json", env=env).stdout)
    assert [(kb["name"], kb["documents"]) for kb in listed] == [("mixed", 2)]
    found = cli("search", "mixed", "form for leave requests", "--json", env=env)
    assert json.loads(found.stdout)["retrieval_results"][0]["source"] == pdf
    assert found.stderr == ""  # no progress bars or warnings around the answer

    # the JSON output carries the same per-source outcome
    again = cli("ingest", "mixed", pdf, missing, "--json", env=env)
    outcome = json.loads(again.stdout)
    assert again.returncode == 1 and [d["status"] for d in outcome["documents"]] == ["unchanged"]
    assert [f["source"] for f in outcome["failed"]] == [missing]


async def test_cli_deletes_one_memory_and_forgets_a_user(pg_schema, pg_uri):
    from store import memory

    async with store() as pg_store:
        kept = await memory.save_memory(pg_store, "erin", "semantic", "Erin keeps bees", category="fact")
        dropped = await memory.save_memory(pg_store, "erin", "episodic", "Erin visited Oslo in May")
        await memory.record_chat_message(pg_store, "erin", "user", "I keep bees", "t1")
        other = await memory.save_memory(pg_store, "erin.x", "semantic", "Someone else keeps bees")
    env = {**os.environ, "POSTGRES_URI": pg_uri, "POSTGRES_SCHEMA": pg_schema}

    deleted = cli("delete-memory", "erin", dropped["id"], env=env)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == f"deleted episodic memory {dropped['id']}"
    # another user's memory id is not this user's to delete
    foreign = cli("delete-memory", "erin", other["id"], "--json", env=env)
    assert json.loads(foreign.stdout) == {"id": other["id"], "deleted": False, "kind": None}

    rows = f"SELECT key FROM {pg_schema}.store WHERE prefix LIKE %s ORDER BY key"
    remaining = [r[0] for r in sql(pg_uri, rows, ("memories.erin.%",))]
    assert len(remaining) == 2 and kept["id"] in remaining  # the fact and the chat message
    forgot = cli("forget-user", "erin", env=env)
    assert forgot.returncode == 0 and forgot.stdout.strip() == "forgot user erin: 2 items deleted"
    assert sql(pg_uri, rows, ("memories.erin.%",)) == []
    assert [r[0] for r in sql(pg_uri, rows, ("memories.erin%2Ex.%",))] == [other["id"]]

    bad = cli("forget-user", "", env=env)
    assert bad.returncode == 1 and "user_id must be a non-empty string" in bad.stderr
