"""The researcher: one run per sub-question, started by the supervisor with `Send`.

search (web_search per query, knowledge bases when asked) -> read (web_read of the best pages)
-> compress (notes whose every claim cites its source URL). A failure is recorded in
`research_log` and never raised: one researcher failing does not fail the report.

It is one node of the main graph rather than a compiled subgraph: a subgraph's custom events
live in its own namespace, which clients only see when they stream subgraphs, and researcher
progress is what a deep-research UI shows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, cast
from urllib.parse import quote

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from graphs.deep_research.budget import approx_tokens, fit_to_budget, invoke_fitted
from graphs.deep_research.citations import cite_sources, normalize_url
from graphs.deep_research.context import ResearchContext
from graphs.deep_research.prompts import COMPRESS_PROMPT
from graphs.deep_research.state import ResearcherInput, ResearcherState
from graphs.runtime.events import emit
from graphs.runtime.models import NOSTREAM_TAGS, load_chat_model
from graphs.runtime.readable import summarize_errors
from graphs.runtime.retry import RetriesExhausted, call_with_retries
from store import knowledge
from tools.errors import TransientToolError
from tools.identity import run_kb_reader
from tools.web_read import web_read
from tools.web_search import SEARCH_PROVIDERS, provider_unreachable, search_config, web_search

SNIPPET_ONLY = "(search result only; page not read)"
NOTES_TOKENS = (256, 1024)
"""Bounds of a researcher's notes, in tokens (`notes_max_tokens`)."""
REACHABILITY_TIMEOUT_S = 10.0  # at most this long (and tool_timeout) to connect to a search provider


def search_providers() -> list[str]:
    """Providers to try in order: the chosen one, else every configured one, else DuckDuckGo."""
    config = search_config()
    if config.provider:
        return [config.provider]
    configured = [name for name, p in SEARCH_PROVIDERS.items() if p.auto_select and p.configured(config)]
    return configured or ["duckduckgo"]


async def search_with_fallback(query: str, context: ResearchContext, runtime: Any = None) -> list[dict]:
    """web_search `query` (charged to the run user's web quota through `runtime`), retrying
    transient failures, then falling back to the next provider.

    Raises RuntimeError with the first provider's error and a count of the others when all of
    them fail.
    """
    errors = []
    for provider in search_providers():

        def search(provider: str = provider) -> Awaitable[list[dict]]:
            found = web_search(query, max_results=context.search_results, provider=provider, runtime=runtime)
            return asyncio.wait_for(found, context.tool_timeout)

        try:
            return await call_with_retries(
                search,
                retries=context.tool_retries,
                is_transient=lambda exc: isinstance(exc, (TransientToolError, TimeoutError)),
                on_retry=lambda attempt, exc, delay: None,
            )
        except RetriesExhausted as failed:
            errors.append(f"{provider}: {failed.error or 'timed out'}")
    raise RuntimeError(summarize_errors(errors))


async def search_unreachable(context: ResearchContext) -> list[str]:
    """Why no search provider `search_with_fallback` would try can be reached (one reason per
    provider, "<provider>: <reason>"), or [] when one can, or when that cannot be told. A
    connection check per provider, side by side, each within REACHABILITY_TIMEOUT_S (or
    `tool_timeout` when shorter): no search is made, so nothing is charged to the user's quota."""
    config = search_config()
    names = search_providers()
    timeout = min(context.tool_timeout, REACHABILITY_TIMEOUT_S)
    try:
        reasons = await asyncio.gather(*(provider_unreachable(name, config, timeout) for name in names))
    except Exception:  # the check itself failed: let the searches tell
        return []
    if not names or not all(reasons):
        return []
    return [f"{name}: {reason}" for name, reason in zip(names, reasons, strict=True)]


def _kb_url(kb: str, source: str) -> str:
    return source if source.startswith(("http://", "https://")) else f"kb://{kb}/{quote(source, safe='/')}"


