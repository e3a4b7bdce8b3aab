"""Taking a store's fleet lease at start (on a real SQLite store, with time injected): a holder
seen renewing refuses the start with one line; a silent one is taken over after the duration."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controlplane.adapters.clock import WallClock
from controlplane.domain.lease import (
    AlwaysLeads,
    LeaseRecord,
    renewed_ago_s,
    renewed_while_watched,
)
from controlplane.fleet_lease import (
    FleetLease,
    FleetLeaseHeld,
    StoreLeaseElector,
    fleet_lease_timing,
    held_message,
    hold_fleet_lease,
    renew_every_s,
    take_fleet_lease,
)
from controlplane.store import Store
from controlplane.store.lease import SqlLeaseStore

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TIMING = fleet_lease_timing(15)


class SteppedClock:
    """Wall time that moves only when the code under test sleeps."""

    def __init__(self, at: datetime) -> None:
        self.at = at
        self.slept_s = 0.0

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return (self.at - T0).total_seconds()

    def sleep(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)
        self.slept_s += seconds


def _leases(sqlite_url: str) -> SqlLeaseStore:
    return SqlLeaseStore(Store.open(sqlite_url, migrate=True).engine)


def test_the_renew_job_runs_well_inside_the_deadline_and_the_deadline_inside_the_duration() -> None:
    assert TIMING.renew_deadline_s == 10.0
    assert renew_every_s(TIMING) * 3 == TIMING.renew_deadline_s < TIMING.lease_duration_s


def test_only_a_holder_that_wrote_again_while_watched_counts_as_alive() -> None:
    seen = LeaseRecord("host-1", 15, T0, T0, 0, "4")
    assert not renewed_while_watched(seen, seen)
    assert renewed_while_watched(seen, LeaseRecord("host-1", 15, T0, T0, 0, "5"))
    assert not renewed_while_watched(seen, LeaseRecord("", 1, T0, T0, 0, "5"))  # released


def test_how_long_ago_a_holder_renewed_is_never_negative_and_unknown_without_a_renewal() -> None:
    assert renewed_ago_s(LeaseRecord("h", 15, T0, T0, 0), T0 + timedelta(seconds=4)) == 4.0
    assert renewed_ago_s(LeaseRecord("h", 15, T0, T0, 0), T0 - timedelta(seconds=2)) == 0.0
    assert renewed_ago_s(LeaseRecord("h", 15, None, None, 0), T0) is None


def test_the_refusal_names_the_holder_its_last_renewal_when_to_retry_and_hides_the_password(
) -> None:
    record = LeaseRecord("host-42", 15, T0, T0, 0, "9")
    message = held_message("postgresql+psycopg://headroom:s3cret@db:5432/h", "sim-fleet", record,
                           T0 + timedelta(seconds=4.6), TIMING)
    assert message.startswith("postgresql+psycopg://headroom@db:5432/h: another process runs "
                              "this store's simulated fleet: lease 'sim-fleet' held by host-42, "
                              "renewed 4s ago; retry after ~11s")
    assert "s3cret" not in message and "\n" not in message


def test_a_start_on_a_store_with_no_lease_takes_it_without_waiting(sqlite_url: str) -> None:
    clock = SteppedClock(T0)
    elector = StoreLeaseElector(_leases(sqlite_url), "sim-fleet", "host-1", TIMING)
    take_fleet_lease(elector, clock, sqlite_url, sleep=clock.sleep)
    assert clock.slept_s == 0 and elector.is_leader(T0)


def _waiting_events(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "lease.waiting"]


def test_a_start_takes_over_a_silent_holder_after_the_duration_on_its_own_clock(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    leases = _leases(sqlite_url)
    long_ago = T0 - timedelta(days=3)  # the holder's own clock is of no account
    assert leases.create_lease("sim-fleet", LeaseRecord("crashed-7", 15, long_ago, long_ago, 0))
    clock = SteppedClock(T0)
    elector = StoreLeaseElector(leases, "sim-fleet", "host-1", TIMING)
    with caplog.at_level(logging.INFO, logger="headroom.lease"):
        take_fleet_lease(elector, clock, sqlite_url, sleep=clock.sleep)
    assert 15 <= clock.slept_s <= 16
    [waiting] = _waiting_events(caplog)  # once, after the renew deadline of silence
    assert waiting.__dict__["holder"] == "crashed-7"
    assert waiting.__dict__["silent_s"] == 10 and waiting.__dict__["takeover_in_s"] == 5
    taken = leases.read_lease("sim-fleet")
    assert taken is not None and taken.holder == "host-1" and taken.transitions == 1


def test_a_start_that_sees_the_holder_renew_is_refused_and_writes_nothing(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    leases = _leases(sqlite_url)
    clock = SteppedClock(T0)
    holder = StoreLeaseElector(leases, "sim-fleet", "host-1", TIMING)
    assert holder.try_acquire_or_renew(T0)

    def holder_renews_meanwhile(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.slept_s >= renew_every_s(TIMING):
            holder.try_acquire_or_renew(clock.now())

    starter = StoreLeaseElector(leases, "sim-fleet", "host-2", TIMING)
    with caplog.at_level(logging.INFO, logger="headroom.lease"), \
            pytest.raises(FleetLeaseHeld) as refused:
        take_fleet_lease(starter, clock, sqlite_url, sleep=holder_renews_meanwhile)
    assert not _waiting_events(caplog)  # a live holder is refused, with no waiting event
    assert str(refused.value).startswith(f"{sqlite_url}: another process runs this store's "
                                         "simulated fleet: lease 'sim-fleet' held by host-1, "
                                         "renewed 0s ago; retry after ~15s")
    assert clock.slept_s < TIMING.lease_duration_s
    held = leases.read_lease("sim-fleet")
    assert held is not None and held.holder == "host-1" and held.resource_version == "2"


class SteppingWallClock(SteppedClock):
    """A SteppedClock whose wall time also jumps (an NTP step) without its monotonic time."""

    def __init__(self, at: datetime) -> None:
        super().__init__(at)
        self.monotonic_s = 0.0

    def monotonic(self) -> float:
        return self.monotonic_s

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        self.monotonic_s += seconds


def test_a_start_whose_wall_clock_jumps_ahead_still_sees_the_live_holder_and_is_refused(
        sqlite_url: str) -> None:
    leases = _leases(sqlite_url)
    clock = SteppingWallClock(T0)
    holder = StoreLeaseElector(leases, "sim-fleet", "host-1", TIMING)
    assert holder.try_acquire_or_renew(T0)

    def clock_steps_and_holder_renews(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.slept_s == seconds:  # the first poll: NTP steps the wall clock an hour on
            clock.at += timedelta(hours=1)
        if clock.monotonic_s >= renew_every_s(TIMING):
            holder.try_acquire_or_renew(T0 + timedelta(seconds=clock.monotonic_s))

    starter = StoreLeaseElector(leases, "sim-fleet", "host-2", TIMING)
    with pytest.raises(FleetLeaseHeld):
        take_fleet_lease(starter, clock, sqlite_url, sleep=clock_steps_and_holder_renews)
    held = leases.read_lease("sim-fleet")
    assert held is not None and held.holder == "host-1" and not holder.lost


def test_a_store_that_cannot_be_read_is_one_line_naming_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/no-schema.db"
    elector = StoreLeaseElector(SqlLeaseStore(Store.open(url).engine), "sim-fleet", "h", TIMING)
    clock = SteppedClock(T0)
    with pytest.raises(FleetLeaseHeld, match=r"^sqlite:///.*no-schema\.db: cannot take the "
                                             r"store's 'sim-fleet' lease: lease 'sim-fleet': "
                                             r"cannot read it: no such table: leases$"):
        take_fleet_lease(elector, clock, url, sleep=clock.sleep)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_store_belongs_to_its_process_alone_and_needs_no_lease(url: str) -> None:
    lease = hold_fleet_lease(url, SqlLeaseStore(Store.open(url).engine), 15, SteppedClock(T0))
    try:
        assert isinstance(lease.elector, AlwaysLeads) and lease.leads()
    finally:
        lease.release()


def test_a_lease_written_over_by_another_holder_stops_the_gated_jobs_and_says_so(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    leases = _leases(sqlite_url)
    lease = hold_fleet_lease(sqlite_url, leases, 1, WallClock())  # renewed every ~0.2 s
    ran: list[str] = []
    tick = lease.gated(lambda: ran.append("tick"))
    elector = lease.elector
    assert isinstance(elector, StoreLeaseElector)
    try:
        tick()
        assert ran == ["tick"]
        current = leases.read_lease("sim-fleet")
        assert current is not None
        with caplog.at_level(logging.INFO, logger="headroom.lease"):
            assert leases.replace_lease("sim-fleet", replace(current, holder="other-host-9"))
            deadline = time.monotonic() + 10
            while not elector.lost and time.monotonic() < deadline:
                time.sleep(0.05)
        tick()
        assert ran == ["tick"] and not lease.leads()
        assert "lease.lost" in [r.getMessage() for r in caplog.records]
    finally:
        lease.release()
    kept = leases.read_lease("sim-fleet")
    assert kept is not None and kept.holder == "other-host-9"  # not released by who lost it


class _Toggled(AlwaysLeads):
    """An elector whose leadership the test sets."""

    def __init__(self) -> None:
        self.leading = True

    def is_leader(self, now: datetime) -> bool:
        return self.leading


def test_a_gated_job_runs_while_leading_and_its_following_job_once_the_lease_lapsed() -> None:
    elector = _Toggled()
    lease = FleetLease(elector, WallClock(), 60.0, "me")
    ran: list[str] = []
    job = lease.gated(lambda: ran.append("tick"), following=lambda: ran.append("forget"))
    try:
        job()
        elector.leading = False
        job()
        job()
        elector.leading = True
        job()
    finally:
        lease.release()
    assert ran == ["tick", "forget", "forget", "tick"]
