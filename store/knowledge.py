"""Knowledge bases in the LangGraph store: named collections of chunked documents, searched
dense (vectors), keyword (BM25) or hybrid (reciprocal rank fusion of the two).

Layout in the store (any `BaseStore`; `AsyncPostgresStore` in production):

- `("kb_registry",)` / `<name>`: one item per knowledge base (description, created_at,
  updated_at, document/chunk/character counts, embeddings model). Not embedded.
- `("kb_docs", <name>)` / `sha256(source)`: one record per ingested document (source, title,
  format, chunk count, fingerprint of its chunks). Not embedded.
- `("kb", <name>)` / `chunk id`: one item per chunk, `content` embedded for dense search.

Chunk ids are `sha256(kb, source, position)`: stable across runs for the same document and
chunking settings. Re-ingesting a source overwrites positions 0..n-1 and deletes the positions
the old version had beyond n, so a source's chunks are replaced, never duplicated; a document
whose chunks are unchanged is skipped (nothing re-embedded).

Keyword search is BM25. On `AsyncPostgresStore` it runs in SQL over Postgres full-text search
(`to_tsvector` on the chunk content, backed by a GIN expression index on the store table, with
document frequencies counted over the matching chunks); on other stores (InMemoryStore in tests)
it is computed in process over the knowledge base's chunks.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import io
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, GetOp, PutOp

from store.clean import strip_nul

REGISTRY_NAMESPACE = ("kb_registry",)
CHUNK_NAMESPACE_ROOT = "kb"
DOCUMENT_NAMESPACE_ROOT = "kb_docs"
STRATEGIES = ("dense", "keyword", "hybrid")
MAX_TOP_K = 50
RRF_K = 60
BM25_K1 = 1.2
BM25_B = 0.75
PAGE_SIZE = 500
PUT_BATCH = 128
GROUP_CHUNKS = 512
GROUP_DOCUMENTS = 256

FORMAT_BY_EXTENSION = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
FORMAT_BY_MEDIA_TYPE = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
}
TEXT_FORMATS = ("text", "markdown", "html")

_KB_NAME = re.compile(r"[a-z0-9_-]{1,64}")
_TS_CONFIG = re.compile(r"[a-z_]{1,63}")
_MARKDOWN_HEADERS = [("#", "h1"), ("##", "h2"), ("###", "h3")]


class KBUnknownError(ValueError):
    """The named knowledge base does not exist; the message lists the ones that do."""

    def __init__(self, name: str, existing: Sequence[str]) -> None:
        self.name = name
        self.existing = list(existing)
        known = ", ".join(self.existing) if self.existing else "none yet"
        super().__init__(f"Unknown knowledge base {name!r}. Existing knowledge bases: {known}.")


class KBExistsError(ValueError):
    """create_kb was asked to create a knowledge base that already exists."""


@dataclass(frozen=True)
class KnowledgeConfig:
    chunk_size: int
    chunk_overlap: int
    text_search_config: str


def knowledge_config() -> KnowledgeConfig:
    """Read chunking and full-text settings from the environment (at call time)."""
    config = KnowledgeConfig(
        chunk_size=int(os.environ.get("KB_CHUNK_SIZE", "800")),
        chunk_overlap=int(os.environ.get("KB_CHUNK_OVERLAP", "120")),
        text_search_config=os.environ.get("KB_TEXT_SEARCH_CONFIG", "english").strip() or "english",
    )
    if not _TS_CONFIG.fullmatch(config.text_search_config):
        raise ValueError(f"KB_TEXT_SEARCH_CONFIG={config.text_search_config!r} is not a text search configuration name")
    return config


@dataclass(frozen=True)
class Chunk:
    """One piece of a document: its text and where it sits (chunk index, PDF page, section)."""

    content: str
    position: int
    page: int | None = None
    section: str | None = None


# --- names and the registry -------------------------------------------------------------------


def validate_kb_name(name: str) -> str:
    """Return `name` if it is a valid knowledge base name (lowercase [a-z0-9_-], 1-64 chars)."""
    if not isinstance(name, str) or not _KB_NAME.fullmatch(name):
        raise ValueError(
            f"Invalid knowledge base name {name!r}: use 1-64 characters from lowercase a-z, 0-9, '_' and '-'."
        )
    return name


def chunk_namespace(kb: str) -> tuple[str, str]:
    """The store namespace holding a knowledge base's chunks."""
    return (CHUNK_NAMESPACE_ROOT, kb)


