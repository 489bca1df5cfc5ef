"""Check an answer's citations against the sources retrieved in this run, and attach the sources
an answer that cites none of them was written from."""

from __future__ import annotations

import re

_NUMBERED = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_URL = re.compile(r"https?://[^\s\)\]>\"']+")
_WORD = re.compile(r"\w{4,}")
USED_SHARE = 0.2
"""A source counts as used by an uncited answer when it holds at least this share of the answer's
words (of four letters or more)."""


def check_citations(answer: str, sources: list[dict]) -> dict:
    """Find citations in `answer` that match no source of this run.

    Returns {"cited": [n...] valid numbers, "invalid": [n...] numbers with no source,
    "unknown_urls": [url...] links that are not a retrieved source, "attached": [n...] sources
    listed under the answer because it cited none, "text": the answer with each invalid number
    removed from its brackets and unknown links flagged, plus a note, and when it cites no
    source, a numbered list of the sources it was written from (those holding at least
    USED_SHARE of its words, else every source retrieved)}.
    """
    known = {s["index"] for s in sources}
    known_urls = {str(s.get("source") or "").rstrip("/") for s in sources}
    cited: set[int] = set()
    invalid: set[int] = set()

    def fix_numbers(match: re.Match) -> str:
        numbers = [int(n) for n in re.split(r"\s*,\s*", match.group(1))]
        good = [n for n in numbers if n in known]
        cited.update(good)
        invalid.update(n for n in numbers if n not in known)
        return f"[{', '.join(map(str, good))}]" if good else ""

    text = _NUMBERED.sub(fix_numbers, answer)
    unknown_urls: list[str] = []

    def flag_url(match: re.Match) -> str:
        url = match.group(0).rstrip(".,;:")
        rest = match.group(0)[len(url) :]
        if url.rstrip("/") in known_urls:
            return match.group(0)
        if url not in unknown_urls:
            unknown_urls.append(url)
        return f"{url} (unverified: not a retrieved source){rest}"

    text = _URL.sub(flag_url, text)
    notes = []
    if invalid:
        numbers = ", ".join(str(n) for n in sorted(invalid))
        notes.append(
            f"removed citation number(s) {numbers}: only sources 1-{len(sources)} were retrieved"
            if sources
            else f"removed citation number(s) {numbers}: no source was retrieved"
        )
    if unknown_urls:
        notes.append(f"flagged {len(unknown_urls)} link(s) that are not among the retrieved sources")
    if notes:
        text = re.sub(r"[ \t]+([.,;:])", r"\1", text).rstrip() + "\n\n(Citation check: " + "; ".join(notes) + ".)"
    attached = [] if cited else _used_sources(answer, sources)
    if attached:
        listed = "\n".join(f"[{s['index']}] {s['title']} ({s['locator']})" for s in attached)
        text = text.rstrip() + "\n\nSources:\n" + listed
    return {
        "cited": sorted(cited),
        "invalid": sorted(invalid),
        "unknown_urls": unknown_urls,
        "attached": [s["index"] for s in attached],
        "text": text,
    }


def _used_sources(answer: str, sources: list[dict]) -> list[dict]:
    """The sources an uncited answer draws on: those sharing USED_SHARE of its words, else all."""
    words = set(_WORD.findall(answer.casefold()))
    if not words:
        return list(sources)
    used = [
        source
        for source in sources
        if len(words & set(_WORD.findall(f"{source.get('title', '')} {source.get('content', '')}".casefold())))
        >= USED_SHARE * len(words)
    ]
    return used or list(sources)
