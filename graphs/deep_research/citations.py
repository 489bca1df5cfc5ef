"""Citations that point only at sources retrieved in this run.

The report model sees the run's sources numbered [1]..[k] (`number_sources`) and notes whose URLs
were turned into those numbers (`cite_notes`). `validate_report` then checks every citation of
the report: a number must name a listed source, a URL (in the model's Sources list, a markdown
link or bare) must be one that was retrieved. Anything else is removed and counted, and the
Sources section is rebuilt from the retrieved sources actually cited.

Small models often write a sound report but drop the [n] markers. Given the cited notes,
`validate_report` then attributes citations (`attribute_citations`): a sentence, list item or
table row of the report that cites nothing gets the [n] of the note sentence that supports it,
and only then. Support is a plain word test: the unit's content words (lower case, stopwords
removed, a final plural "s" dropped, numbers kept as tokens) overlap a cited note sentence's by
at least two thirds and in at least 3 words (2 when one is a number), and every number and
negation of the unit is in that note sentence. Headings, opinions and "could not establish"
sentences share too little with any note to be cited. How many were attributed is counted
(`CitationCheck.attributed`, the `citations_checked` event's `attributed`).
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
# Attribution: a report unit is supported by a note sentence sharing >= SUPPORT of its content words.
SUPPORT = 2 / 3
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
_SENTENCE_END = re.compile(r"((?<=[.!?])\s+(?!\[)|(?<=[。！？])(?!\[))")  # kept by split: a sentence's space
_NEGATIONS = frozenset({"not", "no", "never", "cannot", "without", "unknown", "unclear", "neither", "nor"})
_NUMBER_TEXT = "two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred"
_NUMBER_WORDS = dict(zip(_NUMBER_TEXT.split(), [*map(str, range(2, 13)), "20", "30", "40", "50", "100"], strict=True))
_STOPWORD_TEXT = """a about above after again all also am an and any are as at be been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here
    hers him his how i if in into is it its itself just may me might more most much must my of off on once
    only or other our ours out over own per same she should so some such than that the their theirs them then
    there these they this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours according approximately around based generally including
    many often overall report research shows show source sources study typically usually various"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


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


def _tokens(text: str) -> set[str]:
    """Content words of `text`: lower case, no stopwords, numbers as digits, a plural "s" dropped."""
    words: set[str] = set()
    for token in _TOKEN.findall(text.lower().replace("n't", " not")):
        if _CJK.search(token):  # no spaces between words: character pairs
            words.update(token[i : i + 2] for i in range(max(len(token) - 1, 1)))
        elif token[0].isdigit():
            words.add(token.replace(",", ""))
        elif len(token) > 1 and token not in _STOPWORDS:
            token = _NUMBER_WORDS.get(token, token)
            words.add(token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token)
    return words


def _evidence(notes: list[str], known: set[int]) -> list[tuple[set[str], list[int]]]:
    """Each note sentence with the listed sources it cites; a sentence citing nothing takes the
    citation that ends its finding: the next citation before the next heading, on its line or on
    a line of its own below ("The oven reaches 150 degrees.", then "**Source:** [1]": a small
    model's notes often end a finding so)."""
    evidence: list[tuple[set[str], list[int]]] = []
    pending: list[set[str]] = []
    for line in "\n".join(notes).splitlines():
        if line.lstrip().startswith("#"):  # a new finding, or another researcher's notes
            pending = []
            continue
        for sentence in _SENTENCE_END.split(line)[::2]:
            numbers = [int(n) for group in _CITATION.findall(sentence) for n in re.split(r"\s*[,;]\s*", group)]
            numbers = sorted({n for n in numbers if n in known})
            pending.append(_tokens(_CITATION.sub(" ", sentence)))
            if numbers:
                evidence.extend((words, numbers) for words in pending)
                pending = []
    return evidence


