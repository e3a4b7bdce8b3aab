"""``utc_text``: the one spelling of a UTC time in what Headroom prints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from controlplane.domain.timestamps import utc_text


def test_a_utc_time_reads_as_rfc_3339_with_a_z_not_plus_zero() -> None:
    assert utc_text(datetime(2026, 12, 3, 8, 0, tzinfo=UTC)) == "2026-12-03T08:00:00Z"


def test_a_time_in_another_zone_is_shown_at_the_same_instant_in_utc() -> None:
    tokyo = timezone(timedelta(hours=9))
    assert utc_text(datetime(2026, 12, 3, 17, 0, tzinfo=tokyo)) == "2026-12-03T08:00:00Z"


def test_a_time_without_a_zone_as_sqlite_returns_it_is_taken_as_utc() -> None:
    stored = datetime.fromisoformat("2026-12-03 08:00:00")
    assert stored.tzinfo is None and utc_text(stored) == "2026-12-03T08:00:00Z"


def test_a_fraction_of_a_second_is_kept() -> None:
    assert utc_text(datetime(2026, 12, 3, 8, 0, 0, 250_000, tzinfo=UTC)) == (
        "2026-12-03T08:00:00.250000Z")