async def _kb_passages(runtime: Runtime[ResearchContext], question: str) -> tuple[list[dict], list[str]]:
    context = runtime.context
    passages: list[dict] = []
    errors: list[str] = []
    if not context.knowledge_bases:
        return passages, errors
    if runtime.store is None:
        return passages, ["no store is configured, so knowledge bases cannot be searched"]
    for kb in context.knowledge_bases:
        try:
            found = await knowledge.retrieve(
                runtime.store, kb, question, top_k=context.search_results, reader=run_kb_reader(runtime)
            )
        except Exception as exc:
            errors.append(f"knowledge base {kb!r}: {exc}")
            continue
        for hit in found.get("retrieval_results", []):
            passages.append(
                {
                    "url": _kb_url(kb, str(hit.get("source") or hit.get("id"))),
                    "title": hit.get("title") or hit.get("source"),
                    "content": hit.get("content", ""),
                    "kind": "kb",
                }
            )
    return passages, errors


async def search(state: ResearcherState, runtime: Runtime[ResearchContext]) -> dict:
    """Run the sub-question's searches concurrently (and the knowledge bases when asked)."""
    emit(
        "researcher_started",
        researcher_id=state["researcher_id"],
        round=state["round"],
        question=state["question"],
        queries=state["queries"],
    )
    queries = state["queries"] or [state["question"]]
    outcomes = await asyncio.gather(
        *(search_with_fallback(q, runtime.context, runtime) for q in queries), return_exceptions=True
    )
    hits, errors = [], []
    for query, outcome in zip(queries, outcomes, strict=False):
        if isinstance(outcome, BaseException):
            errors.append(f"search {query!r} failed: {outcome}")
        else:
            hits.append(outcome)
    passages, kb_errors = await _kb_passages(runtime, state["question"])
    return {"hits": _interleave(hits), "pages": passages, "errors": errors + kb_errors}


def _interleave(result_lists: list[list[dict]]) -> list[dict]:
    """Every query's best hit first, then every query's second, ...; duplicates dropped."""
    merged, seen = [], set()
    for position in range(max((len(r) for r in result_lists), default=0)):
        for results in result_lists:
            if position < len(results) and results[position]["url"] not in seen:
                seen.add(results[position]["url"])
                merged.append(results[position])
    return merged


async def read(state: ResearcherState, runtime: Runtime[ResearchContext]) -> dict:
    """Read the best-ranked pages with web_read (SSRF-safe, cached), charged to the run user's web
    quota: the tools' quota check reads only `server_info` and `store`, which a node's runtime has."""
    context = runtime.context
    urls = [hit["url"] for hit in state.get("hits", [])][: context.pages_per_researcher]
    if not urls:
        return {}
    try:
        results = await asyncio.wait_for(
            web_read(urls, timeout=min(context.tool_timeout, 120.0), runtime=cast(Any, runtime)),
            context.tool_timeout + 5,
        )
    except Exception as exc:
        return {"errors": [*state.get("errors", []), f"web_read failed: {exc or 'timed out'}"]}
    pages = [
        {"url": r["url"], "title": r.get("title") or r["url"], "content": r["content"], "kind": "page"}
        for r in results
        if r.get("status") == "success"
    ]
    failed = [f"read {r['url']} failed: {r.get('error')}" for r in results if r.get("status") != "success"]
    return {"pages": [*state.get("pages", []), *pages], "errors": [*state.get("errors", []), *failed]}


def _sources(state: ResearcherState) -> list[dict]:
    """Pages and KB passages read, then the search hits that were not read (snippets only)."""
    sources = [dict(page) for page in state.get("pages", [])]
    read_urls = {page["url"] for page in sources}
    sources += [
        {
            "url": hit["url"],
            "title": hit.get("title") or hit["url"],
            "content": f"{SNIPPET_ONLY} {hit.get('snippet', '')}",
            "kind": "search",
        }
        for hit in state.get("hits", [])
        if hit["url"] not in read_urls
    ]
    return sources


