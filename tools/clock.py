"""The current date and time in an IANA time zone."""

import difflib
import functools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from tools.errors import ToolInputError


def current_time(timezone: str = "UTC") -> dict:
    """Current date, time, weekday and UTC offset in a time zone (daylight saving time included).

    Args:
        timezone: IANA time zone name in "Area/Location" form, e.g. "Asia/Shanghai",
            "Europe/Berlin", "America/New_York", or "UTC" (the default). Case does not matter.
            Abbreviations such as "PST" or offsets such as "UTC+8" are not accepted; use the
            zone of a city in that region instead.

    Returns:
        {"timezone": canonical zone name, "time": ISO 8601 local time with offset, to the second
        (e.g. "2025-07-01T20:15:03+08:00"), "date": "YYYY-MM-DD", "weekday": e.g. "Tuesday",
        "utc_offset": e.g. "+08:00" or "-04:00", "abbreviation": e.g. "CST" or "EDT",
        "dst": whether daylight saving time is in effect}
    """
    zone = ZoneInfo(_canonical_zone_name(timezone))
    local = _now().astimezone(zone)
    offset = local.utcoffset() or timedelta(0)
    return {
        "timezone": zone.key,
        "time": local.isoformat(timespec="seconds"),
        "date": local.date().isoformat(),
        "weekday": local.strftime("%A"),
        "utc_offset": _format_offset(offset),
        "abbreviation": local.tzname(),
        "dst": bool(local.dst()),
    }


def _now() -> datetime:
    return datetime.now(UTC)


def _canonical_zone_name(name: str) -> str:
    cleaned = name.strip()
    if cleaned:
        try:
            ZoneInfo(cleaned)
            return cleaned
        except (ZoneInfoNotFoundError, ValueError):
            pass
        folded = _zones_by_lowercase().get(cleaned.lower())
        if folded:
            return folded
    raise ToolInputError(
        f"Unknown time zone {name!r}. Use an IANA name in 'Area/Location' form, "
        f"e.g. 'Asia/Shanghai', 'Europe/London', 'America/New_York' or 'UTC'." + _suggestions(cleaned)
    )


@functools.cache
def _zones_by_lowercase() -> dict[str, str]:
    return {zone.lower(): zone for zone in available_timezones()}


def _suggestions(name: str) -> str:
    if not name:
        return ""
    zones = _zones_by_lowercase()
    wanted = name.lower().replace(" ", "_")
    same_city = [zone for key, zone in zones.items() if key.rsplit("/", 1)[-1] == wanted]
    regional = [key for key in zones if "/" in key]
    similar = difflib.get_close_matches(wanted, regional, n=3, cutoff=0.6)
    candidates = list(dict.fromkeys(sorted(same_city) + [zones[key] for key in similar]))[:3]
    return f" Did you mean: {', '.join(candidates)}?" if candidates else ""


def _format_offset(offset: timedelta) -> str:
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
