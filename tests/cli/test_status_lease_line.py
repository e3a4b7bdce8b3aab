"""The lease row of ``headroom status``: a held lease names its holder and when another process
may take it over; a released one (a clean stop writes no holder and a 1 s duration) says it is
free instead of showing that 1 s as if it were the configured duration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.cli.status_view import lease_line
from controlplane.domain.fleet_status import LeaseStatus

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def test_a_held_lease_names_its_holder_its_renewal_age_and_its_takeover_time() -> None:
    lease = LeaseStatus("headroom-sim-fleet", "host-a-123", NOW - timedelta(minutes=5),
                        NOW - timedelta(seconds=4), 15, 1)
    assert lease_line(lease, NOW) == (
        "host-a-123, renewed 4 s ago; another process may take it 15 s after the last renewal")


def test_a_released_lease_reads_as_free_and_hides_the_one_second_release_duration() -> None:
    lease = LeaseStatus("headroom-sim-fleet", "", NOW - timedelta(minutes=5),
                        NOW - timedelta(seconds=4), 1, 1)
    line = lease_line(lease, NOW)
    assert line == "released (free to take; last renewed 4 s ago)"
    assert "1 s" not in line
