"""Ingestion: documents prepared off the event loop, chunks written in batches, replaced by source."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from langgraph.store.base import BaseStore, GetOp, Item, PutOp

from store.aspects import speaker_lines
from store.backend import backend_for
from store.clean import strip_nul
from store.dates import parse_date, parse_stamp, stamp
from store.knowledge import aspects as kb_aspects
from store.knowledge import graph
from store.knowledge import people as kb_people
from store.knowledge.config import (
    EXCHANGE_FIELD,
    FORMAT_BY_EXTENSION,
    GROUP_CHUNKS,
    GROUP_DOCUMENTS,
    NEIGHBOUR_GAP,
    PUT_BATCH,
    TEXT_FORMATS,
    knowledge_config,
)
from store.knowledge.extract import ChunkText, Extractor
from store.knowledge.parse import PreparedDocument, format_for, prepare_bytes, prepare_text, text_splitter
from store.knowledge.registry import (
    chunk_id,
    chunk_namespace,
    document_key,
    document_namespace,
    get_kb,
    now_stamp,
    refresh_stats,
)
from store.sentences import exchange

Progress = Callable[[int, int], None]


def _fingerprint(values: list[dict]) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _chunk_values(kb: str, document: PreparedDocument) -> list[dict]:
    return strip_nul(
        [
            {
                "kb": kb,
                "source": document.source,
                "title": document.title,
                "format": document.format,
                "position": chunk.position,
                "page": chunk.page,
                "section": chunk.section,
                "content": chunk.content,
                **({"date": document.date} if document.date else {}),
                **({EXCHANGE_FIELD: document.exchange} if document.exchange else {}),  # one chunk: `_answering`
            }
            for chunk in document.chunks
        ]
    )


@dataclass
class _Plan:
    """The writes that replace documents' chunks (see `_plan_documents`)."""

    results: list[dict] = field(default_factory=list)
    pending: list[PutOp] = field(default_factory=list)
    puts: list[PutOp] = field(default_factory=list)
    stale: list[PutOp] = field(default_factory=list)
    records: list[PutOp] = field(default_factory=list)

    @property
    def chunks(self) -> int:
        """Chunks to embed (and extract entities from): the work writing the plan causes."""
        return len(self.puts)


async def _plan_documents(store: BaseStore, kb: str, documents: list[PreparedDocument]) -> _Plan:
    """What replacing each document's chunks in `kb` writes, unchanged documents skipped."""
    docs = document_namespace(kb)
    previous = cast(list[Item | None], await store.abatch([GetOp(docs, document_key(d.source)) for d in documents]))
    plan = _Plan()
    for document, before in zip(documents, previous, strict=False):
        values = _chunk_values(kb, document)
        fingerprint = _fingerprint(values)
        result = {"source": document.source, "title": document.title, "format": document.format, "chunks": len(values)}
        if before is not None and before.value.get("fingerprint") == fingerprint:
            plan.results.append({**result, "status": "unchanged", "removed": 0})
            continue
        old_count = before.value["chunks"] if before is not None else 0
        key = document_key(document.source)
        record = {
            **{k: result[k] for k in ("source", "title", "format", "chunks")},
            "characters": sum(len(v["content"]) for v in values),
            "fingerprint": fingerprint,
            "ingested_at": now_stamp(),
            **({EXCHANGE_FIELD: True} if any(EXCHANGE_FIELD in v for v in values) else {}),
        }
        # Recorded first with the larger count, so an interrupted write still knows every position to clean up.
        plan.pending.append(
            PutOp(docs, key, {**record, "chunks": max(old_count, len(values)), "fingerprint": None}, index=False)
        )
        if before is not None and before.value.get(EXCHANGE_FIELD):
            # the store upserts a chunk's vectors by field and keeps the others: the old exchange
            # vector would outlive a new text without one, so the old chunks go first
            plan.pending += [
                PutOp(chunk_namespace(kb), chunk_id(kb, document.source, p), None) for p in range(old_count)
            ]
        plan.records.append(PutOp(docs, key, record, index=False))
        plan.puts += [
            PutOp(
                chunk_namespace(kb),
                chunk_id(kb, document.source, v["position"]),
                v,
                index=["content", EXCHANGE_FIELD] if v.get(EXCHANGE_FIELD) else ["content"],
            )
            for v in values
        ]
        removed = [
            PutOp(chunk_namespace(kb), chunk_id(kb, document.source, p), None) for p in range(len(values), old_count)
        ]
        plan.stale += removed
        status = "empty" if not values else ("updated" if before is not None else "created")
        plan.results.append({**result, "status": status, "removed": len(removed)})
    return plan


