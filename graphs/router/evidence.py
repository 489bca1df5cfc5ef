"""Merge the workers' evidence: deduplicate by chunk id, fuse the rankings by RRF, number sources."""

from __future__ import annotations

from store.knowledge import reciprocal_rank_fusion


def _locator(result: dict) -> str:
    parts = [str(result.get("source") or "")]
    if result.get("page"):
        parts.append(f"page {result['page']}")
    if result.get("section"):
        parts.append(f"section {result['section']}")
    return ", ".join(part for part in parts if part)


def merge_runs(runs: list[dict], top_k: int) -> list[dict]:
    """The `top_k` best passages over all successful worker runs, numbered from 1.

    Each run is `{"kb", "retrieval_results": [...]}` ranked best first. A chunk found by several
    workers appears once, scored by reciprocal rank fusion over the workers' lists. Returns
    sources `{index, kb, chunk_id, source, title, locator, page, section, content, score, found_by}`.
    """
    rankings: list[list[str]] = []
    by_id: dict[str, dict] = {}
    found_by: dict[str, list[str]] = {}
    for run in runs:
        ranking = []
        for result in run.get("retrieval_results") or []:
            key = f"{run['kb']}:{result['id']}"
            by_id.setdefault(key, {**result, "kb": run["kb"]})
            found_by.setdefault(key, []).append(run["agent_type"])
            ranking.append(key)
        rankings.append(ranking)
    fused = reciprocal_rank_fusion(rankings)[:top_k]
    sources = []
    for index, (key, score) in enumerate(fused, 1):
        result = by_id[key]
        sources.append(
            {
                "index": index,
                "kb": result["kb"],
                "chunk_id": result["id"],
                "source": result.get("source"),
                "title": result.get("title") or result.get("source"),
                "locator": _locator(result),
                "page": result.get("page"),
                "section": result.get("section"),
                "content": result.get("content") or "",
                "score": round(score, 6),
                "found_by": found_by[key],
                **({"path": result["path"]} if result.get("path") else {}),
            }
        )
    return sources


def passages_text(sources: list[dict]) -> str:
    """The numbered passages the answer model cites (`[n] title (locator)` then the text)."""
    return "\n\n".join(f"[{s['index']}] {s['title']} ({s['locator']})\n{s['content']}" for s in sources)


def extractive_answer(sources: list[dict], header: str, empty: str, limit: int = 3) -> str:
    """An answer made only of the top passages, with their sources (no model involved)."""
    if not sources:
        return empty
    parts = [header]
    for source in sources[:limit]:
        text = source["content"].strip()
        parts.append(f"[{source['index']}] {source['title']} ({source['locator']}):\n{text}")
    return "\n\n".join(parts)
