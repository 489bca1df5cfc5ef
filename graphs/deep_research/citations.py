"""Citations that point only at sources retrieved in this run.

The report model sees the run's sources numbered [1]..[k] (`number_sources`) and notes whose URLs
were turned into those numbers (`cite_notes`). `validate_report` then checks every citation of
the report: a number must name a listed source, a URL (in the model's Sources list, a markdown
link or bare) must be one that was retrieved. Anything else is removed and counted, and the
Sources section is rebuilt from the retrieved sources actually cited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

_URL = re.compile(r"(?:https?|kb)://[^\s<>\[\]()\"'`]+")
_TRAILING = ".,;:!?*_'\""
_CITATION = re.compile(r"\s?\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\](?!\()")
_LINK = re.compile(r"\[([^\]\n]*)\]\((https?://[^)\s]+)\)")
_SOURCES_HEADING = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*|\*\*)"
    r"(?:sources|references|bibliography|works cited|参考文献|参考资料|来源|引用)\b.*$",
    re.IGNORECASE | re.MULTILINE,
)
_ENTRY_NUMBER = re.compile(r"^\s*(?:[-*]\s*)?\[?(\d{1,3})[\].:)]")


def normalize_url(url: str) -> str:
    """A comparable form of `url`: no trailing punctuation, fragment or final slash; lower-case host."""
    url = url.strip().rstrip(_TRAILING)
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def number_sources(sources: list[dict]) -> list[dict]:
    """The run's distinct sources (by URL, first seen first), numbered from 1: {n, url, title}."""
    catalog: list[dict] = []
    seen: set[str] = set()
    for source in sources:
        key = normalize_url(source["url"])
        if key in seen:
            continue
        seen.add(key)
        catalog.append({"n": len(catalog) + 1, "url": source["url"], "title": source.get("title") or source["url"]})
    return catalog


def _index(catalog: list[dict]) -> dict[str, int]:
    return {normalize_url(source["url"]): source["n"] for source in catalog}


def cite_notes(text: str, catalog: list[dict]) -> str:
    """Replace the retrieved URLs in notes by their [n]; unknown URLs become '[source not retrieved]'."""
    index = _index(catalog)

    def replace(match: re.Match) -> str:
        raw = match.group(0)
        stripped = raw.rstrip(_TRAILING)
        number = index.get(normalize_url(stripped))
        label = f"[{number}]" if number else "[source not retrieved]"
        return label + raw[len(stripped) :]

    cited = _URL.sub(replace, text)
    # "[[3]]" from a URL that was already in brackets.
    return re.sub(r"\[(\[(?:\d+|source not retrieved)\])\]", r"\1", cited)


@dataclass
class CitationCheck:
    """The validated report and what was removed from it."""

    report: str
    cited: list[int] = field(default_factory=list)
    removed_numbers: list[int] = field(default_factory=list)
    invented_urls: list[str] = field(default_factory=list)

    @property
    def removed(self) -> int:
        """How many citations or links were removed."""
        return len(self.removed_numbers) + len(self.invented_urls)


def _split_sources(report: str) -> tuple[str, str]:
    headings = list(_SOURCES_HEADING.finditer(report))
    if not headings:
        return report, ""
    cut = headings[-1]
    return report[: cut.start()].rstrip(), report[cut.end() :]


def _model_numbering(listing: str, index: dict[str, int], invented: list[str]) -> dict[int, int | None]:
    """The model's own Sources list: its number -> the catalog number of its URL (None if invented)."""
    numbering: dict[int, int | None] = {}
    for line in listing.splitlines():
        number, url = _ENTRY_NUMBER.match(line), _URL.search(line)
        if not url:
            continue
        target = index.get(normalize_url(url.group(0)))
        if target is None:
            invented.append(url.group(0).rstrip(_TRAILING))
        if number:
            numbering[int(number.group(1))] = target
    return numbering


def validate_report(report: str, catalog: list[dict]) -> CitationCheck:
    """Keep only citations of retrieved sources and rebuild the Sources section from them."""
    index = _index(catalog)
    known = {source["n"] for source in catalog}
    check = CitationCheck(report="")
    body, listing = _split_sources(report)
    numbering = _model_numbering(listing, index, check.invented_urls)
    cited: list[int] = []

    def renumber(match: re.Match) -> str:
        kept: list[int] = []
        for raw in re.split(r"\s*[,;]\s*", match.group(1)):
            number = int(raw)
            target = numbering.get(number, number if number in known else None)
            if target is None:
                check.removed_numbers.append(number)
            elif target not in kept:
                kept.append(target)
        cited.extend(kept)
        lead = " " if match.group(0).startswith(" ") else ""
        return lead + "".join(f"[{n}]" for n in kept) if kept else ""

    def relink(match: re.Match) -> str:
        text, url = match.group(1), match.group(2)
        number = index.get(normalize_url(url))
        if number is None:
            check.invented_urls.append(url)
            return text
        cited.append(number)
        return match.group(0)

    def bare(match: re.Match) -> str:
        raw = match.group(0)
        url = raw.rstrip(_TRAILING)
        number = index.get(normalize_url(url))
        if number is None:
            check.invented_urls.append(url)
            return "[link removed: not a retrieved source]" + raw[len(url) :]
        cited.append(number)
        return raw

    body = _CITATION.sub(renumber, body)
    placeholder: list[str] = []

    def hide(match: re.Match) -> str:
        placeholder.append(relink(match))
        return f"\x00{len(placeholder) - 1}\x00"

    body = _LINK.sub(hide, body)
    body = _URL.sub(bare, body)
    body = re.sub(r"\x00(\d+)\x00", lambda m: placeholder[int(m.group(1))], body)

    check.cited = sorted(set(cited))
    by_number = {source["n"]: source for source in catalog}
    lines = [body.rstrip()]
    if check.removed:
        lines.append(
            f"\n_{check.removed} citation(s) that did not match a source retrieved in this research were removed._"
        )
    if check.cited:
        lines.append("\n## Sources\n")
        lines.extend(f"[{n}] {by_number[n]['title']}: {by_number[n]['url']}" for n in check.cited)
    check.report = "\n".join(lines).strip() + "\n"
    return check
