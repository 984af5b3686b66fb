from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from queenadmin.domain import clock


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2026, 12, 6, 19, 44, 25, 357502, tzinfo=UTC), "2026-12-06T19:44:25.357502Z"),
        (datetime(2026, 1, 1, tzinfo=UTC), "2026-01-01T00:00:00.000000Z"),
        (datetime(197, 1, 2, 3, 4, 5, tzinfo=UTC), "0197-01-02T03:04:05.000000Z"),
        (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "9999-12-31T23:59:59.999999Z"),
        (datetime(2026, 6, 1, 5, tzinfo=ZoneInfo("Europe/Paris")), "2026-06-01T03:00:00.000000Z"),
        (datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=-3))), "2026-01-01T03:00:00.000000Z"),
        (datetime(2026, 1, 1, 7, tzinfo=ZoneInfo("UTC")), "2026-01-01T07:00:00.000000Z"),
    ],
)
def test_iso_micros_z_is_utc_with_six_fraction_digits(moment, text):
    """Any zone is written in UTC, with a four-digit year, six fraction digits and a Z."""
    assert clock.iso_micros_z(moment) == text


def test_iso_micros_z_of_none_is_none():
    """No time renders as none."""
    assert clock.iso_micros_z(None) is None


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2026, 12, 6, 19, 44, 25, 357902, tzinfo=UTC), "2026-12-06T19:44:25.357Z"),
        (datetime(197, 1, 2, 3, 4, 5, tzinfo=UTC), "0197-01-02T03:04:05.000Z"),
        (datetime(2026, 6, 1, 5, 0, 0, 999, tzinfo=ZoneInfo("Europe/Paris")), "2026-06-01T03:00:00.000Z"),
    ],
)
def test_iso_millis_z_is_utc_with_the_fraction_cut_to_milliseconds(moment, text):
    """Any zone is written in UTC, with a four-digit year, the milliseconds (cut, not rounded) and a Z."""
    assert clock.iso_millis_z(moment) == text
