"""One simulated fleet per store: ``serve --backend sim`` and ``demo`` hold the store's lease.

Two processes driving a SimRuntime on one store would both tick and both record ticks,
observations, guard memory and forecasts into the same tables. Each holds the store's
``sim-fleet`` lease instead (``domain/lease.py`` decides, ``store/lease.py`` writes atomically):

- before its first write it takes the lease; a holder seen writing it again while a starting
  process watches is alive, and the start is refused (``FleetLeaseHeld``, one line); a holder
  seen unchanged for the lease duration on the starter's own monotonic clock (it crashed; a
  step of the wall clock counts for nothing) is taken over, so a start after a crash waits at
  most that long;
- it renews on a scheduler job (a third of the renew deadline, which is two thirds of the
  duration) and writes only while its last renewal is within the renew deadline; a failed renewal
  pauses the writes until one succeeds, a lease written over by another holder stops them for
  good (the simulated fleet in memory is no longer the one in the store);
- a clean stop releases it, so the next start takes it at once.

An in-memory SQLite store belongs to its process alone: it needs no lease.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

from controlplane.domain.errors import TransientError
from controlplane.domain.lease import (
    AlwaysLeads,
    LeaseRecord,
    LeaseSighting,
    LeaseTiming,
    LeaseVerdict,
    decide_lease,
    leads_until,
    leads_until_at,
    released,
    renewed_ago_s,
    renewed_while_watched,
)
from controlplane.identity import holder_identity
from controlplane.jobs import build_scheduler
from controlplane.ports import Clock, LeaderElector, LeaseStore
from controlplane.store.engine import in_memory, redact

log = logging.getLogger("headroom.lease")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FLEET_LEASE = "sim-fleet"


class FleetLeaseHeld(Exception):
    """Another live process holds the store's lease, or it cannot be read (exit code 2)."""


def fleet_lease_timing(lease_duration_s: int) -> LeaseTiming:
    return LeaseTiming(lease_duration_s, renew_deadline_s=lease_duration_s * 2 / 3)


def renew_every_s(timing: LeaseTiming) -> float:
    return timing.renew_deadline_s / 3


class StoreLeaseElector:
    """LeaderElector over a LeaseStore. Unlike a Kubernetes replica it never takes back a lease
    another holder wrote over: its fleet in memory went stale when the other one wrote."""

    def __init__(self, leases: LeaseStore, name: str, identity: str,
                 timing: LeaseTiming) -> None:
        self.leases = leases
        self.name = name
        self.identity = identity
        self.timing = timing
        self.seen: LeaseRecord | None = None  # the record last read
        self.lost = False
        self._sighting: LeaseSighting | None = None
        self._version: str | None = None  # the version of this holder's last write
        self._renewed_at: datetime | None = None
        self._terms = 0  # the leases taken (created or taken over)

    def attempt(self, now: datetime, monotonic_s: float | None = None) -> bool:
        """One acquire or renew; True when this process holds the lease now (expiry judged on
        ``monotonic_s`` when given). Raises TransientError when the store cannot be read or
        written."""
        if self.lost:
            return False
        current = self.leases.read_lease(self.name)
        self.seen = current
        if self._version is not None and (current is None or current.holder != self.identity
                                          or current.resource_version != self._version):
            return self._lose(current)
        decision = decide_lease(current, self._sighting, self.identity, now, self.timing,
                                monotonic_s)
        self._sighting = decision.sighting
        record = decision.record
        if record is None:
            return False
        if decision.verdict is LeaseVerdict.CREATE:
            won = self.leases.create_lease(self.name, record)
        else:
            won = self.leases.replace_lease(self.name, record)
        if not won:
            return self._lose(None) if self._version is not None else False
        self._version = str(int(record.resource_version or "0") + 1)
        if decision.verdict is not LeaseVerdict.RENEW:
            self._terms += 1
            log.info("lease.acquired", extra={"lease": self.name, "holder": self.identity,
                                              "verdict": decision.verdict.value,
                                              "previous_holder": current.holder if current
                                              else ""})
        elif self._renewed_at is None:
            log.info("lease.renewed", extra={"lease": self.name, "holder": self.identity,
                                             "writes": "resumed"})
        self._renewed_at = now
        return True

    def _lose(self, current: LeaseRecord | None) -> bool:
        self.lost, self._renewed_at = True, None
        log.error("lease.lost", extra={
            "lease": self.name, "holder": self.identity,
            "now_held_by": current.holder if current is not None else "(another writer)",
            "writes": "stopped for good; restart this process to run the fleet again"})
        return False

    def try_acquire_or_renew(self, now: datetime, monotonic_s: float | None = None) -> bool:
        try:
            return self.attempt(now, monotonic_s)
        except TransientError as error:
            if self._renewed_at is not None:
                log.warning("lease.renew_failed", extra={
                    "lease": self.name, "holder": self.identity, "error": str(error),
                    "writes": "paused until a renewal succeeds"})
            self._renewed_at = None
            return False

    def is_leader(self, now: datetime) -> bool:
        return self._renewed_at is not None and now < leads_until(self._renewed_at, self.timing)

    def leads_until_at(self, now: datetime) -> datetime | None:
        return leads_until_at(self._renewed_at, self.timing, now)

    def term(self) -> int | None:
        return self._terms

    def release(self) -> None:
        """Give the lease up (a clean stop) so the next process takes it at once."""
        if self._version is None or self.lost:
            return
        version, self._version = self._version, None
        renewed_at, self._renewed_at = self._renewed_at, None
        try:
            current = self.leases.read_lease(self.name)
            if (current is None or current.holder != self.identity
                    or current.resource_version != version):
                return
            self.leases.replace_lease(self.name, released(current, renewed_at or current.renew_at
                                                          or current.acquire_at or _EPOCH))
            log.info("lease.released", extra={"lease": self.name, "holder": self.identity})
        except TransientError as error:
            log.warning("lease.release_failed", extra={"lease": self.name, "error": str(error)})


