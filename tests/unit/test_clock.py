from datetime import UTC, datetime, timedelta

import pytest

from tools import clock
from tools.clock import current_time
from tools.errors import ToolInputError

SUMMER = datetime(2025, 7, 1, 12, 0, 5, tzinfo=UTC)  # a Tuesday
WINTER = datetime(2025, 1, 15, 23, 30, 0, tzinfo=UTC)  # a Wednesday


@pytest.fixture
def frozen_now(monkeypatch):
    def freeze(instant: datetime) -> None:
        monkeypatch.setattr(clock, "_now", lambda: instant)

    return freeze


@pytest.mark.parametrize(
    ("zone", "instant", "time", "weekday", "offset", "abbreviation", "dst"),
    [
        ("UTC", SUMMER, "2025-07-01T12:00:05+00:00", "Tuesday", "+00:00", "UTC", False),
        ("Asia/Shanghai", SUMMER, "2025-07-01T20:00:05+08:00", "Tuesday", "+08:00", "CST", False),
        ("Asia/Kolkata", SUMMER, "2025-07-01T17:30:05+05:30", "Tuesday", "+05:30", "IST", False),
        ("America/New_York", SUMMER, "2025-07-01T08:00:05-04:00", "Tuesday", "-04:00", "EDT", True),
        ("America/New_York", WINTER, "2025-01-15T18:30:00-05:00", "Wednesday", "-05:00", "EST", False),
        ("America/St_Johns", WINTER, "2025-01-15T20:00:00-03:30", "Wednesday", "-03:30", "NST", False),
        ("Asia/Tokyo", WINTER, "2025-01-16T08:30:00+09:00", "Thursday", "+09:00", "JST", False),
    ],
)
def test_time_in_zone(frozen_now, zone, instant, time, weekday, offset, abbreviation, dst):
    frozen_now(instant)

    result = current_time(zone)

    assert result == {
        "timezone": zone,
        "time": time,
        "date": time[:10],
        "weekday": weekday,
        "utc_offset": offset,
        "abbreviation": abbreviation,
        "dst": dst,
    }


def test_default_zone_is_utc_and_uses_the_real_clock():
    before = datetime.now(UTC)
    result = current_time()
    after = datetime.now(UTC)

    assert result["timezone"] == "UTC"
    reported = datetime.fromisoformat(result["time"])
    assert before.replace(microsecond=0) <= reported <= after
    assert reported.utcoffset() == timedelta(0)


def test_zone_name_is_case_insensitive(frozen_now):
    frozen_now(SUMMER)

    result = current_time("  asia/SHANGHAI ")

    assert result["timezone"] == "Asia/Shanghai"
    assert result["utc_offset"] == "+08:00"


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "", "../../etc/passwd", "UTC+8"])
def test_unknown_zone_is_an_input_error_with_format_hint(zone):
    with pytest.raises(ToolInputError) as raised:
        current_time(zone)

    assert "Asia/Shanghai" in str(raised.value)
    assert repr(zone) in str(raised.value)


@pytest.mark.parametrize(
    ("zone", "suggested"),
    [("Shanghai", "Asia/Shanghai"), ("New York", "America/New_York"), ("Europe/Berln", "Europe/Berlin")],
)
def test_unknown_zone_suggests_close_names(zone, suggested):
    with pytest.raises(ToolInputError, match=f"Did you mean: .*{suggested}"):
        current_time(zone)
