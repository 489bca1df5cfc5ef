"""Dates named in a query ("in the week of 8 May 2023", "in April 2023", "last week"), resolved
to a time range by `query_time_range`: the hybrid pipeline (store/hybrid.py) boosts the
memories written in it, and for knowledge bases the chunks of
documents dated in it. A time named by an event ("in the week after the surf lessons") is
parsed by `event_relative`; `query_window` resolves either, with a search that finds the event."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

DATE_FORMAT_HELP = "ISO 8601: 'YYYY-MM-DD' or 'YYYY-MM-DDTHH:MM[:SS][+HH:MM]' (UTC when no offset)"

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        1,
    )
    for name in names
}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH})\.?,?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(\d{{4}})\b", re.I)
_LAST_MONTH_NAME = re.compile(rf"\blast\s+({_MONTH})\b", re.I)
_WEEK_OF = re.compile(r"\bweek\s+of\b", re.I)
_RELATIVE = re.compile(r"\b(yesterday|last\s+week|last\s+month|(\d+)\s+(day|week|month)s?\s+ago)\b", re.I)
_EVENT_RELATIVE = re.compile(r"\s*\b(?:in\s+|during\s+|on\s+)?the\s+(day|week|month)\s+(after|before)\s+(?=\w)", re.I)
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30}


def stamp(moment: datetime) -> str:
    """The UTC ISO stamp (microseconds) stored values carry: one format, so text comparison
    orders stamps by time."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def parse_stamp(text: str | None) -> datetime | None:
    """The datetime of a stamp, None for None or ""."""
    return datetime.fromisoformat(text) if text else None


def expired(value: dict, now: datetime) -> bool:
    """Whether the value's `expires_at` has passed."""
    expires = parse_stamp(value.get("expires_at"))
    return expires is not None and expires <= now


def parse_date(text: Any, name: str, *, end: bool = False) -> datetime | None:
    """A datetime given as ISO 8601 text (`DATE_FORMAT_HELP`) or as a datetime, in UTC when it
    has no offset; None for None or "". A date alone is that day's start, or with `end` the next
    day's start (so an end date includes its day). Raises ValueError naming `name`."""
    if text is None or text == "":
        return None
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=UTC)
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a string in {DATE_FORMAT_HELP}")
    try:
        if len(text.strip()) == 10:
            day = date.fromisoformat(text.strip())
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
            return moment + timedelta(days=1) if end else moment
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a valid date; use {DATE_FORMAT_HELP}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _day(year: int, month: int, day: int) -> datetime | None:
    try:
        return datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None


def query_time_range(query: str, now: datetime) -> tuple[datetime, datetime] | None:
    """The [start, end) UTC range a query names, or None. A full date is that day, or its
    Monday-to-Sunday week after "week of"; "May 2023" the month; "last May" the latest May
    before `now`'s month; "yesterday", "last week", "last month", "N days/weeks/months ago"
    count back from `now` (the week or month around it)."""
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy"), (_ISO_DATE, "iso")):
        match = pattern.search(query)
        if not match:
            continue
        if order == "dmy":
            day = _day(int(match[3]), MONTHS[match[2].lower()], int(match[1]))
        elif order == "mdy":
            day = _day(int(match[3]), MONTHS[match[1].lower()], int(match[2]))
        else:
            day = _day(int(match[1]), int(match[2]), int(match[3]))
        if day is None:
            return None
        if _WEEK_OF.search(query):
            monday = day - timedelta(days=day.weekday())
            return monday, monday + timedelta(days=7)
        return day, day + timedelta(days=1)
    match = _MONTH_YEAR.search(query)
    if match:
        return _month(int(match[2]), MONTHS[match[1].lower()])
    match = _LAST_MONTH_NAME.search(query)
    if match:
        month = MONTHS[match[1].lower()]
        year = now.year if month < now.month else now.year - 1
        return _month(year, month)
    match = _RELATIVE.search(query)
    if match:
        today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        phrase = match[1].lower()
        if phrase == "yesterday":
            return today - timedelta(days=1), today
        if phrase.startswith("last week"):
            return today - timedelta(days=7), today
        if phrase.startswith("last month"):
            return today - timedelta(days=31), today
        count, unit = int(match[2]), match[3].lower()
        days = {"day": 1, "week": 7, "month": 30}[unit] * count
        spread = {"day": 1, "week": 4, "month": 15}[unit]
        center = today - timedelta(days=days)
        return center - timedelta(days=spread), center + timedelta(days=spread + 1)
    return None


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


@dataclass(frozen=True)
class EventRelative:
    """A time a query names by an event: "in the week after <event>" (`days` 7, `after`)."""

    event_query: str  # the query without its time phrase: what finds the event
    days: int
    after: bool

    def window(self, event_at: datetime) -> tuple[datetime, datetime]:
        """The [start, end) UTC range in whole days next to the event's day: "the week after"
        an event of Monday is Tuesday to the next Monday, "the day before" it is Sunday."""
        day = event_at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        if self.after:
            return day + timedelta(days=1), day + timedelta(days=1 + self.days)
        return day - timedelta(days=self.days), day


def event_relative(query: str) -> EventRelative | None:
    """ "What did Tom do in the week after getting braces removed?" -> EventRelative("What did
    Tom do getting braces removed?", 7, after=True); None when the query names no day, week or
    month after or before something."""
    match = _EVENT_RELATIVE.search(query)
    if match is None:
        return None
    event_query = (query[: match.start()] + " " + query[match.end() :]).strip()
    return EventRelative(event_query, _UNIT_DAYS[match[1].lower()], match[2].lower() == "after")


