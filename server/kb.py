"""Knowledge-base operations shared by the CLI (server/cli.py) and the HTTP routes
(server/http.py): URL and upload ingestion, sources, and the owner rule.

Owner rule: a knowledge base created by a regular user over HTTP records that user as its
`owner`, and only its owner or an administrator may ingest into it, delete its sources or delete
it. Knowledge bases without an owner (created by an administrator, the CLI or a batch import)
are written by administrators only.

Who reads it (`store.knowledge.readable_by`): its owner, administrators, and everyone when it is
shared: knowledge bases without an owner are shared unless an administrator made them private,
a user's are shared only when an administrator shares them (`share_kb`). Another user's private
knowledge base is unknown to a regular user (KBUnknownError), in runs, over HTTP, MCP and the
store API (server/auth.py) alike.
"""

from __future__ import annotations

from typing import Any

from langgraph.store.base import BaseStore

from server import ingest_jobs
from store import knowledge
from tools.identity import acts_for_any_user, kb_reader
from tools.quota import charge_bytes

URL_MAX_BYTES = 20 * 1024 * 1024
URL_TIMEOUT_SECONDS = 30.0
UPLOAD_MAX_BYTES = 20 * 1024 * 1024


async def server_store() -> BaseStore:
    """The LangGraph server's store (the one the graphs' runs get): our Postgres store under
    langgraph.json, the platform's store under langgraph.platform.json, Aegra's under Aegra."""
    from tools.server_api import server_store as running_server_store

    return await running_server_store()


class KBForbidden(PermissionError):
    """The caller may read this knowledge base but not change it (or not share it)."""


class SourceUnknown(LookupError):
    """The knowledge base has no document with this source."""


def _ingestible(media_type: str) -> bool:
    """Media types a URL may be ingested as: the knowledge formats (PDF included) and any text."""
    return knowledge.format_for(media_type=media_type) is not None or media_type.startswith("text/")


async def ingest_url(
    store: BaseStore,
    kb: str,
    url: str,
    *,
    date: str | None = None,
    user: Any = None,
    slot: ingest_jobs.Slot | None = None,
) -> dict:
    """Fetch a public URL with the SSRF-safe fetch of tools.net and ingest it (source: the final
    URL): HTML, markdown, plain text or PDF, at most URL_MAX_BYTES. ValueError with the reason
    when it cannot; the fetched bytes are taken from `user`'s ingest quota first and its chunks
    from their work quota before anything is written (QuotaExceeded). With the `slot` of an HTTP
    request, the work runs off the server (server/ingest_jobs.py). Returns {"documents": [the
    document's result], "work"}."""
    from tools.errors import ToolError
    from tools.net import FetchErrorCode, safe_get

    try:
        fetched = await safe_get(url, timeout=URL_TIMEOUT_SECONDS, max_bytes=URL_MAX_BYTES, accept=_ingestible)
    except ToolError as exc:
        if getattr(exc, "code", None) == FetchErrorCode.UNSUPPORTED_CONTENT_TYPE:
            raise ValueError(f"{exc} HTML, markdown, plain text and PDF can be ingested.") from None
        raise ValueError(f"Could not fetch {url}: {exc}") from None
    if fetched.truncated:
        raise ValueError(f"{url} is larger than {URL_MAX_BYTES // (1024 * 1024)} MB; download it and ingest the file.")
    fmt = knowledge.format_for(media_type=fetched.media_type)
    if fmt in (None, "text"):  # text/plain is often markdown served as is: trust a .md extension
        fmt = "markdown" if knowledge.format_for(fetched.url.split("#")[0]) == "markdown" else "text"
    # HTML and PDF go in as bytes (trafilatura honours the page's declared encoding).
    data = fetched.content if fmt in ("html", "pdf") else fetched.text().encode()
    await charge_bytes(store, user, len(data))
    return await ingest_jobs.RUNNER.ingest(store, slot, kb, [(data, fetched.url, fmt)], date=date, user=user)