def _support(unit: str, evidence: list[tuple[set[str], list[int]]]) -> list[int]:
    """The citations of the note sentence that best supports `unit`, or [] when none does."""
    words = _tokens(unit)
    exact = {w for w in words if w[0].isdigit() or w in _NEGATIONS}
    best: tuple[float, list[int]] = (0.0, [])
    for note, numbers in evidence:
        shared = words & note
        enough = len(shared) >= 3 or (len(shared) >= 2 and any(w[0].isdigit() for w in shared))
        score = len(shared) / len(words) if words else 0.0
        if enough and exact <= note and score >= SUPPORT and score > best[0]:
            best = (score, numbers)
    return best[1]


def cite_sources(notes: str, sources: list[dict]) -> tuple[str, int]:
    """A researcher's `notes` that cite none of its `sources` ({url, content}), each sentence
    that a sentence of one source supports (the test of `attribute_citations`) ending with that
    source's URL in brackets; and how many were cited. A small model sometimes writes its notes
    with no address at all ("The mid-size pump mentioned in the document lifts about 5000
    litres a day."): the report could then cite nothing. Notes that cite a source are returned
    as they are."""
    urls = {normalize_url(source["url"]) for source in sources}
    if not sources or any(normalize_url(found) in urls for found in _URL.findall(notes)):
        return notes, 0
    evidence = [
        (_tokens(sentence), [index])
        for index, source in enumerate(sources)
        for line in str(source.get("content") or "").splitlines()
        for sentence in _SENTENCE_END.split(line)[::2]
    ]
    cited = 0

    def cite(sentence: str) -> str:
        nonlocal cited
        found = _support(sentence, evidence) if sentence.strip() else []
        if not found:
            return sentence
        cited += 1
        core = sentence.rstrip()
        return f"{core} [{sources[found[0]]['url']}]{sentence[len(core) :]}"

    lines = []
    for line in notes.split("\n"):
        skip = line.lstrip().startswith("#")
        lines.append(line if skip else "".join(cite(part) for part in _SENTENCE_END.split(line)))
    return "\n".join(lines), cited


def attribute_citations(body: str, notes: list[str], known: set[int]) -> tuple[str, int]:
    """`body` with a citation added to each sentence, list item or table row that cites nothing
    and that a cited note sentence supports (see the module docstring); and how many were added."""
    evidence = _evidence(notes, known)
    if not evidence:
        return body, 0
    added = 0

    def cite(unit: str) -> str:
        nonlocal added
        if _CITATION.search(unit) or _URL.search(unit) or "[link removed" in unit:
            return unit
        numbers = _support(unit, evidence)
        if not numbers:
            return unit
        added += 1
        marks = "".join(f"[{n}]" for n in numbers)
        if unit.rstrip().endswith("|"):  # a table row: in its last cell
            return f"{unit.rstrip()[:-1].rstrip()} {marks} |"
        core = unit.rstrip()
        text = core.rstrip(".!?。！？:;")
        return f"{text} {marks}{core[len(text) :]}{unit[len(core) :]}"

    lines = body.split("\n")
    for i, line in enumerate(lines):
        stripped = line.strip()
        following = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if (
            not stripped
            or stripped.startswith(("#", "```", "---", "***"))
            or re.fullmatch(r"\*\*[^*]+\*\*:?", stripped)
        ):
            continue
        if stripped.startswith("|"):
            if not re.fullmatch(r"[|:\-\s]+", stripped) and not re.fullmatch(r"\|[|:\-\s]+", following):
                lines[i] = cite(line)  # a row, not a header (followed by |---|) or a separator
            continue
        lines[i] = "".join(cite(part) for part in _SENTENCE_END.split(line))
    return "\n".join(lines), added


@dataclass
class CitationCheck:
    """The validated report and what was removed from it."""

    report: str
    cited: list[int] = field(default_factory=list)
    removed_numbers: list[int] = field(default_factory=list)
    invented_urls: list[str] = field(default_factory=list)
    attributed: int = 0

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


def validate_report(report: str, catalog: list[dict], notes: list[str] | None = None) -> CitationCheck:
    """Keep only citations of retrieved sources, attribute citations from the cited `notes` to
    what cites nothing (`attribute_citations`) and rebuild the Sources section."""
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
    body, check.attributed = attribute_citations(body, notes or [], known)
    cited.extend(int(n) for group in _CITATION.findall(body) for n in re.split(r"\s*[,;]\s*", group))

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
