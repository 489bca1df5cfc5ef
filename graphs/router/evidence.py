"""Merge the workers' evidence: deduplicate by chunk id, order by the run that covers the others (else fuse
the rankings by RRF), number sources."""

from __future__ import annotations

from store.knowledge import reciprocal_rank_fusion, result_content


def _locator(result: dict) -> str:
    parts = [str(result.get("source") or "")]
    if result.get("page"):
        parts.append(f"page {result['page']}")
    if result.get("section"):
        parts.append(f"section {result['section']}")
    return ", ".join(part for part in parts if part)


COVERS = {
    "fusion": frozenset({"fusion", "hybrid", "graph", "dense", "keyword"}),
    "hybrid": frozenset({"hybrid", "dense", "keyword"}),
    "graph": frozenset({"graph"}),
    "dense": frozenset({"dense"}),
    "keyword": frozenset({"keyword"}),
}
"""Strategy -> the strategies whose signals its ranking already weighs (hybrid fuses the dense and
keyword hits; fusion fuses hybrid's ranking with the graph walk's)."""


def merge_runs(runs: list[dict], top_k: int) -> list[dict]:
    """The `top_k` best passages over all successful worker runs, numbered from 1.

    Each run is `{"kb", "agent_type", "strategy", "retrieval_results": [...]}` ranked best first,
    all of one question's signals. When one run's strategy covers every other run's (`COVERS`:
    the default plan's hybrid covers dense and keyword), its order is the merged order: fusing
    it again with the lists it already weighs would count those signals twice, and a passage
    one weak list ranks high would push out one the fused ranking put first (figures:
    docs/knowledge.md, router's merged sources). Otherwise (say dense and keyword workers only) the lists are fused by
    reciprocal rank fusion. A chunk appears once; `found_by` names every worker that found it.
    Returns sources `{index, kb, chunk_id, source, title, locator, page, section, content, score,
    found_by}` (+ `path` of a graph walk; + `parts` of a chat message sent in parts, whose content
    is then the message whole).
    """
    strategies = {run.get("strategy") for run in runs}
    covering = next((run for run in runs if strategies <= COVERS.get(run.get("strategy") or "", frozenset())), None)
    rankings: dict[int, list[str]] = {}
    by_id: dict[str, dict] = {}
    found_by: dict[str, list[str]] = {}
    for run in sorted(runs, key=lambda run: run is not covering):  # the covering run's fields first
        rankings[id(run)] = []
        for result in run.get("retrieval_results") or []:
            key = f"{run['kb']}:{result['id']}"
            by_id.setdefault(key, {**result, "kb": run["kb"]})
            rankings[id(run)].append(key)
    for run in runs:
        for key in rankings[id(run)]:
            found_by.setdefault(key, []).append(run["agent_type"])
    if covering is not None:
        fused = [(key, float(by_id[key].get("score") or 0.0)) for key in rankings[id(covering)][:top_k]]
    else:
        fused = reciprocal_rank_fusion([rankings[id(run)] for run in runs])[:top_k]
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
                "content": result_content(result),
                "score": round(score, 6),
                "found_by": found_by[key],
                **({"path": result["path"]} if result.get("path") else {}),
                **({"parts": result["parts"]} if result.get("parts") else {}),
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
