"""Leader election over a ``coordination.k8s.io/v1`` Lease: who may act, decided purely.

As in client-go, expiry is judged on the follower's own clock: a lease counts as expired when the
follower has seen the same record (holder, renew time, resourceVersion) unchanged for a full
lease duration. Clock offsets between replicas therefore do not matter, only clock rates.
A leader considers itself leader only until ``renew_deadline_s`` after its last successful write,
which is shorter than the lease duration, so two replicas never both act: the Kubernetes requests
a leader's actuators make are fenced to that deadline too (adapters/k8s/fence.py: none is sent
after it, none is waited for past it). What no client can fence is a request the API server
received before the deadline and stores later; a follower takes over no earlier than
``lease_duration_s - renew_deadline_s`` after the deadline. The leader's tick records in the
store are fenced per term (``LeaderElector.term``, ``store/tick_fence.py``): a stalled old
leader's late save is refused once the new leader has claimed its token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str  # "" = released
    lease_duration_s: int
    acquire_at: datetime | None
    renew_at: datetime | None
    transitions: int
    resource_version: str = ""

    @property
    def key(self) -> tuple[str, datetime | None, str]:
        return (self.holder, self.renew_at, self.resource_version)


@dataclass(frozen=True, slots=True)
class LeaseSighting:
    """The record this replica last saw and when it first saw it (on its own clock; also on
    its monotonic scale when the caller gave one)."""

    key: tuple[str, datetime | None, str]
    seen_at: datetime
    seen_s: float | None = None


class LeaseVerdict(StrEnum):
    CREATE = "create"
    RENEW = "renew"
    TAKE_OVER = "take_over"
    FOLLOW = "follow"


@dataclass(frozen=True, slots=True)
class LeaseDecision:
    verdict: LeaseVerdict
    record: LeaseRecord | None  # what to write (None when following)
    sighting: LeaseSighting | None

    @property
    def writes(self) -> bool:
        return self.record is not None


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    lease_duration_s: int = 15
    renew_deadline_s: float = 10.0

    def __post_init__(self) -> None:
        if self.lease_duration_s < 1:
            raise ValueError("lease_duration_s must be >= 1")
        if not 0 < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("renew_deadline_s must be > 0 and < lease_duration_s")


def decide_lease(current: LeaseRecord | None, sighting: LeaseSighting | None, identity: str,
                 now: datetime, timing: LeaseTiming,
                 monotonic_s: float | None = None) -> LeaseDecision:
    """``now`` is written into the record; with ``monotonic_s`` (the caller's monotonic clock)
    expiry is judged on it, so a step of the wall clock (NTP) cannot expire a live holder."""
    if current is None:
        created = LeaseRecord(identity, timing.lease_duration_s, now, now, 0)
        return LeaseDecision(LeaseVerdict.CREATE, created, None)
    if sighting is None or sighting.key != current.key:
        sighting = LeaseSighting(current.key, now, monotonic_s)
    if current.holder == identity:
        renewed = replace(current, renew_at=now, lease_duration_s=timing.lease_duration_s)
        return LeaseDecision(LeaseVerdict.RENEW, renewed, sighting)
    if monotonic_s is not None and sighting.seen_s is not None:
        expired = monotonic_s - sighting.seen_s >= current.lease_duration_s
    else:
        expired = now >= sighting.seen_at + timedelta(seconds=current.lease_duration_s)
    if not current.holder or expired:
        taken = LeaseRecord(identity, timing.lease_duration_s, now, now, current.transitions + 1,
                            current.resource_version)
        return LeaseDecision(LeaseVerdict.TAKE_OVER, taken, sighting)
    return LeaseDecision(LeaseVerdict.FOLLOW, None, sighting)


def released(current: LeaseRecord, now: datetime) -> LeaseRecord:
    """The record a leader writes when it steps down: no holder, so others take over at once."""
    return replace(current, holder="", lease_duration_s=1, renew_at=now)


def leads_until(renewed_at: datetime, timing: LeaseTiming) -> datetime:
    return renewed_at + timedelta(seconds=timing.renew_deadline_s)


def leads_until_at(renewed_at: datetime | None, timing: LeaseTiming, now: datetime) -> datetime:
    """When a leader whose last successful acquire or renew was at ``renewed_at`` stops
    leading: its renew deadline; ``now`` when it does not lead (never renewed, or past it)."""
    if renewed_at is None or now >= leads_until(renewed_at, timing):
        return now
    return leads_until(renewed_at, timing)


def deadline_on_scale_s(now: datetime, until_at: datetime, scale_now_s: float) -> float:
    """``until_at`` (an instant on the clock that reads ``now``) on a monotonic scale that reads
    ``scale_now_s`` at that moment: the instant a leader's deadline falls on the scale its
    requests time out on (the time left is carried over, so a virtual clock works as well)."""
    return scale_now_s + (until_at - now).total_seconds()


def fenced_timeout_s(timeout_s: float, deadline_s: float | None,
                     scale_now_s: float) -> float | None:
    """The timeout of one request made under a leader's deadline (``deadline_s``, on the scale
    that reads ``scale_now_s`` now): ``timeout_s`` cut to the time left; None when none is left
    (the request must not be sent). Without a deadline, ``timeout_s``."""
    if deadline_s is None:
        return timeout_s
    left_s = deadline_s - scale_now_s
    return min(timeout_s, left_s) if left_s > 0 else None


def renewed_while_watched(first_seen: LeaseRecord, current: LeaseRecord) -> bool:
    """A holder that wrote its lease again while another process watched it is alive: the
    watcher (a process starting) refuses rather than waits for it to expire."""
    return bool(current.holder) and current.key != first_seen.key


def renewed_ago_s(current: LeaseRecord, now: datetime) -> float | None:
    """Seconds since the holder's own clock says it renewed, for people (expiry is never judged
    on it); None when it never did."""
    if current.renew_at is None:
        return None
    return max(0.0, (now - current.renew_at).total_seconds())


class AlwaysLeads:
    """An elector for a process that contends with no other: it always leads and holds
    nothing to release (an in-memory store; a dry run, which writes nothing)."""

    def try_acquire_or_renew(self, now: datetime, monotonic_s: float | None = None) -> bool:
        return True

    def is_leader(self, now: datetime) -> bool:
        return True

    def leads_until_at(self, now: datetime) -> datetime | None:
        return None  # no end: no other process may take over

    def release(self) -> None:
        return

    def term(self) -> int | None:
        return None  # contends with no one: its records are not fenced