async def _write_plan(
    store: BaseStore,
    kb: str,
    documents: list[PreparedDocument],
    plan: _Plan,
    extractor: Extractor | None = None,
    progress: Progress | None = None,
    build_graph: bool = True,
) -> int:
    """Write `plan`, batched so the store embeds many chunks per call; returns the number of
    entities the written chunks mention."""
    puts = plan.puts
    for batch in (plan.pending, *(puts[i : i + PUT_BATCH] for i in range(0, len(puts), PUT_BATCH))):
        if batch:
            await store.abatch(batch)
    # full text next to the chunk rows, before the records mark them done
    await backend_for(store).index_kb_chunks(kb, [(op.key, op.value["content"]) for op in puts if op.value is not None])
    # the graph of the written chunks, then without the stale ones (see store/knowledge/graph.py)
    titles = {chunk_id(kb, d.source, c.position): d.title or d.source for d in documents for c in d.chunks}
    entities = await graph.index_chunks(
        store,
        kb,
        [ChunkText(op.key, titles.get(op.key), op.value["content"]) for op in puts if op.value is not None]
        if build_graph
        else [],
        extractor,
        progress,
    )
    if plan.stale:
        await store.abatch(plan.stale)
        await backend_for(store).unindex_kb_chunks(kb, [op.key for op in plan.stale])
        await graph.unindex_chunks(store, kb, [op.key for op in plan.stale])
    if plan.records:
        await store.abatch(plan.records)
    return entities


async def _write_documents(
    store: BaseStore,
    kb: str,
    documents: list[PreparedDocument],
    extractor: Extractor | None = None,
    progress: Progress | None = None,
    build_graph: bool = True,
) -> list[dict]:
    """Replace each document's chunks in `kb`, skipping unchanged ones; batched across documents
    so the store embeds many chunks per call."""
    plan = await _plan_documents(store, kb, documents)
    await _write_plan(store, kb, documents, plan, extractor, progress, build_graph)
    await kb_aspects.learn_chunks(store, kb, ((op.key, str((op.value or {}).get("content") or "")) for op in plan.puts))
    return plan.results


async def _write_prepared(
    store: BaseStore,
    kb: str,
    preparers: Iterable[Callable[[], PreparedDocument | None]],
    extractor: Extractor | None = None,
    progress: Progress | None = None,
    build_graph: bool = True,
) -> list[dict]:
    """Prepare documents off the event loop and write them in groups of about GROUP_CHUNKS chunks
    (a preparer returning None has nothing to write)."""
    results: list[dict] = []
    group: list[PreparedDocument] = []
    size = 0
    previous: PreparedDocument | None = None
    for prepare in preparers:
        document = await asyncio.to_thread(prepare)
        if document is None:
            continue
        document, previous = _answering(previous, document), document
        group.append(document)
        size += len(document.chunks)
        if size >= GROUP_CHUNKS or len(group) >= GROUP_DOCUMENTS:
            results += await _write_documents(store, kb, group, extractor, progress, build_graph)
            group, size = [], 0
    if group:
        results += await _write_documents(store, kb, group, extractor, progress, build_graph)
    return results


def _answering(previous: PreparedDocument | None, document: PreparedDocument) -> PreparedDocument:
    """`document` with its exchange passage (`store.sentences.exchange`, embedded beside its
    text) when it is one chat line ("Name: words") answering `previous`, the document ingested
    just before it: one chat line by someone else asking a question, dated at most NEIGHBOUR_GAP
    before it when both are dated (a chat log ingested a message a document, in order)."""
    if previous is None or len(document.chunks) != 1 or len(previous.chunks) != 1:
        return document
    if previous.date and document.date:
        asked_at, said_at = parse_stamp(previous.date), parse_stamp(document.date)
        if asked_at and said_at and not timedelta(0) <= said_at - asked_at <= NEIGHBOUR_GAP:
            return document
    said, asked = speaker_lines(document.chunks[0].content), speaker_lines(previous.chunks[0].content)
    if len(said) != 1 or len(asked) != 1:
        return document
    passage = exchange(asked[0][1], asked[0][0], said[0][1], said[0][0])
    return replace(document, exchange=passage) if passage else document


def _chunking(chunk_size: int | None, chunk_overlap: int | None) -> dict:
    config = knowledge_config()
    chunking = {
        "chunk_size": config.chunk_size if chunk_size is None else chunk_size,
        "chunk_overlap": config.chunk_overlap if chunk_overlap is None else chunk_overlap,
    }
    text_splitter(**chunking)  # fail fast on impossible settings
    return chunking