def _finish(state: ResearcherState, status: str, error: str | None) -> dict:
    # Distinct by URL, as the report numbers its sources (citations.number_sources).
    found = len(
        {normalize_url(hit["url"]) for hit in state.get("hits", [])}
        | {normalize_url(s["url"]) for s in state.get("pages", []) if s["kind"] == "kb"}
    )
    read_count = sum(1 for s in state.get("pages", []) if s["kind"] == "page")
    emit(
        "researcher_finished",
        researcher_id=state["researcher_id"],
        round=state["round"],
        question=state["question"],
        status=status,
        sources_found=found,
        sources_read=read_count,
        error=error,
    )
    return {
        "research_log": [
            {
                "researcher_id": state["researcher_id"],
                "round": state["round"],
                "question": state["question"],
                "status": status,
                "sources_found": found,
                "sources_read": read_count,
                "error": error,
                "errors": state.get("errors", []),
            }
        ]
    }


def notes_max_tokens(texts: list[str], ceiling: int | None = None) -> int:
    """The most tokens a researcher's notes on `texts` may take: half the sources' tokens, within
    NOTES_TOKENS, and within the run's `max_tokens` when it sets one. Notes compress what was
    read; unbounded, a small model on a CPU wrote 1,648 tokens of notes on two short pages (nine
    minutes at 3 tokens/s). A finding the limit cuts off loses only itself: each one ends with
    its source."""
    low, high = NOTES_TOKENS
    bound = min(high, max(low, sum(map(approx_tokens, texts)) // 2))
    return min(bound, ceiling) if ceiling else bound


async def compress(state: ResearcherState, runtime: Runtime[ResearchContext], config: RunnableConfig) -> dict:
    """Compress what was retrieved into notes citing a source URL for every claim."""
    context = runtime.context
    sources = _sources(state)
    if not sources:
        reason = summarize_errors(state.get("errors", [])) or "the searches found nothing"
        return _finish(state, "error", reason)
    texts = [f"URL: {s['url']}\nTitle: {s['title']}\n{s['content']}" for s in sources]
    template = COMPRESS_PROMPT.format(question=state["question"], brief=state.get("brief", ""), sources="")
    budget = int(context.context_window_tokens * 0.75) - approx_tokens(template)
    fitted = fit_to_budget(texts, budget, stage="compress")

    def notes_call(max_tokens: int | None) -> Any:
        model = load_chat_model(
            context.model_for("compression"),
            temperature=context.temperature,
            timeout=context.model_timeout,
            max_tokens=max_tokens,
        ).with_config(tags=NOSTREAM_TAGS, run_name="compress_research")

        def prompt(parts: list[str]) -> str:
            return COMPRESS_PROMPT.format(
                question=state["question"], brief=state.get("brief", ""), sources="\n\n---\n\n".join(parts)
            )

        return invoke_fitted(model, prompt, fitted, config, context, stage="compress", step=state["round"])

    try:
        response = await notes_call(notes_max_tokens(fitted, context.max_tokens))
        if not response.text.strip():  # a reasoning model can spend the bound on its reasoning
            response = await notes_call(context.max_tokens)
    except Exception as exc:
        return _finish(state, "error", f"compression failed: {exc}")
    text, _ = cite_sources(response.text, sources)  # notes written without any address
    notes = {"researcher_id": state["researcher_id"], "question": state["question"], "text": text}
    catalog = [
        {"url": s["url"], "title": s["title"], "kind": s["kind"], "researcher_id": state["researcher_id"]}
        for s in sources
    ]
    return {"notes": [notes], "sources": catalog, **_finish(state, "success", None)}


async def research(state: ResearcherInput, runtime: Runtime[ResearchContext], config: RunnableConfig) -> dict:
    """Research one sub-question: search, read, compress; returns its notes, sources and log entry."""
    work: ResearcherState = {**state, "hits": [], "pages": [], "errors": []}
    try:
        # each step returns some of ResearcherState's keys
        work.update(cast(ResearcherState, await search(work, runtime)))
        work.update(cast(ResearcherState, await read(work, runtime)))
        return await compress(work, runtime, config)
    except Exception as exc:
        return _finish(work, "error", f"researcher failed: {type(exc).__name__}: {exc}")