def document_namespace(kb: str) -> tuple[str, str]:
    """The store namespace holding a knowledge base's document records."""
    return (DOCUMENT_NAMESPACE_ROOT, kb)


def chunk_id(kb: str, source: str, position: int) -> str:
    """The stable id of the chunk at `position` of `source` in `kb`."""
    return hashlib.sha256(f"{kb}\n{source}\n{position}".encode()).hexdigest()[:32]


def document_key(source: str) -> str:
    """The key of a source's document record."""
    return hashlib.sha256(source.encode()).hexdigest()[:32]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


async def _search_all(store: BaseStore, namespace: tuple[str, ...]) -> list:
    items, offset = [], 0
    while True:
        page = await store.asearch(namespace, limit=PAGE_SIZE, offset=offset)
        items.extend(page)
        if len(page) < PAGE_SIZE:
            return items
        offset += PAGE_SIZE


async def list_kbs(store: BaseStore) -> list[dict]:
    """Every knowledge base's registry entry, sorted by name."""
    items = await _search_all(store, REGISTRY_NAMESPACE)
    return sorted((dict(item.value) for item in items), key=lambda kb: kb["name"])


async def get_kb(store: BaseStore, name: str) -> dict:
    """The registry entry of `name`; KBUnknownError (listing the existing ones) if there is none."""
    validate_kb_name(name)
    item = await store.aget(REGISTRY_NAMESPACE, name)
    if item is None:
        raise KBUnknownError(name, [kb["name"] for kb in await list_kbs(store)])
    return dict(item.value)


async def create_kb(store: BaseStore, name: str, description: str = "", *, exist_ok: bool = False) -> dict:
    """Register a knowledge base and return its entry.

    With `exist_ok`, an existing entry is returned (its description replaced when a non-empty
    one is given); otherwise an existing name raises KBExistsError.
    """
    validate_kb_name(name)
    item = await store.aget(REGISTRY_NAMESPACE, name)
    if item is not None:
        if not exist_ok:
            raise KBExistsError(f"Knowledge base {name!r} already exists.")
        entry = dict(item.value)
        if description and description != entry.get("description"):
            entry.update(description=description, updated_at=_now())
            await store.aput(REGISTRY_NAMESPACE, name, entry, index=False)
    else:
        from store.embeddings import embeddings_spec

        now = _now()
        entry = {
            "name": name,
            "description": description,
            "created_at": now,
            "updated_at": now,
            "documents": 0,
            "chunks": 0,
            "characters": 0,
            "embeddings_model": embeddings_spec().model,
        }
        await store.aput(REGISTRY_NAMESPACE, name, entry, index=False)
    await ensure_keyword_index(store)
    return entry


async def _delete_namespace(store: BaseStore, namespace: tuple[str, ...]) -> int:
    deleted = 0
    while True:
        page = await store.asearch(namespace, limit=PAGE_SIZE)
        if not page:
            return deleted
        await store.abatch([PutOp(item.namespace, item.key, None) for item in page])
        deleted += len(page)


async def delete_kb(store: BaseStore, name: str) -> dict:
    """Delete a knowledge base: its chunks, document records and registry entry.

    Returns {"name", "documents", "chunks"} with the numbers of items deleted.
    """
    await get_kb(store, name)
    chunks = await _delete_namespace(store, chunk_namespace(name))
    documents = await _delete_namespace(store, document_namespace(name))
    await store.adelete(REGISTRY_NAMESPACE, name)
    return {"name": name, "documents": documents, "chunks": chunks}


async def _refresh_stats(store: BaseStore, name: str) -> dict:
    """Recount the registry entry's totals from the document records."""
    records = [item.value for item in await _search_all(store, document_namespace(name))]
    item = await store.aget(REGISTRY_NAMESPACE, name)
    entry = dict(item.value) if item else {"name": name, "description": "", "created_at": _now()}
    entry.update(
        documents=len(records),
        chunks=sum(r["chunks"] for r in records),
        characters=sum(r["characters"] for r in records),
        updated_at=_now(),
    )
    await store.aput(REGISTRY_NAMESPACE, name, entry, index=False)
    return entry