async def query_window(
    query: str, now: datetime, event_time: Callable[[str], Awaitable[datetime | None]]
) -> tuple[datetime, datetime] | None:
    """The [start, end) UTC range a query names: a date or range (`query_time_range`), else the
    days next to an event it names (`event_relative`), the event's time found by
    `event_time(the query without its time phrase)`; None when it names none or the event has
    no time."""
    window = query_time_range(query, now)
    relative = event_relative(query) if window is None else None
    if relative is None:
        return window
    event_at = await event_time(relative.event_query)
    return relative.window(event_at) if event_at else None


def names_time(query: str, now: datetime) -> bool:
    """Whether the query says when it asks about: a date or range (`query_time_range`) or a
    time next to an event (`event_relative`)."""
    return query_time_range(query, now) is not None or event_relative(query) is not None


TOLD_LATER = timedelta(days=35)  # how long after a time a message may tell of it ("last month", "five weeks ago")
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a couple of": 2}
_NUMBER_WORDS |= {"a few": 3, "couple of": 2, "few": 3}
_COUNT = r"(\d+|an?|one|two|three|four|five|six|a couple of|couple of|a few|few)"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_TOLD = re.compile(
    rf"\b(?:(yesterday|last night|the other day)|{_COUNT}\s+(day|week|month|year)s?\s+ago|"
    rf"last\s+(week|weekend|month|year|{'|'.join(_WEEKDAYS)})|"
    rf"(?:earlier|at the (?:start|beginning)) (?:this|of the) (week|month))\b",
    re.I,
)


def told_spans(text: str, written: datetime) -> list[tuple[datetime, datetime]]:
    """The [start, end) UTC ranges a message's words put what it tells in, counted back from when
    it was `written`: "yesterday" the day before, "three days ago" that day, "the other day" the
    four days before, "last week" / "a week ago" the two weeks before (a week either side of
    seven days back, the writer's week or the one before), "two weeks ago" that week give or take
    four days, "last weekend" the Saturday and Sunday before, "last Friday" the Friday before,
    "last month" / "a month ago" the calendar month before, "N months ago" that month, "last
    year" / "a year ago" the year before; [] for a message telling no such time. A question
    naming a time finds the message telling of it in these words days or weeks later
    (`store.hybrid.gather`)."""
    today = written.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    spans: list[tuple[datetime, datetime]] = []
    for match in _TOLD.finditer(text):
        near, count, unit, last, early = match.groups()
        if near:
            phrase = near.lower()
            if phrase == "yesterday":
                spans.append((today - timedelta(days=1), today))
            elif phrase == "last night":
                spans.append((today - timedelta(days=1), today + timedelta(days=1)))
            else:
                spans.append((today - timedelta(days=4), today))
        elif count:
            number = int(count) if count.isdigit() else _NUMBER_WORDS[count.lower()]
            unit = unit.lower()
            if unit == "day":
                day = today - timedelta(days=number)
                spans.append((day, day + timedelta(days=1)))
            elif unit == "week":
                center = today - timedelta(days=7 * number)
                spans.append((center - timedelta(days=4), min(center + timedelta(days=5), today)))
            elif unit == "month":
                spans.append(_months_back(today, number))
            else:
                spans.append(
                    (
                        datetime(today.year - number, 1, 1, tzinfo=UTC),
                        datetime(today.year - number + 1, 1, 1, tzinfo=UTC),
                    )
                )
        elif last:
            last = last.lower()
            if last == "week":
                spans.append((today - timedelta(days=14), today))
            elif last == "weekend":
                saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
                spans.append((saturday, saturday + timedelta(days=2)))
            elif last == "month":
                spans.append(_months_back(today, 1))
            elif last == "year":
                spans.append((datetime(today.year - 1, 1, 1, tzinfo=UTC), datetime(today.year, 1, 1, tzinfo=UTC)))
            else:
                day = today - timedelta(days=(today.weekday() - _WEEKDAYS.index(last)) % 7 or 7)
                spans.append((day, day + timedelta(days=1)))
        elif early:
            start = today - timedelta(days=today.weekday()) if early.lower() == "week" else today.replace(day=1)
            spans.append((start, today + timedelta(days=1)))
    return spans


def _months_back(today: datetime, number: int) -> tuple[datetime, datetime]:
    """The calendar month `number` months before `today`'s."""
    index = today.year * 12 + today.month - 1 - number
    return _month(index // 12, index % 12 + 1)


def tells_of(text: str, written: datetime, window: tuple[datetime, datetime]) -> bool:
    """Whether a message `written` then is about `window`: written in it, or telling of a time
    (`told_spans`) that meets it and is at most twice as long ("yesterday" for a day, "last
    month" for a month; not "last month" for a day of it)."""
    start, end = window
    if start <= written < end:
        return True
    return any(s < end and start < e and e - s <= 2 * (end - start) for s, e in told_spans(text, written))


# A question asking for a time: "When did...", "What year...", "Which month...", "How long ago...".
_ASKS_WHEN = re.compile(
    r"^\s*(?:when\b|(?:in\s+)?(?:what|which)\s+(?:year|month|day|date|week|weekend|season)\b|how\s+long\s+ago\b)",
    re.I,
)


def asks_when(query: str) -> bool:
    """Whether a question asks for a time ("When did Maria get in a car accident?")."""
    return bool(_ASKS_WHEN.search(query))