def _check_source(source: object) -> str:
    if not isinstance(source, str) or not source.strip():
        raise ValueError("source must be a non-empty string (a path, URL or any stable name of the document).")
    return source.strip()


def _check_date(value: object) -> str | None:
    """A document's date (when it was written or said) as the stored UTC stamp, or None."""
    moment = parse_date(value, "date")
    return stamp(moment) if moment else None


def _dated(prepare: Callable[[], PreparedDocument], date: str | None) -> Callable[[], PreparedDocument]:
    return prepare if date is None else lambda: replace(prepare(), date=date)


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
    extractor: Extractor | None = None,
    progress: Progress | None = None,
    build_graph: bool = True,
) -> list[dict]:
    """Ingest many text documents at once: each a mapping {"text", "source", "title"?, "format"?,
    "date"?} (format "text" by default, or "markdown" / "html"; date: when the document was
    written or said, ISO 8601 or a datetime, kept on its chunks so hybrid search can favour the
    documents of a time range the query names). Chunks are embedded in large batches.

    The chunks' entities and relations go to the knowledge base's graph (store/knowledge/graph.py):
    by `extractor` (a `ModelExtractor` over a chat model; default the offline extractor), with
    `progress(done, total)` called as chunks are extracted; `build_graph=False` leaves the graph
    out (a baseline for the ingest benchmark; such documents are found by graph search only
    through the dense seeds).

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
    dates = [_check_date(d.get("date")) for d in documents]
    await get_kb(store, kb)
    chunking = _chunking(chunk_size, chunk_overlap)
    results = await _write_prepared(
        store,
        kb,
        (
            _dated(
                functools.partial(prepare_text, d["text"], source, d.get("title"), d.get("format", "text"), chunking),
                date,
            )
            for d, source, date in zip(documents, sources, dates, strict=False)
        ),
        extractor,
        progress,
        build_graph,
    )
    await kb_people.learn_documents(store, kb, (d["text"] for d in documents))
    await refresh_stats(store, kb)
    return results


async def ingest_text(
    store: BaseStore,
    kb: str,
    text: str,
    source: str,
    title: str | None = None,
    format: str = "text",
    *,
    date: str | datetime | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    extractor: Extractor | None = None,
    progress: Progress | None = None,
) -> dict:
    """Chunk and store one text document (format "text", "markdown" or "html") in `kb`; `date`
    as in ingest_texts.

    Re-ingesting the same `source` replaces its chunks. Returns {"source", "title", "format",
    "chunks", "status" ("created" | "updated" | "unchanged" | "empty"), "removed" (stale chunks
    deleted)}. Raises KBUnknownError if `kb` does not exist.
    """
    document = {"text": text, "source": source, "title": title, "format": format, "date": date}
    (result,) = await ingest_texts(
        store,
        kb,
        [document],
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        extractor=extractor,
        progress=progress,
    )
    return result


async def ingest_bytes(
    store: BaseStore,
    kb: str,
    data: bytes,
    source: str,
    format: str,
    title: str | None = None,
    *,
    date: str | datetime | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    extractor: Extractor | None = None,
    progress: Progress | None = None,
) -> dict:
    """Chunk and store one document given as bytes: "pdf", or UTF-8 "text"/"markdown"/"html";
    `date` as in ingest_texts.

    For content already fetched elsewhere (e.g. a URL fetched by the CLI); `source` should be
    the URL. Same result and replacement rules as ingest_text.
    """
    source = _check_source(source)
    _check_format(format)
    checked_date = _check_date(date)
    await get_kb(store, kb)
    chunking = _chunking(chunk_size, chunk_overlap)
    (result,) = await _write_prepared(
        store,
        kb,
        [_dated(functools.partial(prepare_bytes, data, source, title, format, chunking), checked_date)],
        extractor,
        progress,
    )
    await refresh_stats(store, kb)
    return result


async def ingest_files(
    store: BaseStore,
    kb: str,
    files: Sequence[tuple[bytes, str, str]],
    *,
    date: str | datetime | None = None,
    before_write: Callable[[int], Awaitable[None]] | None = None,
) -> dict:
    """Ingest documents given as `(bytes, source, format)` all or none: every one is prepared
    (parsed and chunked) first, then `before_write(chunks)` is awaited with the number of chunks
    that will be embedded (unchanged documents make none) and may raise to write nothing, then
    all are written. Sources must be distinct. Returns {"documents": [per-document results as
    ingest_text], "work": {"chunks", "entities"}}: the chunks embedded and the entities they
    mention."""
    checked = [(data, _check_source(source), _check_format(format)) for data, source, format in files]
    sources = [source for _, source, _ in checked]
    duplicated = sorted({s for s in sources if sources.count(s) > 1})
    if duplicated:
        raise ValueError(f"Each source may appear once per call; repeated: {', '.join(duplicated)}.")
    checked_date = _check_date(date)
    await get_kb(store, kb)
    chunking = _chunking(None, None)
    documents = [
        await asyncio.to_thread(
            _dated(functools.partial(prepare_bytes, data, source, None, fmt, chunking), checked_date)
        )
        for data, source, fmt in checked
    ]
    plan = await _plan_documents(store, kb, documents)
    if before_write is not None:
        await before_write(plan.chunks)
    entities = await _write_plan(store, kb, documents, plan)
    await refresh_stats(store, kb)
    return {"documents": plan.results, "work": {"chunks": plan.chunks, "entities": entities}}


def _files_under(root: Path) -> tuple[list[Path], list[Path]]:
    if root.is_file():
        if format_for(root.name) is None:
            raise ValueError(
                f"Unsupported file type {root.suffix or root.name!r}: supported are {', '.join(sorted(FORMAT_BY_EXTENSION))}."
            )
        return [root], []
    files: list[Path] = []
    skipped: list[Path] = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        (files if format_for(path.name) else skipped).append(path)
    return files, skipped


def _prepare_file(path: Path, chunking: dict) -> PreparedDocument:
    format = format_for(path.name)
    if format is None:  # _files_under keeps supported files only
        raise ValueError(f"Unsupported file type {path.suffix or path.name!r}.")
    return prepare_bytes(path.read_bytes(), str(path), None, format, chunking)


def _prepare_or_note(path: Path, chunking: dict, failed: list[dict]) -> Callable[[], PreparedDocument | None]:
    """A preparer of one file of a folder that notes, instead of raising, why the file cannot be read."""

    def prepare() -> PreparedDocument | None:
        try:
            return _prepare_file(path, chunking)
        except (ValueError, OSError) as exc:  # an unreadable PDF, a file gone or not ours to read
            failed.append({"source": str(path), "error": str(exc)})
            return None

    return prepare


async def ingest_path(
    store: BaseStore,
    kb: str,
    path: str | os.PathLike,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    extractor: Extractor | None = None,
    progress: Progress | None = None,
) -> dict:
    """Ingest a file, or every supported file under a folder (recursive; hidden entries ignored).

    Formats by extension: .txt/.text, .md/.markdown, .html/.htm, .pdf. A document's source is its
    absolute path, so ingesting the same file again replaces its chunks. A file that cannot be
    read (a damaged PDF, no permission) does not stop the others. Returns {"kb", "documents":
    [per-document results as ingest_text], "skipped": [unsupported files], "failed": [{"source",
    "error"}]}.
    """
    root = await asyncio.to_thread(lambda: Path(path).expanduser())
    if not await asyncio.to_thread(root.exists):
        raise FileNotFoundError(f"No such file or folder: {root}")
    await get_kb(store, kb)
    chunking = _chunking(chunk_size, chunk_overlap)
    files, skipped = _files_under(root.resolve())
    failed: list[dict] = []
    documents = await _write_prepared(
        store, kb, (_prepare_or_note(f, chunking, failed) for f in files), extractor, progress
    )
    await refresh_stats(store, kb)
    return {"kb": kb, "documents": documents, "skipped": [str(p) for p in skipped], "failed": failed}


async def delete_document(store: BaseStore, kb: str, source: str) -> int | None:
    """Delete one document of `kb`: its chunks with their text index and what the knowledge graph
    knows only from them (entities, relations, links), then its record. Returns how many chunks it
    had; None when `kb` has no such document. Every path that deletes a document comes here."""
    docs, key = document_namespace(kb), document_key(source)
    record = await store.aget(docs, key)
    if record is None:
        return None
    count = int(record.value.get("chunks") or 0)
    keys = [chunk_id(kb, source, position) for position in range(count)]
    await store.abatch([PutOp(chunk_namespace(kb), chunk_key, None) for chunk_key in keys])
    await backend_for(store).unindex_kb_chunks(kb, keys)
    await graph.unindex_chunks(store, kb, keys)
    await store.adelete(docs, key)
    await refresh_stats(store, kb)
    return count