def check_uploads(uploads: list[tuple[str, bytes, str | None]]) -> list[tuple[bytes, str, str]]:
    """Uploaded files, `(file name, bytes, media type)` each, as `(bytes, source, format)` (txt,
    md, html or pdf, by extension, else by media type; the source is the file name); ValueError
    naming the file when a type is not supported or a file is too big."""
    checked: list[tuple[bytes, str, str]] = []
    for filename, data, media_type in uploads:
        if len(data) > UPLOAD_MAX_BYTES:
            raise ValueError(f"{filename} is larger than {UPLOAD_MAX_BYTES // (1024 * 1024)} MB.")
        fmt = knowledge.format_for(filename) or knowledge.format_for(media_type=media_type)
        if fmt is None:
            raise ValueError(f"{filename}: unsupported file type; upload .txt, .md, .html or .pdf files.")
        checked.append((data, filename, fmt))
    return checked


async def ingest_uploads(
    store: BaseStore,
    kb: str,
    uploads: list[tuple[str, bytes, str | None]],
    *,
    date: str | None = None,
    user: Any = None,
) -> dict:
    """Ingest uploaded files (`check_uploads`) all or none, as one ingest of `user`
    (server/ingest_jobs.py: IngestBusy when they have one in progress): every file is checked,
    the request's bytes taken from `user`'s ingest quota and, once the files are chunked, their
    chunks from the work quota, before the first is written (QuotaExceeded). Returns
    {"documents", "work"}."""
    checked = check_uploads(uploads)
    async with ingest_jobs.RUNNER.slot(user, kb, [source for _, source, _ in checked]) as slot:
        await charge_bytes(store, user, sum(len(data) for data, _, _ in checked))
        return await ingest_jobs.RUNNER.ingest(store, slot, kb, checked, date=date, user=user)


def can_write(user: Any, entry: dict) -> bool:
    """Whether `user` may change the knowledge base `entry` (the owner rule above)."""
    if user is None or acts_for_any_user(user):
        return True
    return entry.get("owner") is not None and entry.get("owner") == getattr(user, "identity", None)


async def writable_kb(store: BaseStore, user: Any, name: str) -> dict:
    """The registry entry of `name` if `user` may change it; KBUnknownError (also when `user`
    may not read it) or KBForbidden."""
    entry = await knowledge.get_kb(store, name, reader=kb_reader(user))
    if not can_write(user, entry):
        owner = entry.get("owner")
        whose = f"user {owner!r}" if owner else "administrators"
        raise KBForbidden(f"Knowledge base {name!r} is managed by {whose}: you may search it but not change it.")
    return entry


async def create_owned_kb(store: BaseStore, user: Any, name: str, description: str = "") -> dict:
    """Create a knowledge base; a regular user becomes its owner. KBExistsError if it exists."""
    owner = user.identity if user is not None and not acts_for_any_user(user) else None
    return await knowledge.create_kb(store, name, description, owner=owner)


async def share_kb(store: BaseStore, user: Any, name: str, shared: bool) -> dict:
    """Share a knowledge base with every user (or stop): administrators only, KBForbidden otherwise."""
    await knowledge.get_kb(store, name, reader=kb_reader(user))
    if user is not None and not acts_for_any_user(user):
        raise KBForbidden(f"Only an administrator may share knowledge base {name!r} or stop sharing it.")
    return await knowledge.set_shared(store, name, shared)


async def list_sources(store: BaseStore, kb: str, *, reader: str | None = None) -> list[dict]:
    """The documents of a knowledge base `reader` may read, sorted by source: {"source",
    "title", "format", "chunks", "characters", "ingested_at"}."""
    from store.knowledge.registry import search_all

    await knowledge.get_kb(store, kb, reader=reader)
    records = [item.value for item in await search_all(store, knowledge.document_namespace(kb))]
    fields = ("source", "title", "format", "chunks", "characters", "ingested_at")
    return sorted(({f: r.get(f) for f in fields} for r in records), key=lambda r: r["source"])


async def delete_source(store: BaseStore, kb: str, source: str) -> dict:
    """Delete one document (its chunks, their place in the knowledge graph, its full text and
    record) from a knowledge base. Returns {"kb", "source", "chunks"}; SourceUnknown when there is
    no such document."""
    count = await (await knowledge.open(store, kb)).delete_source(source)
    if count is None:
        raise SourceUnknown(f"Knowledge base {kb!r} has no document {source!r}.")
    return {"kb": kb, "source": source, "chunks": count}