# --- parsing and chunking ---------------------------------------------------------------------


def _splitter(chunk_size: int, chunk_overlap: int):
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if chunk_size < 50 or not 0 <= chunk_overlap < chunk_size:
        raise ValueError(
            f"Chunking needs chunk_size >= 50 and 0 <= chunk_overlap < chunk_size (got {chunk_size}, {chunk_overlap})."
        )
    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def chunk_text(text: str, format: str, *, chunk_size: int, chunk_overlap: int) -> list[Chunk]:
    """Split plain text (recursively) or markdown (by #/##/### headings, then recursively).

    Markdown chunks keep their heading lines and carry a `section` path like "Guide > Setup".
    """
    splitter = _splitter(chunk_size, chunk_overlap)
    if format == "markdown":
        from langchain_text_splitters import MarkdownHeaderTextSplitter

        sections = MarkdownHeaderTextSplitter(_MARKDOWN_HEADERS, strip_headers=False).split_text(text)
        pieces = [
            (piece, " > ".join(doc.metadata[h] for _, h in _MARKDOWN_HEADERS if h in doc.metadata) or None)
            for doc in sections
            for piece in splitter.split_text(doc.page_content)
        ]
    else:
        pieces = [(piece, None) for piece in splitter.split_text(text)]
    return [Chunk(content=piece, position=i, section=section) for i, (piece, section) in enumerate(pieces)]


def chunk_pages(pages: Sequence[tuple[int, str]], *, chunk_size: int, chunk_overlap: int) -> list[Chunk]:
    """Split PDF pages; each chunk carries its 1-based page number, positions run across pages."""
    splitter = _splitter(chunk_size, chunk_overlap)
    pieces = [(page, piece) for page, text in pages for piece in splitter.split_text(text)]
    return [Chunk(content=piece, position=i, page=page) for i, (page, piece) in enumerate(pieces)]


def html_to_markdown(html: str | bytes) -> tuple[str | None, str]:
    """(title, markdown) of an HTML page's main content, extracted with trafilatura."""
    import trafilatura
    from trafilatura.utils import load_html

    tree = load_html(html)
    if tree is None:
        return None, ""
    metadata = trafilatura.extract_metadata(tree)
    options = dict(output_format="markdown", include_tables=True, include_formatting=True, include_links=False)
    markdown = trafilatura.extract(tree, **options) or trafilatura.extract(tree, favor_recall=True, **options)
    if not markdown:
        markdown = trafilatura.html2txt(tree)
    return (metadata.title if metadata is not None else None), (markdown or "").strip()


