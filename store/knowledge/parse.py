"""Parsing (HTML through trafilatura, PDF through pypdf) and chunking of documents."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from store.knowledge.config import FORMAT_BY_EXTENSION, FORMAT_BY_MEDIA_TYPE, TEXT_FORMATS
from store.sentences import heading_title

_MARKDOWN_HEADERS = [("#", "h1"), ("##", "h2"), ("###", "h3")]


@dataclass(frozen=True)
class Chunk:
    """One piece of a document: its text and where it sits (chunk index, PDF page, section)."""

    content: str
    position: int
    page: int | None = None
    section: str | None = None


def text_splitter(chunk_size: int, chunk_overlap: int):
    """The recursive splitter for these settings; ValueError on impossible ones."""
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
    splitter = text_splitter(chunk_size, chunk_overlap)
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
    splitter = text_splitter(chunk_size, chunk_overlap)
    pieces = [(page, piece) for page, text in pages for piece in splitter.split_text(text)]
    return [Chunk(content=piece, position=i, page=page) for i, (page, piece) in enumerate(pieces)]


def html_to_markdown(html: str | bytes) -> tuple[str | None, str]:
    """(title, markdown) of an HTML page's main content, links dropped (store/markdown.py)."""
    from store.markdown import html_to_markdown as convert  # trafilatura loads on first use

    return convert(html)


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


def markdown_title(text: str) -> str | None:
    """The first level-1 heading of a markdown text, or None."""
    match = re.search(r"^#\s+(.+?)\s*#*\s*$", text, re.MULTILINE)
    return match.group(1) if match else None


def title_from_source(source: str) -> str:
    """A title made from the source's last path segment, without its extension."""
    tail = source.rstrip("/").rsplit("/", 1)[-1] or source
    return Path(tail).stem or tail


def shown_source(source: str) -> str:
    """How a document's source is shown to the people and models a search answers: a web URL as
    it is, a file path on the server (absolute, `~/`, `file://` or a Windows path) by its file
    name only, so that no server path reaches a chat user; any other name (an upload's file name,
    a caller's own name) as it is. The stored source, the document's key, is unchanged."""
    text = source.strip()
    if text.startswith(("http://", "https://")):
        return text
    if text.startswith("file://"):
        text = text[len("file://") :] or "/"
    if text.startswith(("/", "~")):
        return PurePosixPath(text).name or text
    if _WINDOWS_PATH.match(text):
        return PureWindowsPath(text).name or text
    return text


_WINDOWS_PATH = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


@dataclass(frozen=True)
class PreparedDocument:
    """A parsed and chunked document, ready to be written."""

    source: str
    title: str
    format: str
    chunks: list[Chunk]
    date: str | None = None  # UTC stamp of when the document was written, if known
    exchange: str | None = None  # one chat line answering the one before it: both (store.sentences.exchange)


def prepare_text(text: str | bytes, source: str, title: str | None, format: str, chunking: dict) -> PreparedDocument:
    """Parse (HTML through trafilatura to markdown) and chunk a text document."""
    if format == "html":
        page_title, text = html_to_markdown(text)
        title = title or page_title
        chunks = chunk_text(text, "markdown", **chunking)
    elif format in ("text", "markdown"):
        if isinstance(text, bytes):  # prepare_bytes decodes these formats before calling
            raise TypeError(f"{format} text must be str: give bytes to prepare_bytes")
        if format == "markdown":
            title = title or markdown_title(text)
        if not title and (heading := heading_title(text)):
            # A text that opens with a heading line is titled by it, as a title given with it would
            # be (plain text: the line is the title, not a passage; markdown keeps its structure).
            title = heading
            if format == "text":
                text = text.strip().split("\n", 1)[1]
        chunks = chunk_text(text, format, **chunking)
    else:
        raise ValueError(f"Unknown format {format!r}: use one of {', '.join(TEXT_FORMATS)} (or ingest_bytes for pdf).")
    return PreparedDocument(source, title or title_from_source(source), format, chunks)


def prepare_bytes(data: bytes, source: str, title: str | None, format: str, chunking: dict) -> PreparedDocument:
    """Parse and chunk a document given as bytes: PDF through pypdf, text formats as UTF-8."""
    if format == "pdf":
        pdf_title, pages = pdf_pages(data)
        return PreparedDocument(
            source, title or pdf_title or title_from_source(source), format, chunk_pages(pages, **chunking)
        )
    if format == "html":  # trafilatura finds the page's declared encoding in the raw bytes
        return prepare_text(data, source, title, format, chunking)
    return prepare_text(data.decode("utf-8-sig", errors="replace"), source, title, format, chunking)


def format_for(name: str | None = None, media_type: str | None = None) -> str | None:
    """The ingest format for a file name (by extension) or a media type; None if unsupported."""
    if media_type:
        found = FORMAT_BY_MEDIA_TYPE.get(media_type.split(";")[0].strip().lower())
        if found:
            return found
    if name:
        return FORMAT_BY_EXTENSION.get(Path(name.split("?")[0]).suffix.lower())
    return None
