"""Timestamps of memories: the clock, ISO stamps, ages, expiry and the time-range parser."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from store.dates import parse_date, parse_stamp, stamp


def utc_now() -> datetime:
    """The clock (tests replace it)."""
    return datetime.now(UTC)


def written_at(value: dict, now: datetime) -> datetime:
    """When the value's content was last written (`updated_at`, else `created_at`, else now)."""
    return parse_stamp(value.get("updated_at") or value.get("created_at")) or now


def age_days(value: dict, now: datetime) -> float:
    """Days since the value was last written."""
    return (now - written_at(value, now)).total_seconds() / 86400


def resolve_time_range(
    start_date: str | None = None,
    end_date: str | None = None,
    days_ago: int | None = None,
    *,
    now: datetime | None = None,
) -> tuple[datetime | None, datetime | None]:
    """The [start, end) range for `time_filter`. A date-only `end_date` includes that whole day;
    `days_ago` N means from N days before now. Raises ValueError on bad or contradictory input."""
    start = parse_date(start_date, "start_date")
    end = parse_date(end_date, "end_date", end=True)
    if days_ago is not None:
        valid = isinstance(days_ago, int) and not isinstance(days_ago, bool)
        if not valid or not 0 <= days_ago <= 36500:
            raise ValueError(f"days_ago must be an integer from 0 to 36500, got {days_ago!r}")
        if start is not None:
            raise ValueError("give either start_date or days_ago, not both")
        start = (now or utc_now()) - timedelta(days=days_ago)
    if start is None and end is None:
        raise ValueError("give start_date, end_date or days_ago (for the latest items use recent activity)")
    if start is not None and end is not None and start >= end:
        raise ValueError(f"start_date ({stamp(start)}) must be before end_date ({stamp(end)})")
    return start, end
