"""Manage knowledge bases and users' memories from the shell, on the configured store
(POSTGRES_URI, else the embedded Postgres, started if needed).

    python -m server.cli ingest <kb> <path-or-url>... [--description TEXT]
    python -m server.cli list
    python -m server.cli search <kb> <query> [--strategy hybrid|dense|keyword] [--top-k 5]
    python -m server.cli delete <kb>
    python -m server.cli delete-memory <user_id> <memory_id>
    python -m server.cli forget-user <user_id>

An entry point above the layers: it uses store/ (knowledge bases, memories) and tools.net.
Every command takes `--json` for machine-readable output. URLs are fetched with the SSRF-safe
fetch of tools.net (public http(s) only; set WEB_ALLOW_LOOPBACK=1 to allow 127.0.0.1/::1);
HTML, markdown, plain-text and PDF URLs are supported (server/kb.py, shared with the HTTP routes).
`ingest` reports every source: what went in, what was skipped, and what failed with its reason;
a failed source does not stop the others, and the exit status is then 1 with a summary on stderr.
Only `ingest` and `search` load the embeddings model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import textwrap
from collections.abc import Awaitable, Callable
from typing import Any

from server.kb import ingest_url
from store import knowledge, memory


def _is_url(target: str) -> bool:
    return target.lower().startswith(("http://", "https://"))


async def cmd_ingest(store, args) -> dict:
    """Create the knowledge base if needed, then ingest every path or URL given; a source that
    fails is listed in `failed` with the reason and the others are still ingested."""
    await knowledge.create_kb(store, args.kb, args.description or "", exist_ok=True)
    documents, skipped, failed = [], [], []
    for target in args.targets:
        try:
            if _is_url(target):
                documents += (await ingest_url(store, args.kb, target))["documents"]
            else:
                result = await knowledge.ingest_path(store, args.kb, target)
                documents.extend(result["documents"])
                skipped.extend(result["skipped"])
                failed.extend(result["failed"])
        except (ValueError, OSError) as exc:
            failed.append({"source": target, "error": str(exc)})
    kb = await knowledge.get_kb(store, args.kb)
    return {"kb": kb, "documents": documents, "skipped": skipped, "failed": failed}


async def cmd_list(store, args) -> list[dict]:
    """Every knowledge base with its counts."""
    return await knowledge.list_kbs(store)


async def cmd_search(store, args) -> dict:
    """Search one knowledge base."""
    return await knowledge.retrieve(store, args.kb, args.query, strategy=args.strategy, top_k=args.top_k)


async def cmd_delete(store, args) -> dict:
    """Delete a knowledge base and everything in it."""
    return await knowledge.delete_kb(store, args.kb)


async def cmd_delete_memory(store, args) -> dict:
    """Delete one memory of a user by id."""
    return await memory.open(store, args.user_id).delete(args.memory_id)


async def cmd_forget_user(store, args) -> dict:
    """Delete every memory, profile and chat message of a user."""
    return {"user_id": args.user_id, "deleted": await memory.open(store, args.user_id).forget()}


def render_ingest(result: dict) -> str:
    lines = [
        f"{d['status']:<9} {d['chunks']:>5} chunks  {d['format']:<8} {d['source']}  ({d['title']})"
        for d in result["documents"]
    ]
    lines += [f"skipped   unsupported file type: {path}" for path in result["skipped"]]
    lines += [f"failed    {item['source']}: {item['error']}" for item in result["failed"]]
    kb = result["kb"]
    lines.append(f"knowledge base {kb['name']}: {kb['documents']} documents, {kb['chunks']} chunks")
    return "\n".join(lines)


def ingest_failures(result: dict) -> str | None:
    """The one-line summary of an ingest whose sources did not all go in, else None."""
    failed = result["failed"]
    if not failed:
        return None
    sources = ", ".join(item["source"] for item in failed)
    went_in = len(result["documents"])
    return f"{len(failed)} source(s) failed ({sources}); {went_in} document(s) from the others were ingested"


def render_list(kbs: list[dict]) -> str:
    if not kbs:
        return "no knowledge bases"
    width = max(len(kb["name"]) for kb in kbs)
    header = f"{'name':<{width}}  documents  chunks  updated                    description"
    rows = [
        f"{kb['name']:<{width}}  {kb['documents']:>9}  {kb['chunks']:>6}  {kb['updated_at']:<25}  {kb.get('description') or ''}"
        for kb in kbs
    ]
    return "\n".join([header, *rows])


def render_search(result: dict) -> str:
    if not result["retrieval_results"]:
        return f"no results in {result['kb']} for {result['query']!r} ({result['strategy']})"
    blocks = []
    for item in result["retrieval_results"]:
        where = ", ".join(
            part
            for part in (
                item["source"],
                item["page"] and f"page {item['page']}",
                item["section"] and f"section {item['section']}",
            )
            if part
        )
        excerpt = textwrap.shorten(" ".join(item["content"].split()), width=300, placeholder=" ...")
        blocks.append(f"[{item['index']}] score {item['score']:.4f}  {item['title']}\n    {where}\n    {excerpt}")
    return "\n".join(blocks)


def render_delete(result: dict) -> str:
    return f"deleted knowledge base {result['name']}: {result['documents']} documents, {result['chunks']} chunks"


def render_delete_memory(result: dict) -> str:
    if not result["deleted"]:
        return f"no memory {result['id']} for this user"
    return f"deleted {result['kind']} memory {result['id']}"


def render_forget_user(result: dict) -> str:
    return f"forgot user {result['user_id']}: {result['deleted']} items deleted"


# name -> (command run on the store with the parsed arguments, text rendering of its result)
COMMANDS: dict[str, tuple[Callable[[Any, argparse.Namespace], Awaitable[Any]], Callable[[Any], str]]] = {
    "ingest": (cmd_ingest, render_ingest),
    "list": (cmd_list, render_list),
    "search": (cmd_search, render_search),
    "delete": (cmd_delete, render_delete),
    "delete-memory": (cmd_delete_memory, render_delete_memory),
    "forget-user": (cmd_forget_user, render_forget_user),
}


def parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    top = argparse.ArgumentParser(
        prog="python -m server.cli", description="Manage knowledge bases and users' memories."
    )
    sub = top.add_subparsers(dest="command", required=True)
    ingest = sub.add_parser("ingest", parents=[common], help="ingest files, folders or URLs (creates the kb)")
    ingest.add_argument("kb")
    ingest.add_argument("targets", nargs="+", metavar="path-or-url")
    ingest.add_argument("--description", default="")
    sub.add_parser("list", parents=[common], help="list knowledge bases")
    search = sub.add_parser("search", parents=[common], help="search a knowledge base")
    search.add_argument("kb")
    search.add_argument("query")
    search.add_argument("--strategy", choices=knowledge.STRATEGIES, default="hybrid")
    search.add_argument("--top-k", type=int, default=5)
    delete = sub.add_parser("delete", parents=[common], help="delete a knowledge base")
    delete.add_argument("kb")
    delete_memory = sub.add_parser("delete-memory", parents=[common], help="delete one memory of a user")
    delete_memory.add_argument("user_id")
    delete_memory.add_argument("memory_id")
    forget = sub.add_parser("forget-user", parents=[common], help="delete all memories and chat history of a user")
    forget.add_argument("user_id")
    return top


async def run(args: argparse.Namespace) -> object:
    """Open the configured store and run one command."""
    from store.postgres import store

    command, _render = COMMANDS[args.command]
    async with store() as pg_store:
        return await command(pg_store, args)


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the exit status (1 on a usage or data error, or when a source of an
    ingest failed, with the reason on stderr; what did go in is printed all the same)."""
    args = parser().parse_args(argv)
    try:
        result = asyncio.run(run(args))
    except (ValueError, OSError) as exc:  # KBUnknownError, bad names/arguments, missing files
        print(f"error: {exc}", file=sys.stderr)
        return 1
    render = COMMANDS[args.command][1]
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json else render(result))
    failures = ingest_failures(result) if args.command == "ingest" and isinstance(result, dict) else None
    if failures:
        print(f"error: {failures}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
