"""Knowledge bases on InMemoryStore with the real local embeddings: ingest, re-ingest, retrieval."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore

from store import knowledge
from store.embeddings import get_embeddings
from store.knowledge import KBExistsError, KBUnknownError
from tools.errors import ToolError, ToolInputError
from tools.knowledge import KNOWLEDGE_TOOLS, knowledge_base_search, list_knowledge_bases

ROOT = Path(__file__).resolve().parents[2]
KB_DATA = ROOT / "tests" / "data" / "kb"

HANDBOOK_TITLE = "Staff Handbook"
HANDBOOK_PAGES = [
    [
        "Staff Handbook",
        "Annual leave: every employee receives twenty-five days of paid leave per year.",
        "Leave requests go through form HR-2209 at least two weeks in advance.",
    ],
    [
        "Expenses",
        "Travel expenses are reimbursed within 30 days when the receipts are attached.",
        "Book conference travel on cost centre QP-118.",
    ],
]


def make_pdf(pages: list[list[str]], title: str | None = None) -> bytes:
    """A minimal valid PDF: one Helvetica text line per string, one page per list."""

    def escape(line: str) -> str:
        return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    page_ids = [4 + 2 * i for i in range(len(pages))]
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(f'{i} 0 R' for i in page_ids)}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for page_id, lines in zip(page_ids, pages, strict=False):
        text = "".join(f"({escape(line)}) Tj T* " for line in lines)
        stream = f"BT /F1 11 Tf 14 TL 72 760 Td {text}ET".encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {page_id + 1} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    info = ""
    if title:
        objects.append(f"<< /Title ({escape(title)}) >>".encode("latin-1"))
        info = f" /Info {len(objects)} 0 R"
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\n".encode()
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def new_store() -> InMemoryStore:
    return InMemoryStore(index={"dims": 384, "embed": get_embeddings(), "fields": ["content"]})


async def all_chunks(store, kb: str) -> list:
    return await store.asearch(knowledge.chunk_namespace(kb), limit=10_000)


@pytest.fixture(scope="module")
async def demo():
    """The tests/data/kb folder ingested once into an InMemoryStore knowledge base `demo`."""
    store = new_store()
    await knowledge.create_kb(store, "demo", "fixture documents")
    result = await knowledge.ingest_path(store, "demo", KB_DATA)
    return store, result


# --- names, registry, errors -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["edu", "movie", "a", "kb_2-x", "z" * 64])
def test_valid_names(name):
    assert knowledge.validate_kb_name(name) == name


@pytest.mark.parametrize("name", ["", "Edu", "with space", "dot.ted", "z" * 65, "é", None])
def test_invalid_names(name):
    with pytest.raises(ValueError, match="Invalid knowledge base name"):
        knowledge.validate_kb_name(name)


async def test_registry_create_list_delete():
    store = new_store()
    edu = await knowledge.create_kb(store, "edu", "courses")
    await knowledge.create_kb(store, "movie")
    assert edu["documents"] == 0 and edu["chunks"] == 0 and edu["description"] == "courses"
    assert [kb["name"] for kb in await knowledge.list_kbs(store)] == ["edu", "movie"]
    with pytest.raises(KBExistsError):
        await knowledge.create_kb(store, "edu")
    again = await knowledge.create_kb(store, "edu", "new description", exist_ok=True)
    assert again["created_at"] == edu["created_at"] and again["description"] == "new description"
    await knowledge.ingest_text(store, "edu", "Photosynthesis happens in chloroplasts.", "bio.txt")
    deleted = await knowledge.delete_kb(store, "edu")
    assert deleted == {"name": "edu", "documents": 1, "chunks": 1}
    assert [kb["name"] for kb in await knowledge.list_kbs(store)] == ["movie"]
    assert await all_chunks(store, "edu") == []
    assert await store.asearch(knowledge.document_namespace("edu")) == []


async def test_unknown_kb_lists_existing_ones():
    store = new_store()
    with pytest.raises(KBUnknownError, match="none yet"):
        await knowledge.retrieve(store, "edu", "anything")
    await knowledge.create_kb(store, "movie")
    await knowledge.create_kb(store, "edu")
    with pytest.raises(KBUnknownError) as caught:
        await knowledge.retrieve(store, "books", "anything")
    assert caught.value.existing == ["edu", "movie"]
    assert "Existing knowledge bases: edu, movie" in str(caught.value)
    assert isinstance(caught.value, ValueError)
    for call in (
        knowledge.ingest_text(store, "books", "x", "x.txt"),
        knowledge.ingest_path(store, "books", KB_DATA),
        knowledge.delete_kb(store, "books"),
    ):
        with pytest.raises(KBUnknownError):
            await call


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": "   "}, "query must be a non-empty string"),
        ({"top_k": 0}, "top_k must be an integer from 1 to 50"),
        ({"top_k": 51}, "top_k must be an integer from 1 to 50"),
        ({"top_k": True}, "top_k must be an integer"),
        ({"strategy": "fuzzy"}, "Unknown strategy 'fuzzy'"),
    ],
)
async def test_retrieval_argument_errors(demo, kwargs, message):
    store, _ = demo
    arguments = {"query": "otters", "top_k": 5, "strategy": "hybrid", **kwargs}
    with pytest.raises(ValueError, match=message):
        await knowledge.retrieve(
            store, "demo", arguments["query"], strategy=arguments["strategy"], top_k=arguments["top_k"]
        )


async def test_a_damaged_file_in_a_folder_does_not_stop_the_others(tmp_path):
    store = new_store()
    await knowledge.create_kb(store, "edu")
    (tmp_path / "a-broken.pdf").write_bytes(b"%PDF-1.4 broken")
    (tmp_path / "b-notes.md").write_text("# Notes\n\nThe copper lantern glows teal at dusk.\n")
    result = await knowledge.ingest_path(store, "edu", tmp_path)
    assert [(d["source"], d["status"]) for d in result["documents"]] == [(str(tmp_path / "b-notes.md"), "created")]
    (failed,) = result["failed"]
    assert failed["source"] == str(tmp_path / "a-broken.pdf") and "Could not read the PDF" in failed["error"]
    assert (await knowledge.get_kb(store, "edu"))["documents"] == 1


async def test_ingest_errors(tmp_path):
    store = new_store()
    await knowledge.create_kb(store, "edu")
    (tmp_path / "table.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="Unsupported file type '.csv'"):
        await knowledge.ingest_path(store, "edu", tmp_path / "table.csv")
    with pytest.raises(FileNotFoundError):
        await knowledge.ingest_path(store, "edu", tmp_path / "missing.md")
    with pytest.raises(ValueError, match="Unknown format 'docx'"):
        await knowledge.ingest_text(store, "edu", "text", "a.docx", format="docx")
    with pytest.raises(ValueError, match="source must be a non-empty string"):
        await knowledge.ingest_text(store, "edu", "text", " ")
    with pytest.raises(ValueError, match="Could not read the PDF"):
        await knowledge.ingest_bytes(store, "edu", b"%PDF-1.4 broken", "bad.pdf", "pdf")
    with pytest.raises(ValueError, match="chunk_overlap < chunk_size"):
        await knowledge.ingest_text(store, "edu", "text", "a.txt", chunk_size=100, chunk_overlap=100)
    with pytest.raises(ValueError, match="repeated: a.txt"):
        await knowledge.ingest_texts(store, "edu", [{"text": "x", "source": "a.txt"}, {"text": "y", "source": "a.txt"}])
    with pytest.raises(ValueError, match="use ingest_bytes for PDFs"):
        await knowledge.ingest_texts(store, "edu", [{"text": "x", "source": "a.pdf", "format": "pdf"}])
    assert await all_chunks(store, "edu") == []


async def test_ingest_texts_writes_many_documents_in_order():
    store = new_store()
    await knowledge.create_kb(store, "edu")
    documents = [
        {"text": f"# Lesson {i}\n\nLesson {i} covers topic {i}.", "source": f"lesson-{i}.md", "format": "markdown"}
        for i in range(30)
    ]
    documents.append(
        {
            "text": "<html><body><article><p>An HTML lesson about tides and the Moon.</p></article></body></html>",
            "source": "https://example.org/tides",
            "format": "html",
        }
    )
    results = await knowledge.ingest_texts(store, "edu", documents)
    assert [r["source"] for r in results] == [d["source"] for d in documents]
    assert [r["title"] for r in results[:2]] == ["Lesson 0", "Lesson 1"] and results[-1]["title"] == "tides"
    assert all(r["status"] == "created" and r["chunks"] == 1 for r in results)
    entry = await knowledge.get_kb(store, "edu")
    assert (entry["documents"], entry["chunks"]) == (31, 31) == (31, len(await all_chunks(store, "edu")))


# --- chunking, ids, re-ingest --------------------------------------------------------------------


def long_text(paragraphs: int) -> str:
    return "\n\n".join(
        f"Paragraph {i} describes exhibit number {i} of the museum in a sentence long enough to count."
        for i in range(paragraphs)
    )


async def test_chunk_ids_are_stable_across_stores_and_positions_are_sequential():
    ids = []
    for _ in range(2):
        store = new_store()
        await knowledge.create_kb(store, "edu")
        await knowledge.ingest_text(store, "edu", long_text(12), "museum.txt", chunk_size=200, chunk_overlap=0)
        items = sorted(await all_chunks(store, "edu"), key=lambda item: item.value["position"])
        ids.append([item.key for item in items])
        assert [item.value["position"] for item in items] == list(range(len(items)))
        assert [item.key for item in items] == [knowledge.chunk_id("edu", "museum.txt", i) for i in range(len(items))]
    assert ids[0] == ids[1] and len(ids[0]) > 3
    assert (
        len(
            {
                knowledge.chunk_id("edu", "a", 0),
                knowledge.chunk_id("edu", "a", 1),
                knowledge.chunk_id("edu", "b", 0),
                knowledge.chunk_id("movie", "a", 0),
            }
        )
        == 4
    )


async def test_reingest_replaces_chunks_and_keeps_counts_right():
    store = new_store()
    await knowledge.create_kb(store, "edu")
    first = await knowledge.ingest_text(store, "edu", long_text(12), "museum.txt", chunk_size=200, chunk_overlap=0)
    await knowledge.ingest_text(store, "edu", "A different document about trains.", "trains.txt")
    assert first["status"] == "created" and first["chunks"] > 3

    same = await knowledge.ingest_text(store, "edu", long_text(12), "museum.txt", chunk_size=200, chunk_overlap=0)
    assert same["status"] == "unchanged"

    shorter = await knowledge.ingest_text(store, "edu", long_text(3), "museum.txt", chunk_size=200, chunk_overlap=0)
    assert shorter["status"] == "updated"
    assert shorter["removed"] == first["chunks"] - shorter["chunks"]
    museum = [item for item in await all_chunks(store, "edu") if item.value["source"] == "museum.txt"]
    assert sorted(item.value["position"] for item in museum) == list(range(shorter["chunks"]))
    assert all("exhibit number 11" not in item.value["content"] for item in museum)

    entry = (await knowledge.list_kbs(store))[0]
    assert entry["documents"] == 2
    assert entry["chunks"] == shorter["chunks"] + 1 == len(await all_chunks(store, "edu"))
    assert entry["characters"] == sum(len(item.value["content"]) for item in await all_chunks(store, "edu"))

    # a new version must be searchable with its new text, the old text gone
    result = await knowledge.keyword_search(store, "edu", "exhibit 11", top_k=10)
    assert all("exhibit number 11" not in r["content"] for r in result["retrieval_results"])


def test_markdown_chunks_carry_sections_and_headings():
    text = (KB_DATA / "greenhouse.md").read_text()
    chunks = knowledge.chunk_text(text, "markdown", chunk_size=300, chunk_overlap=0)
    sections = [chunk.section for chunk in chunks]
    assert sections[0] == "Greenhouse Irrigation Guide"
    assert "Greenhouse Irrigation Guide > Controller codes" in sections
    assert sections[-1] == "Greenhouse Irrigation Guide > Controller codes > Winter schedule"
    code_chunk = next(chunk for chunk in chunks if "ZX-4471" in chunk.content)
    assert code_chunk.content.startswith("## Controller codes")
    assert [chunk.position for chunk in chunks] == list(range(len(chunks)))
    assert all(len(chunk.content) <= 300 for chunk in chunks)


def test_committed_pdf_fixture_is_the_generated_one():
    assert (KB_DATA / "handbook.pdf").read_bytes() == make_pdf(HANDBOOK_PAGES, HANDBOOK_TITLE)


async def test_pdf_chunks_carry_page_numbers():
    store = new_store()
    await knowledge.create_kb(store, "edu")
    pages = [[f"Page {p} line {i}: the archive keeps record {p * 100 + i} here." for i in range(6)] for p in (1, 2, 3)]
    result = await knowledge.ingest_bytes(
        store, "edu", make_pdf(pages, "Archive Index"), "archive.pdf", "pdf", chunk_size=150, chunk_overlap=0
    )
    assert result["title"] == "Archive Index" and result["format"] == "pdf"
    items = sorted(await all_chunks(store, "edu"), key=lambda item: item.value["position"])
    assert [item.value["position"] for item in items] == list(range(len(items)))
    assert {item.value["page"] for item in items} == {1, 2, 3}
    for item in items:
        assert f"Page {item.value['page']} line" in item.value["content"]
    pages_in_order = [item.value["page"] for item in items]
    assert pages_in_order == sorted(pages_in_order)


# --- each format through ingest_path ------------------------------------------------------------


async def test_folder_ingest_reads_every_format(demo):
    store, result = demo
    by_name = {Path(d["source"]).name: d for d in result["documents"]}
    assert set(by_name) == {"greenhouse.md", "lighthouse.txt", "otters.html", "handbook.pdf", "faq.md"}
    assert result["skipped"] == [str(KB_DATA / "nested" / "ignored.csv")]
    assert {name: d["format"] for name, d in by_name.items()} == {
        "greenhouse.md": "markdown",
        "lighthouse.txt": "text",
        "otters.html": "html",
        "handbook.pdf": "pdf",
        "faq.md": "markdown",
    }
    assert by_name["otters.html"]["title"] == "Sea otters"
    assert by_name["handbook.pdf"]["title"] == "Staff Handbook"
    assert by_name["faq.md"]["title"] == "Bicycle Repair FAQ"
    assert by_name["lighthouse.txt"]["title"] == "lighthouse"
    assert all(d["status"] == "created" and d["chunks"] >= 1 for d in result["documents"])

    values = [item.value for item in await all_chunks(store, "demo")]
    html_text = " ".join(v["content"] for v in values if v["format"] == "html")
    assert "dense fur coat" in html_text and "Copyright" not in html_text and "Birds" not in html_text
    pdf = [v for v in values if v["format"] == "pdf"]
    assert {v["page"] for v in pdf} == {1, 2}
    assert any("HR-2209" in v["content"] and v["page"] == 1 for v in pdf)
    assert all(v["page"] is None for v in values if v["format"] != "pdf")
    entry = await knowledge.get_kb(store, "demo")
    assert entry["documents"] == 5 and entry["chunks"] == len(values)

    again = await knowledge.ingest_path(store, "demo", KB_DATA)
    assert [d["status"] for d in again["documents"]] == ["unchanged"] * 5
    assert len(await all_chunks(store, "demo")) == len(values)


# --- retrieval -----------------------------------------------------------------------------------


def assert_contract(result: dict, strategy: str, top_k: int) -> None:
    assert result["strategy"] == strategy
    hits = result["retrieval_results"]
    assert 0 < len(hits) <= top_k
    assert [h["index"] for h in hits] == list(range(1, len(hits) + 1))
    assert [r["index"] for r in result["reference"]] == [h["index"] for h in hits]
    assert [r["id"] for r in result["reference"]] == [h["id"] for h in hits]
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    for hit in hits:
        assert {
            "id",
            "content",
            "score",
            "source",
            "title",
            "position",
            "page",
            "section",
            "strategy",
            "rank",
        } <= hit.keys()
        assert hit["strategy"] == strategy
        assert f"[{hit['index']}] {hit['title']} ({hit['source']}" in result["context"]
        assert hit["content"] in result["context"]


@pytest.mark.parametrize("strategy", knowledge.STRATEGIES)
async def test_every_strategy_returns_the_contract(demo, strategy):
    store, _ = demo
    result = await knowledge.retrieve(store, "demo", "how do sea otters open shellfish", strategy=strategy, top_k=3)
    assert_contract(result, strategy, 3)
    assert result["retrieval_results"][0]["title"] == "Sea otters"


async def test_keyword_finds_codes_and_hybrid_keeps_them(demo):
    store, _ = demo
    keyword = await knowledge.keyword_search(store, "demo", "what is ZX-4480", top_k=5)
    assert keyword["retrieval_results"][0]["title"] == "Greenhouse Irrigation Guide"
    assert "ZX-4480" in keyword["retrieval_results"][0]["content"]
    # only chunks sharing a query term are keyword hits
    assert all("zx" in r["content"].lower() or "4480" in r["content"] for r in keyword["retrieval_results"])
    hybrid = await knowledge.hybrid_search(store, "demo", "what is ZX-4480", top_k=5)
    top = hybrid["retrieval_results"][0]
    assert top["id"] == keyword["retrieval_results"][0]["id"]
    assert top["ranks"]["keyword"] == 1
    # the keyword score is the chunk's share of the query's BM25 ceiling, weighted 0.8
    # (KB_HYBRID_KEYWORD_WEIGHT), plus 0.2 x its min-max normalised dense score
    share = keyword["retrieval_results"][0]["score"]
    assert 0 < share <= 1
    dense_part = top["score"] - 0.8 * share
    assert -1e-6 <= dense_part <= 0.2 + 1e-6


async def test_dense_finds_paraphrases_keyword_cannot(demo):
    store, _ = demo
    query = "what sound device is used when the sea mist rolls in"  # the passage says "fog signal ... diaphone"
    dense = await knowledge.dense_search(store, "demo", query, top_k=2)
    assert dense["retrieval_results"][0]["title"] == "lighthouse"
    keyword = await knowledge.keyword_search(store, "demo", query, top_k=5)
    assert keyword["retrieval_results"] and all(r["title"] != "lighthouse" for r in keyword["retrieval_results"])
    hybrid = await knowledge.hybrid_search(store, "demo", query, top_k=5)
    assert "lighthouse" in [r["title"] for r in hybrid["retrieval_results"]]


async def test_keyword_with_only_stopwords_returns_nothing(demo):
    store, _ = demo
    result = await knowledge.keyword_search(store, "demo", "what is the", top_k=5)
    assert result["retrieval_results"] == [] and result["context"] == "" and result["reference"] == []


def test_reciprocal_rank_fusion_math():
    fused = dict(knowledge.reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60))
    assert math.isclose(fused["a"], 1 / 61 + 1 / 62)
    assert math.isclose(fused["b"], 1 / 62)
    assert math.isclose(fused["c"], 1 / 63 + 1 / 61)
    order = [doc for doc, _ in knowledge.reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]])]
    assert order == ["a", "c", "b"]
    assert knowledge.reciprocal_rank_fusion([["x"], ["y"]], k=1) == [("x", 0.5), ("y", 0.5)]


def test_bm25_matches_the_formula():
    documents = [("d1", "red apple red"), ("d2", "green apple"), ("d3", "blue sky")]
    ranked = dict(knowledge.bm25_rank("red apple", documents))
    assert set(ranked) == {"d1", "d2"}
    n, average = 3, (3 + 2 + 2) / 3

    def term(tf, df, length):
        return math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))

    def idf(df):
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    ceiling = (idf(1) + idf(2)) * 2.2  # the query's terms: red (df 1), apple (df 2)
    assert math.isclose(ranked["d1"], (term(2, 1, 3) + term(1, 2, 3)) / ceiling)
    assert math.isclose(ranked["d2"], term(1, 2, 2) / ceiling)
    assert knowledge.bm25_rank("the of", documents) == []


async def test_every_strategy_returns_a_repeated_text_once():
    store = new_store()
    await knowledge.create_kb(store, "chat")
    lines = ["Haha, classic."] * 8 + ["We adopted a beagle from the shelter.", "Haha, that dog is classic trouble."]
    for i, text in enumerate(lines):  # one call each: InMemoryStore cannot embed a batch with repeated texts
        await knowledge.ingest_text(store, "chat", text, f"turn-{i}")
    for strategy in ("dense", "keyword", "hybrid"):
        found = await knowledge.retrieve(store, "chat", "classic dog", strategy=strategy, top_k=10)
        contents = [r["content"] for r in found["retrieval_results"]]
        assert len(contents) == len(set(contents)) and "Haha, classic." in contents, strategy


async def test_dated_documents_and_a_date_in_the_query():
    store = new_store()
    await knowledge.create_kb(store, "diary")
    entries = [
        ("2023-05-02", "Went hiking in the hills with my brother."),
        ("2023-05-10T18:30:00+02:00", "Went hiking by the lake, saw a heron."),
        ("2023-06-20", "Went hiking in the rain and got soaked."),
    ]
    documents = [{"text": text, "source": f"day-{i}", "date": day} for i, (day, text) in enumerate(entries)]
    documents.append({"text": "Went hiking without a date.", "source": "undated"})
    await knowledge.ingest_texts(store, "diary", documents)
    by_source = {
        r["source"]: r for r in (await knowledge.retrieve(store, "diary", "hiking", top_k=10))["retrieval_results"]
    }
    assert by_source["day-1"]["date"] == "2023-05-10T16:30:00.000000+00:00"
    assert by_source["undated"]["date"] is None
    found = await knowledge.retrieve(store, "diary", "Where did I go hiking in the week of 8 May 2023?", top_k=4)
    assert found["retrieval_results"][0]["source"] == "day-1"
    assert found["retrieval_results"][0]["score"] >= 1.0  # the time bonus
    may = await knowledge.retrieve(store, "diary", "hiking in May 2023", top_k=4)
    assert {r["source"] for r in may["retrieval_results"][:2]} == {"day-0", "day-1"}
    with pytest.raises(ValueError, match="date='last spring' is not a valid date"):
        await knowledge.ingest_texts(store, "diary", [{"text": "x", "source": "bad", "date": "last spring"}])


# --- the tools through LangGraph's ToolNode ------------------------------------------------------


def tool_graph(store):
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(list(KNOWLEDGE_TOOLS), handle_tool_errors=True))
    builder.add_edge(START, "tools")
    return builder.compile(store=store)


def call(name: str, args: dict, call_id: str = "c1") -> dict:
    return {"messages": [AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])]}


async def test_tools_run_with_the_injected_store(demo):
    store, _ = demo
    graph = tool_graph(store)
    out = await graph.ainvoke(
        call("knowledge_base_search", {"query": "cost centre for conference travel", "kb": "demo", "top_k": 2})
    )
    message = out["messages"][-1]
    assert isinstance(message, ToolMessage) and message.status == "success"
    assert "QP-118" in message.content and '"reference"' in message.content
    out = await graph.ainvoke(call("list_knowledge_bases", {}))
    assert '"name": "demo"' in out["messages"][-1].content


async def test_tool_unknown_kb_is_an_input_error_listing_kbs(demo):
    store, _ = demo
    out = await tool_graph(store).ainvoke(call("knowledge_base_search", {"query": "otters", "kb": "nope"}))
    message = out["messages"][-1]
    assert message.status == "error"
    assert "Unknown knowledge base 'nope'" in message.content and "demo" in message.content


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"kb": "nope"}, "Existing knowledge bases: demo"),
        ({"kb": "Bad Name"}, "Invalid knowledge base name"),
        ({"top_k": 99}, "top_k must be an integer from 1 to 50"),
        ({"strategy": "semantic"}, "Unknown strategy"),
        ({"query": ""}, "query must be a non-empty string"),
    ],
)
async def test_tool_argument_errors_are_tool_input_errors(demo, args, message):
    store, _ = demo
    arguments = {"query": "otters", "kb": "demo", **args}
    with pytest.raises(ToolInputError, match=message):
        await knowledge_base_search(**arguments, runtime=SimpleNamespace(store=store))


async def test_tools_without_a_store_say_so():
    with pytest.raises(ToolError, match="No knowledge store"):
        await knowledge_base_search("otters", "demo", runtime=SimpleNamespace(store=None))
    with pytest.raises(ToolError, match="No knowledge store"):
        await list_knowledge_bases(runtime=None)


CHAT_LOG = [
    "Maya: Haha, classic.",
    "Maya: Tell me about it.",
    "Maya: Same here, honestly.",
    "Tom: The weather has been so grey lately.",
    "Tom: We finally adopted a kitten from the rescue, she hides under the sofa.",
    "Maya: We picked up a greyhound from the shelter on Saturday.",
    "Tom: Berlin was lovely in spring.",
    "Tom: My phone screen cracked again.",
    "Maya: I keep buying plants and forgetting to water them.",
    "Tom: The train was late again this morning.",
    "Maya: Did you watch the new season of that baking show?",
]


class QueryRecordingStore(InMemoryStore):
    """InMemoryStore that records the query of each search."""

    searched: list[str | None]

    async def asearch(self, *args, **kwargs):  # type: ignore[override]
        self.searched.append(kwargs.get("query"))
        return await super().asearch(*args, **kwargs)


async def test_names_most_chunks_hold_are_left_out_of_the_vector_search():
    store = QueryRecordingStore(index={"dims": 384, "embed": get_embeddings(), "fields": ["content"]})
    store.searched = []
    await knowledge.create_kb(store, "log")
    await knowledge.ingest_texts(store, "log", [{"text": t, "source": f"turn-{i}"} for i, t in enumerate(CHAT_LOG)])
    entry = await knowledge.get_kb(store, "log")
    query = "Which breed of dog did Maya bring home from the rescue center, and did Tom see Berlin?"
    assert await knowledge.common_names(store, "log", entry, query) == {"Maya", "Tom"}
    assert await knowledge.common_names(store, "log", entry, "Was Berlin nice, Maya?") == {"Maya"}
    for strategy in ("dense", "hybrid"):
        store.searched.clear()
        found = await knowledge.retrieve(store, "log", "What dog did Maya's family adopt?", strategy=strategy)
        assert "What dog did their family adopt?" in store.searched, strategy
        assert "What dog did Maya's family adopt?" not in store.searched, strategy
        assert found["retrieval_results"][0]["source"] == "turn-5", strategy


def test_hybrid_rank_adds_the_name_bonus_to_chunks_holding_a_common_name():
    from store.hybrid import Signals, rank
    from store.knowledge.search import Hit, kb_policy

    tom = Hit("t", {"content": "Tom: We adopted a kitten from the rescue.", "source": "t"}, 0.8)
    maya = Hit("m", {"content": "Maya: We adopted a greyhound from the shelter on Sunday.", "source": "m"}, 0.6)
    other = Hit("o", {"content": "Omar: The weather is grey.", "source": "o"}, 0.2)
    signals = Signals("", dense=[(h, h.score) for h in (tom, maya, other)], keyword=[], names={"Maya"})
    policy = kb_policy(knowledge.knowledge_config(), keyword_weight=0.0)
    plain = {r.item.key: r.score for r in rank(signals, replace(policy, name_weight=0.0))}
    boosted = rank(signals, replace(policy, name_weight=0.5))
    assert [r.item.key for r in rank(signals, replace(policy, name_weight=0.0))] == ["t", "m", "o"]
    assert [r.item.key for r in boosted] == ["m", "t", "o"]
    assert {r.item.key: r.score - plain[r.item.key] for r in boosted} == pytest.approx({"m": 0.5, "t": 0.0, "o": 0.0})


# --- who reads a knowledge base ------------------------------------------------------------------


async def test_a_users_private_knowledge_base_is_unknown_to_other_users():
    store = new_store()
    await knowledge.create_kb(store, "handbook", "the operator's")
    await knowledge.create_kb(store, "diary", "alice's private notes")
    await knowledge.create_kb(store, "recipes", "alice's recipes")
    for name in ("diary", "recipes"):
        entry = (await store.aget(knowledge.REGISTRY_NAMESPACE, name)).value
        await store.aput(knowledge.REGISTRY_NAMESPACE, name, {**entry, "owner": "alice"}, index=False)
    await knowledge.ingest_text(store, "diary", "The spare key hides under the blue flowerpot.", "diary.txt")
    assert (await knowledge.set_shared(store, "recipes", True))["shared"] is True

    def names(kbs):
        return [kb["name"] for kb in kbs]

    assert names(await knowledge.list_kbs(store)) == ["diary", "handbook", "recipes"]  # no reader: every one
    assert names(await knowledge.list_kbs(store, reader="alice")) == ["diary", "handbook", "recipes"]
    assert names(await knowledge.list_kbs(store, reader="bob")) == ["handbook", "recipes"]
    assert [kb["shared"] for kb in await knowledge.list_kbs(store)] == [False, True, True]
    assert (await knowledge.get_kb(store, "diary", reader="alice"))["owner"] == "alice"
    with pytest.raises(KBUnknownError) as unknown:
        await knowledge.get_kb(store, "diary", reader="bob")
    assert unknown.value.existing == ["handbook", "recipes"]  # told apart from nothing: no 'diary'
    with pytest.raises(KBUnknownError):
        await knowledge.retrieve(store, "diary", "spare key", strategy="keyword", reader="bob")
    found = await knowledge.retrieve(store, "diary", "spare key", strategy="keyword", reader="alice")
    assert "flowerpot" in found["context"]
    # an operator's knowledge base made private is for administrators only
    await knowledge.set_shared(store, "handbook", False)
    assert names(await knowledge.list_kbs(store, reader="bob")) == ["recipes"]


async def test_tools_read_the_knowledge_bases_of_the_runs_user():
    from langgraph.runtime import ServerInfo

    from tools.identity import ADMIN

    store = new_store()
    await knowledge.create_kb(store, "diary", "private")
    entry = (await store.aget(knowledge.REGISTRY_NAMESPACE, "diary")).value
    await store.aput(knowledge.REGISTRY_NAMESPACE, "diary", {**entry, "owner": "alice"}, index=False)
    await knowledge.ingest_text(store, "diary", "The spare key hides under the blue flowerpot.", "diary.txt")

    def runtime(identity: str, permissions=(), context_user: str = "anonymous"):
        user = SimpleNamespace(identity=identity, permissions=list(permissions))
        info = ServerInfo(assistant_id="a", graph_id="react", user=user)
        return SimpleNamespace(store=store, server_info=info, context=SimpleNamespace(user_id=context_user))

    bob = runtime("bob", context_user="alice")  # naming alice in the context changes nothing
    assert await list_knowledge_bases(runtime=bob) == []
    with pytest.raises(ToolInputError, match="Unknown knowledge base 'diary'"):
        await knowledge_base_search("spare key", "diary", strategy="keyword", runtime=bob)
    alice = runtime("alice")
    assert [kb["name"] for kb in await list_knowledge_bases(runtime=alice)] == ["diary"]
    assert (
        "flowerpot" in (await knowledge_base_search("spare key", "diary", strategy="keyword", runtime=alice))["context"]
    )
    # an administrator's run searches any by name, but lists (and is routed to) only the shared
    # ones and those of the user it acts for
    ops = runtime("ops", [ADMIN], context_user="carol")
    assert await list_knowledge_bases(runtime=ops) == []
    assert (
        "flowerpot" in (await knowledge_base_search("spare key", "diary", strategy="keyword", runtime=ops))["context"]
    )


# --- neighbours in hybrid search -----------------------------------------------------------------

SOURDOUGH = [
    "Maya: Did you ever get the sourdough starter going?",
    "Tom: Yes! Three so far, and the last one finally came out right.",
    "Maya: The weather has been so grey lately.",
    "Tom: Work has been crazy this week.",
    "Maya: I bought flour and yeast at the market.",
    "Tom: The bakery on the corner closed down.",
    "Maya: Bread prices went up again.",
    "Tom: My starter for the quiz night was a disaster.",
]


async def chat_log_kb(minutes_apart: list[int]) -> InMemoryStore:
    """SOURDOUGH as a knowledge base of one dated document per message."""
    store = new_store()
    await knowledge.create_kb(store, "log")
    at = datetime(2023, 6, 1, 9, tzinfo=UTC)
    documents = [
        {"text": text, "source": f"turn-{i}", "date": at + timedelta(minutes=minutes)}
        for i, (text, minutes) in enumerate(zip(SOURDOUGH, minutes_apart, strict=True))
    ]
    await knowledge.ingest_texts(store, "log", documents)
    return store


async def test_a_reply_in_a_chat_log_kb_is_found_through_the_message_it_answers(monkeypatch):
    # The reply (turn-1) says nothing of the topic; the document dated just before it does.
    # Ingested without its exchange passage (the question and it), which alone would find it.
    monkeypatch.setattr("store.knowledge.ingest.exchange", lambda *args: None)
    store = await chat_log_kb([0, 1, 2, 3, 4, 5, 6, 7])
    question = "Did the sourdough starter work out?"
    monkeypatch.setenv("KB_NEIGHBOUR_WEIGHT", "0.9")
    found = await knowledge.hybrid_search(store, "log", question, top_k=3)
    assert [r["source"] for r in found["retrieval_results"][:2]] == ["turn-0", "turn-1"]
    monkeypatch.setenv("KB_NEIGHBOUR_WEIGHT", "0")
    alone = await knowledge.hybrid_search(store, "log", question, top_k=3)
    assert "turn-1" not in [r["source"] for r in alone["retrieval_results"][:2]]


async def test_a_reply_in_a_chat_log_kb_is_also_embedded_with_the_question_it_answers(monkeypatch):
    monkeypatch.setenv("KB_NEIGHBOUR_WEIGHT", "0")  # no neighbours: the reply's own vectors
    store = await chat_log_kb([0, 1, 2, 3, 4, 5, 6, 7])
    chunks = {item.value["source"]: item.value for item in await store.asearch(("kb", "log"), limit=20)}
    assert chunks["turn-1"]["exchange"] == f"{SOURDOUGH[0]} {SOURDOUGH[1]}"
    assert [source for source, value in chunks.items() if "exchange" in value] == ["turn-1"]  # no other answers
    question = "Did the sourdough starter work out?"
    found = await knowledge.hybrid_search(store, "log", question, top_k=3)
    assert "turn-1" in [r["source"] for r in found["retrieval_results"][:2]]
    assert all("exchange" not in r for r in found["retrieval_results"])
    apart = await chat_log_kb([0, *(2 * 24 * 60 + minute for minute in range(7))])  # answered two days later
    chunks = {item.value["source"]: item.value for item in await apart.asearch(("kb", "log"), limit=20)}
    assert not any("exchange" in value for value in chunks.values())


async def test_a_message_sent_in_parts_in_a_chat_log_kb_is_one_passage(monkeypatch):
    # Maya's question, then Tom's answer sent in three lines within a minute, then small talk.
    log = [
        ("Maya: What did you end up calling the kitten?", 0),
        ("Tom: Mochi", 1),
        ("Tom: after the rice cake lol", 1.3),
        ("Tom: she loves the sofa", 1.6),
        ("Maya: The weather has been so grey lately.", 30),
        ("Tom: Work has been crazy this week.", 31),
        ("Maya: My sister adopted a kitten too.", 60),
    ]
    store = new_store()
    await knowledge.create_kb(store, "log")
    at = datetime(2023, 6, 1, 9, tzinfo=UTC)
    documents = [
        {"text": text, "source": f"turn-{i}", "date": at + timedelta(minutes=minutes)}
        for i, (text, minutes) in enumerate(log)
    ]
    await knowledge.ingest_texts(store, "log", documents)
    found = await knowledge.hybrid_search(store, "log", "What is the name of Tom's kitten?", top_k=4)
    results = found["retrieval_results"]
    sources = [r["source"] for r in results]
    assert len(set(sources) & {"turn-1", "turn-2", "turn-3"}) == 1  # one place for the three lines
    [message] = [r for r in results if r["source"] in {"turn-1", "turn-2", "turn-3"}]
    assert [part["source"] for part in message["parts"]] == ["turn-1", "turn-2", "turn-3"]
    assert [part["content"] for part in message["parts"]] == [text for text, _ in log[1:4]]
    assert "Tom: Mochi\nTom: after the rice cake lol\nTom: she loves the sofa" in found["context"]
    assert not any("parts" in r for r in results if r is not message)


async def test_documents_dated_far_apart_are_not_neighbours(monkeypatch):
    # The same log, but the reply (the next document) was written two days after the question.
    store = await chat_log_kb([0, *(2 * 24 * 60 + minute for minute in range(7))])
    monkeypatch.setenv("KB_NEIGHBOUR_WEIGHT", "0.9")
    found = await knowledge.hybrid_search(store, "log", "Did the sourdough starter work out?", top_k=3)
    assert "turn-1" not in [r["source"] for r in found["retrieval_results"][:2]]


async def test_kb_neighbours_are_a_documents_chunks_and_the_documents_dated_next_to_it():
    from store.backend import backend_for
    from store.knowledge.registry import chunk_namespace

    store = new_store()
    await knowledge.create_kb(store, "mixed")
    at = datetime(2023, 6, 1, 9, tzinfo=UTC)
    long = " ".join(f"Paragraph {i} talks about topic number {i} at some length." for i in range(60))
    await knowledge.ingest_texts(
        store,
        "mixed",
        [
            {"text": long, "source": "manual"},
            {"text": "The first dated note.", "source": "b-note", "date": at},
            {"text": "The second dated note.", "source": "a-note", "date": at + timedelta(minutes=1)},
            {"text": "The third dated note.", "source": "c-note", "date": at + timedelta(minutes=2)},
        ],
        chunk_size=200,
        chunk_overlap=0,
    )
    chunks = {(item.value["source"], item.value["position"]): item.key for item in await all_chunks(store, "mixed")}
    assert ("manual", 2) in chunks
    found = await backend_for(store).kb_neighbours(
        chunk_namespace("mixed"), [chunks[("manual", 1)], chunks[("a-note", 0)], chunks[("manual", 0)]], 1
    )
    assert {key: [item.key for item in items] for key, items in found.items()} == {
        chunks[("manual", 1)]: [chunks[("manual", 0)], chunks[("manual", 2)]],
        chunks[("a-note", 0)]: [chunks[("b-note", 0)], chunks[("c-note", 0)]],  # by date, not by name
        chunks[("manual", 0)]: [chunks[("manual", 1)]],  # undated: its own document only
    }


def test_shown_source_names_a_server_file_by_its_file_name_only():
    from store.knowledge.parse import shown_source

    assert shown_source("/srv/data/hr/leave policy.md") == "leave policy.md"
    assert shown_source("file:///srv/data/a.pdf") == "a.pdf"
    assert shown_source("~/notes/b.txt") == "b.txt"
    assert shown_source("C:\\Users\\ops\\kb\\c.html") == "c.html"
    assert shown_source("https://example.org/x/y.md") == "https://example.org/x/y.md"
    assert shown_source("manuals/pump care.md") == "manuals/pump care.md"  # a caller's own name
    assert shown_source(shown_source("/srv/a.md")) == "a.md"


async def test_a_kb_document_telling_of_a_day_later_gets_that_days_bonus(monkeypatch):
    """Dated chat-log documents: the one written the day after, telling of the day asked about
    ("Yesterday I went bowling"), is found by the day's bonus as one written that day would be."""
    monkeypatch.setenv("KB_NEIGHBOUR_WEIGHT", "0")
    store = new_store()
    await knowledge.create_kb(store, "jo")
    said = [
        ("Jo: We went to the cinema with friends, such a fun evening out.", datetime(2022, 3, 10, tzinfo=UTC)),
        ("Jo: Yesterday I went bowling with friends, such fun, two strikes!", datetime(2022, 3, 17, 10, tzinfo=UTC)),
        ("Jo: We spent the whole day hiking in the hills, what fun.", datetime(2022, 3, 20, tzinfo=UTC)),
        ("Jo: Played a fun board game night with the neighbours.", datetime(2022, 4, 20, tzinfo=UTC)),
    ]
    await knowledge.ingest_texts(
        store, "jo", [{"text": text, "source": f"turn-{i}", "date": at} for i, (text, at) in enumerate(said)]
    )
    query = "What fun activity did Jo do on 16 March 2022?"
    found = await knowledge.hybrid_search(store, "jo", query, top_k=4)
    assert found["retrieval_results"][0]["source"] == "turn-1"
    monkeypatch.setattr("store.hybrid.tells_of", lambda text, written, window: window[0] <= written < window[1])
    dated_only = await knowledge.hybrid_search(store, "jo", query, top_k=4)
    assert dated_only["retrieval_results"][0]["source"] != "turn-1"