def pdf_pages(data: bytes) -> tuple[str | None, list[tuple[int, str]]]:
    """(title from the PDF metadata, [(page number, text)]) extracted with pypdf (no OCR)."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [(number, (page.extract_text() or "").strip()) for number, page in enumerate(reader.pages, 1)]
        title = (reader.metadata.title if reader.metadata else None) or None
    except (PdfReadError, ValueError, KeyError) as exc:
        raise ValueError(f"Could not read the PDF: {exc}") from None
    return title, [(number, text) for number, text in pages if text]


def _markdown_title(text: str) -> str | None:
    match = re.search(r"^#\s+(.+?)\s*#*\s*$", text, re.MULTILINE)
    return match.group(1) if match else None


def _title_from_source(source: str) -> str:
    tail = source.rstrip("/").rsplit("/", 1)[-1] or source
    return Path(tail).stem or tail


# --- ingestion ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedDocument:
    """A parsed and chunked document, ready to be written."""

    source: str
    title: str
    format: str
    chunks: list[Chunk]


def _fingerprint(values: list[dict]) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _chunk_values(kb: str, document: PreparedDocument) -> list[dict]:
    return strip_nul([
        {
            "kb": kb,
            "source": document.source,
            "title": document.title,
            "format": document.format,
            "position": chunk.position,
            "page": chunk.page,
            "section": chunk.section,
            "content": chunk.content,
        }
        for chunk in document.chunks
    ])


async def _write_documents(store: BaseStore, kb: str, documents: list[PreparedDocument]) -> list[dict]:
    """Replace each document's chunks in `kb`, skipping unchanged ones; batched across documents
    so the store embeds many chunks per call."""
    namespace, docs = chunk_namespace(kb), document_namespace(kb)
    previous = await store.abatch([GetOp(docs, document_key(d.source)) for d in documents])
    results, pending, puts, stale, records = [], [], [], [], []
    for document, before in zip(documents, previous):
        values = _chunk_values(kb, document)
        fingerprint = _fingerprint(values)
        result = {"source": document.source, "title": document.title, "format": document.format, "chunks": len(values)}
        if before is not None and before.value.get("fingerprint") == fingerprint:
            results.append({**result, "status": "unchanged", "removed": 0})
            continue
        old_count = before.value["chunks"] if before is not None else 0
        key = document_key(document.source)
        record = {
            **{k: result[k] for k in ("source", "title", "format", "chunks")},
            "characters": sum(len(v["content"]) for v in values),
            "fingerprint": fingerprint,
            "ingested_at": _now(),
        }
        # Recorded first with the larger count, so an interrupted write still knows every position to clean up.
        pending.append(PutOp(docs, key, {**record, "chunks": max(old_count, len(values)), "fingerprint": None}, index=False))
        records.append(PutOp(docs, key, record, index=False))
        puts += [PutOp(namespace, chunk_id(kb, document.source, v["position"]), v, index=["content"]) for v in values]
        removed = [PutOp(namespace, chunk_id(kb, document.source, p), None) for p in range(len(values), old_count)]
        stale += removed
        status = "empty" if not values else ("updated" if before is not None else "created")
        results.append({**result, "status": status, "removed": len(removed)})
    for batch in (pending, *(puts[i : i + PUT_BATCH] for i in range(0, len(puts), PUT_BATCH)), stale, records):
        if batch:
            await store.abatch(batch)
    return results


async def _write_prepared(store: BaseStore, kb: str, preparers: Iterable[Callable[[], PreparedDocument]]) -> list[dict]:
    """Prepare documents off the event loop and write them in groups of about GROUP_CHUNKS chunks."""
    results: list[dict] = []
    group: list[PreparedDocument] = []
    size = 0
    for prepare in preparers:
        document = await asyncio.to_thread(prepare)
        group.append(document)
        size += len(document.chunks)
        if size >= GROUP_CHUNKS or len(group) >= GROUP_DOCUMENTS:
            results += await _write_documents(store, kb, group)
            group, size = [], 0
    if group:
        results += await _write_documents(store, kb, group)
    return results


def _chunking(chunk_size: int | None, chunk_overlap: int | None) -> dict:
    config = knowledge_config()
    chunking = {
        "chunk_size": config.chunk_size if chunk_size is None else chunk_size,
        "chunk_overlap": config.chunk_overlap if chunk_overlap is None else chunk_overlap,
    }
    _splitter(**chunking)  # fail fast on impossible settings
    return chunking


def prepare_text(text: str | bytes, source: str, title: str | None, format: str, chunking: dict) -> PreparedDocument:
    """Parse (HTML through trafilatura to markdown) and chunk a text document."""
    if format == "html":
        page_title, text = html_to_markdown(text)
        title = title or page_title
        chunks = chunk_text(text, "markdown", **chunking)
    elif format in ("text", "markdown"):
        if format == "markdown":
            title = title or _markdown_title(text)
        chunks = chunk_text(text, format, **chunking)
    else:
        raise ValueError(f"Unknown format {format!r}: use one of {', '.join(TEXT_FORMATS)} (or ingest_bytes for pdf).")
    return PreparedDocument(source, title or _title_from_source(source), format, chunks)


def prepare_bytes(data: bytes, source: str, title: str | None, format: str, chunking: dict) -> PreparedDocument:
    """Parse and chunk a document given as bytes: PDF through pypdf, text formats as UTF-8."""
    if format == "pdf":
        pdf_title, pages = pdf_pages(data)
        return PreparedDocument(source, title or pdf_title or _title_from_source(source), format, chunk_pages(pages, **chunking))
    if format == "html":  # trafilatura finds the page's declared encoding in the raw bytes
        return prepare_text(data, source, title, format, chunking)
    return prepare_text(data.decode("utf-8-sig", errors="replace"), source, title, format, chunking)


def _check_source(source: str) -> str:
    if not isinstance(source, str) or not source.strip():
        raise ValueError("source must be a non-empty string (a path, URL or any stable name of the document).")
    return source.strip()


def _check_format(format: str) -> str:
    if format not in (*TEXT_FORMATS, "pdf"):
        raise ValueError(f"Unknown format {format!r}: use one of {', '.join((*TEXT_FORMATS, 'pdf'))}.")
    return format


async def ingest_texts(
    store: BaseStore,
    kb: str,
    documents: Iterable[Mapping[str, Any]],
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
) -> list[dict]:
    """Ingest many text documents at once: each a mapping {"text", "source", "title"?, "format"?}
    (format "text" by default, or "markdown" / "html"). Chunks are embedded in large batches.

    Returns one result per document, as ingest_text. Sources must be distinct within one call.
    """
    documents = [dict(d) for d in documents]
    sources = [_check_source(d.get("source")) for d in documents]
    duplicated = sorted({s for s in sources if sources.count(s) > 1})
    if duplicated:
        raise ValueError(f"Each source may appear once per call; repeated: {', '.join(duplicated)}.")
    for d in documents:
        if _check_format(d.get("format", "text")) == "pdf":
            raise ValueError("ingest_texts takes text formats only; use ingest_bytes for PDFs.")
    await get_kb(store, kb)
    chunking = _chunking(chunk_size, chunk_overlap)
    results = await _write_prepared(
        store,
        kb,
        (
            functools.partial(prepare_text, d["text"], source, d.get("title"), d.get("format", "text"), chunking)
            for d, source in zip(documents, sources)
        ),
    )
    await _refresh_stats(store, kb)
    return results


async def ingest_text(
    store: BaseStore,
    kb: str,
    text: str,
    source: str,
    title: str | None = None,
    format: str = "text",
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
) -> dict:
    """Chunk and store one text document (format "text", "markdown" or "html") in `kb`.

    Re-ingesting the same `source` replaces its chunks. Returns {"source", "title", "format",
    "chunks", "status" ("created" | "updated" | "unchanged" | "empty"), "removed" (stale chunks
    deleted)}. Raises KBUnknownError if `kb` does not exist.
    """
    document = {"text": text, "source": source, "title": title, "format": format}
    (result,) = await ingest_texts(store, kb, [document], chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return result


def format_for(name: str | None = None, media_type: str | None = None) -> str | None:
    """The ingest format for a file name (by extension) or a media type; None if unsupported."""
    if media_type:
        found = FORMAT_BY_MEDIA_TYPE.get(media_type.split(";")[0].strip().lower())
        if found:
            return found
    if name:
        return FORMAT_BY_EXTENSION.get(Path(name.split("?")[0]).suffix.lower())
    return None


async def ingest_bytes(
    store: BaseStore,
    kb: str,
    data: bytes,
    source: str,
    format: str,
    title: str | None = None,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
) -> dict:
    """Chunk and store one document given as bytes: "pdf", or UTF-8 "text"/"markdown"/"html".

    For content already fetched elsewhere (e.g. a URL fetched by the CLI); `source` should be
    the URL. Same result and replacement rules as ingest_text.
    """
    source = _check_source(source)
    _check_format(format)
    await get_kb(store, kb)
    chunking = _chunking(chunk_size, chunk_overlap)
    (result,) = await _write_prepared(store, kb, [functools.partial(prepare_bytes, data, source, title, format, chunking)])
    await _refresh_stats(store, kb)
    return result


def _files_under(root: Path) -> tuple[list[Path], list[Path]]:
    if root.is_file():
        if format_for(root.name) is None:
            raise ValueError(
                f"Unsupported file type {root.suffix or root.name!r}: supported are {', '.join(sorted(FORMAT_BY_EXTENSION))}."
            )
        return [root], []
    files, skipped = [], []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        (files if format_for(path.name) else skipped).append(path)
    return files, skipped


def _prepare_file(path: Path, chunking: dict) -> PreparedDocument:
    return prepare_bytes(path.read_bytes(), str(path), None, format_for(path.name), chunking)


async def ingest_path(
    store: BaseStore,
    kb: str,
    path: str | os.PathLike,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
) -> dict:
    """Ingest a file, or every supported file under a folder (recursive; hidden entries ignored).

    Formats by extension: .txt/.text, .md/.markdown, .html/.htm, .pdf. A document's source is its
    absolute path, so ingesting the same file again replaces its chunks. Returns
    {"kb", "documents": [per-document results as ingest_text], "skipped": [unsupported files]}.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise FileNotFoundError(f"No such file or folder: {root}")
    await get_kb(store, kb)
    chunking = _chunking(chunk_size, chunk_overlap)
    files, skipped = _files_under(root.resolve())
    documents = await _write_prepared(store, kb, (functools.partial(_prepare_file, f, chunking) for f in files))
    await _refresh_stats(store, kb)
    return {"kb": kb, "documents": documents, "skipped": [str(p) for p in skipped]}