def held_message(url: str, name: str, current: LeaseRecord, now: datetime,
                 timing: LeaseTiming) -> str:
    ago_s = renewed_ago_s(current, now)
    renewed = "never renewed" if ago_s is None else f"renewed {math.floor(ago_s)}s ago"
    retry_s = max(1, math.ceil(timing.lease_duration_s - (ago_s or 0.0)))
    return (f"{redact(url)}: another process runs this store's simulated fleet: lease "
            f"{name!r} held by {current.holder}, {renewed}; "
            f"retry after ~{retry_s}s (once it has stopped: a holder that stops renewing is "
            f"taken over db.lease_duration_s={timing.lease_duration_s}s after it was last seen "
            "renewing)")


def take_fleet_lease(elector: StoreLeaseElector, clock: Clock, url: str,
                     sleep: Callable[[float], None] = time.sleep) -> None:
    """Hold the lease before the first write, or raise FleetLeaseHeld naming the live holder.

    A holder is watched until it writes the lease again (alive: refused) or leaves it unchanged
    for the lease duration on this process's clock (gone: taken over); at most that long. A
    holder silent for its renew deadline has stopped writing (a live one renews three times
    within it): one ``lease.waiting`` event then says whom the start waits for and how long, so
    a start after a crash does not sit in silence; a live holder is refused before it."""
    poll_s = min(1.0, renew_every_s(elector.timing) / 2)
    first_seen: LeaseRecord | None = None
    first_seen_at: datetime | None = None
    announced = False
    while True:
        now = clock.now()
        try:
            if elector.attempt(now, clock.monotonic()):  # a wall-clock step expires no one
                return
        except TransientError as error:
            raise FleetLeaseHeld(f"{redact(url)}: cannot take the store's {FLEET_LEASE!r} "
                                 f"lease: {error}") from None
        current = elector.seen
        if current is not None and first_seen is not None and renewed_while_watched(
                first_seen, current):
            raise FleetLeaseHeld(held_message(url, elector.name, current, now,
                                              elector.timing))
        if first_seen is None and current is not None:
            first_seen, first_seen_at = current, now
        if not announced and first_seen is not None and first_seen_at is not None:
            announced = _announce_silence(elector, first_seen, first_seen_at, now)
        sleep(poll_s)


def _announce_silence(elector: StoreLeaseElector, seen: LeaseRecord, seen_at: datetime,
                      now: datetime) -> bool:
    """Log ``lease.waiting`` once the holder first seen at ``seen_at`` has been silent for its
    renew deadline; True when logged."""
    silent_s = (now - seen_at).total_seconds()
    if silent_s < elector.timing.renew_deadline_s:
        return False
    log.warning("lease.waiting", extra={
        "lease": elector.name, "holder": seen.holder, "silent_s": math.floor(silent_s),
        "takeover_in_s": max(0, math.ceil(elector.timing.lease_duration_s - silent_s)),
        "why": "the holder stopped renewing (crashed?); it is taken over once silent for "
               f"db.lease_duration_s={elector.timing.lease_duration_s}s"})
    return True


class FleetLease:
    """A held fleet lease, renewed by its own scheduler job (independent of the jobs it gates,
    and running while the first of them do) until released."""

    def __init__(self, elector: LeaderElector, clock: Clock, renew_every_s: float,
                 identity: str) -> None:
        self.elector = elector
        self.clock = clock
        self.identity = identity  # the holder's: the writer of the ticks this process records
        self._jobs = build_scheduler(
            {"lease": (lambda: elector.try_acquire_or_renew(clock.now(), clock.monotonic()),
                       renew_every_s)})
        self._jobs.start()

    def leads(self) -> bool:
        return self.elector.is_leader(self.clock.now())

    def gated(self, job: Callable[[], object],
              following: Callable[[], object] | None = None) -> Callable[[], object]:
        """``job`` as a scheduler job that runs (and writes) only while this process leads;
        ``following`` runs instead while it does not (e.g. dropping the leader's gauges)."""
        def run() -> object:
            if self.leads():
                return job()
            return following() if following is not None else None
        return run

    def release(self) -> None:
        """Stop renewing and give the lease up (idempotent): the next process takes it at once."""
        if self._jobs.running:
            self._jobs.shutdown(wait=True)
        self.elector.release()


def hold_fleet_lease(url: str, leases: LeaseStore, lease_duration_s: int,
                     clock: Clock) -> FleetLease:
    """The lease of a process that drives the simulated fleet of the store at ``url``, held
    (``take_fleet_lease``: FleetLeaseHeld when a live process has it) and renewing; for an
    in-memory store one that always leads."""
    timing = fleet_lease_timing(lease_duration_s)
    identity = holder_identity()
    if in_memory(url):
        return FleetLease(AlwaysLeads(), clock, renew_every_s(timing), identity)
    elector = StoreLeaseElector(leases, FLEET_LEASE, identity, timing)
    take_fleet_lease(elector, clock, url)
    return FleetLease(elector, clock, renew_every_s(timing), identity)