# --- retrieval ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    id: str
    value: dict
    score: float


def _check_query(query: str, top_k: int, strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}.")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise ValueError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}.")
    return query.strip()


async def _dense_hits(store: BaseStore, kb: str, query: str, limit: int) -> list[Hit]:
    items = await store.asearch(chunk_namespace(kb), query=query, limit=limit)
    return [Hit(item.key, dict(item.value), float(item.score or 0.0)) for item in items if item.score is not None]


_TOKEN = re.compile(r"\w+")
_STOPWORDS = frozenset(
    "a an and are as at be been but by can did do does for from had has have how i if in into is it its "
    "me my no not of on or our so than that the their them then there these they this to was we were "
    "what when where which who whom why will with you your".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without English stopwords (the in-process BM25 tokenizer)."""
    return [token for token in _TOKEN.findall(text.lower()) if token not in _STOPWORDS]


def bm25_rank(query: str, documents: Sequence[tuple[str, str]], *, k1: float = BM25_K1, b: float = BM25_B) -> list[tuple[str, float]]:
    """Okapi BM25 of (id, text) documents for `query`, best first; documents matching no term are left out."""
    terms = set(tokenize(query))
    if not terms or not documents:
        return []
    counts = [(doc_id, Counter(tokenize(text))) for doc_id, text in documents]
    lengths = [sum(c.values()) for _, c in counts]
    average = (sum(lengths) / len(lengths)) or 1.0
    frequency = Counter(term for _, c in counts for term in terms if term in c)
    n = len(counts)
    scored = []
    for (doc_id, c), length in zip(counts, lengths):
        score = sum(
            math.log(1 + (n - frequency[t] + 0.5) / (frequency[t] + 0.5))
            * c[t] * (k1 + 1) / (c[t] + k1 * (1 - b + b * length / average))
            for t in terms
            if t in c
        )
        if score > 0:
            scored.append((doc_id, score))
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored


def _postgres_store(store: BaseStore):
    try:
        from langgraph.store.postgres.aio import AsyncPostgresStore
    except ImportError:
        return None
    return store if isinstance(store, AsyncPostgresStore) else None


@asynccontextmanager
async def _connection(pg_store):
    from psycopg_pool import AsyncConnectionPool

    if isinstance(pg_store.conn, AsyncConnectionPool):
        async with pg_store.conn.connection() as conn:
            yield conn
    else:
        async with pg_store.lock:
            yield pg_store.conn


def _tsvector_sql(config: str) -> str:
    return f"to_tsvector('{config}'::regconfig, (value ->> 'content'))"


def keyword_index_name(config: str) -> str:
    """The GIN index that serves keyword search for the given text search configuration."""
    return f"store_kb_fts_{config}"


async def ensure_keyword_index(store: BaseStore) -> bool:
    """On a Postgres store, create the full-text GIN index over chunk content if it is missing.

    Returns True when the store is a Postgres store (index present or created).
    """
    pg_store = _postgres_store(store)
    if pg_store is None:
        return False
    config = knowledge_config().text_search_config
    name = keyword_index_name(config)
    async with _connection(pg_store) as conn:
        cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL AS present", (name,))
        row = await cur.fetchone()
        present = row["present"] if isinstance(row, dict) else row[0]
        if not present:
            await conn.execute(
                f"CREATE INDEX IF NOT EXISTS {name} ON store USING gin ({_tsvector_sql(config)}) "
                f"WHERE prefix LIKE '{CHUNK_NAMESPACE_ROOT}.%'"
            )
    return True


def _tsquery_literal(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def keyword_sql(config: str) -> str:
    """BM25 over Postgres full-text search; the tsvector expression and the prefix predicate match
    the GIN index, and document frequencies are exact (every chunk holding a query lexeme is a candidate)."""
    tsv = _tsvector_sql(config)
    return f"""
        WITH candidates AS MATERIALIZED (
            SELECT key, {tsv} AS tsv, length(value ->> 'content') AS chars
            FROM store
            WHERE prefix = %(prefix)s AND prefix LIKE '{CHUNK_NAMESPACE_ROOT}.%%'
              AND {tsv} @@ %(tsquery)s::tsquery
              AND (expires_at IS NULL OR expires_at > now())
        ),
        frequencies AS (
            SELECT c.key, c.chars, t.lexeme, coalesce(cardinality(t.positions), 1) AS tf
            FROM candidates c CROSS JOIN LATERAL unnest(c.tsv) AS t
            WHERE t.lexeme = ANY(%(lexemes)s::text[])
        ),
        document_frequency AS (
            SELECT lexeme, count(*) AS df FROM frequencies GROUP BY lexeme
        ),
        scored AS (
            SELECT f.key, sum(
                ln(1 + (greatest(%(n)s, (SELECT count(*) FROM candidates)) - d.df + 0.5) / (d.df + 0.5))
                * f.tf * (%(k1)s + 1)
                / (f.tf + %(k1)s * (1 - %(b)s + %(b)s * f.chars / %(avgdl)s))
            ) AS score
            FROM frequencies f JOIN document_frequency d USING (lexeme)
            GROUP BY f.key
            ORDER BY score DESC, f.key
            LIMIT %(limit)s
        )
        SELECT s.key, s.score, st.value
        FROM scored s JOIN store st ON st.prefix = %(prefix)s AND st.key = s.key
        ORDER BY s.score DESC, s.key
    """


async def _postgres_keyword_hits(pg_store, kb: str, entry: dict, query: str, limit: int) -> list[Hit]:
    config = knowledge_config().text_search_config
    async with _connection(pg_store) as conn:
        cur = await conn.execute(
            f"SELECT tsvector_to_array(to_tsvector('{config}'::regconfig, %s)) AS lexemes", (query,)
        )
        row = await cur.fetchone()
        lexemes = list(row["lexemes"] if isinstance(row, dict) else row[0])
        if not lexemes:
            return []
        chunks = max(int(entry.get("chunks") or 0), 1)
        params = {
            "prefix": ".".join(chunk_namespace(kb)),
            "tsquery": " | ".join(_tsquery_literal(lexeme) for lexeme in lexemes),
            "lexemes": lexemes,
            "n": chunks,
            "k1": BM25_K1,
            "b": BM25_B,
            "avgdl": max(float(entry.get("characters") or 0) / chunks, 1.0),
            "limit": limit,
        }
        cur = await conn.execute(keyword_sql(config), params)
        rows = await cur.fetchall()
    hits = []
    for row in rows:
        key, score, value = (row["key"], row["score"], row["value"]) if isinstance(row, dict) else row
        if isinstance(value, (str, bytes)):
            value = json.loads(value)
        hits.append(Hit(key, value, float(score)))
    return hits


async def _keyword_hits(store: BaseStore, kb: str, entry: dict, query: str, limit: int) -> list[Hit]:
    pg_store = _postgres_store(store)
    if pg_store is not None:
        return await _postgres_keyword_hits(pg_store, kb, entry, query, limit)
    items = {item.key: item.value for item in await _search_all(store, chunk_namespace(kb))}
    ranked = await asyncio.to_thread(bm25_rank, query, [(key, value["content"]) for key, value in items.items()])
    return [Hit(key, dict(items[key]), score) for key, score in ranked[:limit]]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Fuse ranked id lists: score(d) = sum over lists of 1 / (k + rank of d), ranks from 1. Best first."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, 1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def _candidate_depth(top_k: int) -> int:
    return min(100, max(4 * top_k, 40))


def _locator(value: dict) -> str:
    parts = [value["source"]]
    if value.get("page"):
        parts.append(f"page {value['page']}")
    if value.get("section"):
        parts.append(f"section {value['section']}")
    return ", ".join(parts)


def _result(kb: str, query: str, strategy: str, hits: list[tuple[Hit, dict[str, int | None]]]) -> dict:
    """The retrieve-only contract: {"context", "retrieval_results", "reference"} (+ kb, query, strategy)."""
    results, reference, passages = [], [], []
    for index, (hit, ranks) in enumerate(hits, 1):
        value = hit.value
        common = {
            "index": index,
            "id": hit.id,
            "source": value["source"],
            "title": value.get("title"),
            "position": value.get("position"),
            "page": value.get("page"),
            "section": value.get("section"),
        }
        results.append(
            {**common, "content": value["content"], "score": round(hit.score, 6), "strategy": strategy, "rank": index, "ranks": ranks}
        )
        reference.append(common)
        passages.append(f"[{index}] {value.get('title') or value['source']} ({_locator(value)})\n{value['content']}")
    return {
        "kb": kb,
        "query": query,
        "strategy": strategy,
        "context": "\n\n".join(passages),
        "retrieval_results": results,
        "reference": reference,
    }


async def dense_search(store: BaseStore, kb: str, query: str, top_k: int = 5) -> dict:
    """Vector search (the store's semantic index, cosine similarity) over `kb`'s chunks."""
    query = _check_query(query, top_k, "dense")
    await get_kb(store, kb)
    hits = await _dense_hits(store, kb, query, top_k)
    return _result(kb, query, "dense", [(hit, {"dense": rank}) for rank, hit in enumerate(hits, 1)])


async def keyword_search(store: BaseStore, kb: str, query: str, top_k: int = 5) -> dict:
    """BM25 keyword search over `kb`'s chunks (Postgres full-text on a Postgres store)."""
    query = _check_query(query, top_k, "keyword")
    entry = await get_kb(store, kb)
    hits = await _keyword_hits(store, kb, entry, query, top_k)
    return _result(kb, query, "keyword", [(hit, {"keyword": rank}) for rank, hit in enumerate(hits, 1)])


async def hybrid_search(store: BaseStore, kb: str, query: str, top_k: int = 5, *, rrf_k: int = RRF_K) -> dict:
    """Dense and keyword candidates fused by reciprocal rank fusion (k=60); score is the RRF score."""
    query = _check_query(query, top_k, "hybrid")
    entry = await get_kb(store, kb)
    depth = _candidate_depth(top_k)
    dense, keyword = await asyncio.gather(
        _dense_hits(store, kb, query, depth), _keyword_hits(store, kb, entry, query, depth)
    )
    by_id = {hit.id: hit for hit in (*keyword, *dense)}
    dense_rank = {hit.id: rank for rank, hit in enumerate(dense, 1)}
    keyword_rank = {hit.id: rank for rank, hit in enumerate(keyword, 1)}
    fused = reciprocal_rank_fusion([[h.id for h in dense], [h.id for h in keyword]], k=rrf_k)[:top_k]
    return _result(
        kb,
        query,
        "hybrid",
        [
            (Hit(doc_id, by_id[doc_id].value, score), {"dense": dense_rank.get(doc_id), "keyword": keyword_rank.get(doc_id)})
            for doc_id, score in fused
        ],
    )


SEARCHES = {"dense": dense_search, "keyword": keyword_search, "hybrid": hybrid_search}


async def retrieve(store: BaseStore, kb: str, query: str, *, strategy: str = "hybrid", top_k: int = 5) -> dict[str, Any]:
    """Search `kb` with one strategy ("dense", "keyword" or "hybrid") and return the retrieve-only
    contract {"context", "retrieval_results", "reference"} (plus "kb", "query", "strategy").

    Raises ValueError for an empty query, top_k outside 1..50 or an unknown strategy, and
    KBUnknownError (a ValueError listing the existing knowledge bases) for an unknown kb.
    """
    _check_query(query, top_k, strategy)
    return await SEARCHES[strategy](store, kb, query, top_k)
