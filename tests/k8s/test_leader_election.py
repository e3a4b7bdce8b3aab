"""Two Headroom replicas, each in its own thread with its own client and its own (skewed) virtual
clock, against one API server: exactly one actuates at any time, across a takeover."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from apiserver import ApiServer
from k8s_builders import HEADROOM_NS, MODELS_NS, model_deployment
from k8s_harness import START_AT, make_backend

from controlplane.adapters.k8s.backend import K8sBackend
from controlplane.sim.clock import VirtualClock

STEP_S = 2.0
LEASE_DURATION_S = 15
RENEW_DEADLINE_S = 10.0


@dataclass
class Replica:
    name: str
    replicas_wanted: int
    backend: K8sBackend
    clock: VirtualClock
    stops_renewing_at: int | None = None  # step from which it hangs (no more renewals)
    acted: list[int] = field(default_factory=list)
    leading: list[int] = field(default_factory=list)

    def step(self, k: int) -> None:
        if self.stops_renewing_at is None or k < self.stops_renewing_at:
            self.backend.elector.try_acquire_or_renew(self.clock.now())
        # A hung leader may still try to act; its gate must refuse once its lease lapses.
        if self.backend.elector.is_leader(self.clock.now()):
            self.leading.append(k)
        if self.backend.replicas.set_replicas("m", self.replicas_wanted).ok:
            self.acted.append(k)


def run_replicas(replicas: list[Replica], steps: int) -> None:
    barrier = threading.Barrier(len(replicas) + 1)

    def loop(replica: Replica) -> None:
        for k in range(steps):
            barrier.wait()
            replica.step(k)
            barrier.wait()

    threads = [threading.Thread(target=loop, args=(r,), daemon=True) for r in replicas]
    for thread in threads:
        thread.start()
    for _ in range(steps):
        barrier.wait()
        barrier.wait()
        for replica in replicas:
            replica.clock.advance(STEP_S)
    for thread in threads:
        thread.join(timeout=30)


def two_replicas(server: ApiServer, hang_a_at: int | None = None) -> list[Replica]:
    replicas = []
    for name, wanted, skew_h, hang in (("headroom-a", 1, 0, hang_a_at), ("headroom-b", 2, 3, None)):
        clock = VirtualClock(START_AT + timedelta(hours=skew_h))
        backend = make_backend(server, clock, identity=name, lease_duration_s=LEASE_DURATION_S,
                               renew_deadline_s=RENEW_DEADLINE_S)
        replicas.append(Replica(name, wanted, backend, clock, hang))
    return replicas


def test_exactly_one_replica_leads_and_acts_at_every_step_across_a_takeover(
        apiserver: ApiServer) -> None:
    apiserver.seed(model_deployment("m", replicas=0))
    a, b = two_replicas(apiserver)
    first = a.backend.elector.try_acquire_or_renew(a.clock.now())
    assert first and not b.backend.elector.try_acquire_or_renew(b.clock.now())
    a.stops_renewing_at = 10
    run_replicas([a, b], steps=30)
    for k in range(30):
        assert (k in a.leading) + (k in b.leading) <= 1, f"two leaders at step {k}"
        assert (k in a.acted) + (k in b.acted) <= 1, f"two replicas acted at step {k}"
    assert a.acted == list(range(0, 14))  # last renewal at step 9 (18 s): leads until 28 s
    handover = b.acted[0]
    assert 17 <= handover <= 18  # b waits 15 s after it last saw the lease change
    assert b.acted == list(range(handover, 30))
    assert apiserver.get("apps/v1", "Deployment", "m", MODELS_NS)["spec"]["replicas"] == 2
    lease = apiserver.get("coordination.k8s.io/v1", "Lease", "headroom-leader", HEADROOM_NS)
    assert lease["spec"]["holderIdentity"] == "headroom-b"
    assert lease["spec"]["leaseTransitions"] == 1


def test_racing_replicas_elect_one_leader(apiserver: ApiServer) -> None:
    apiserver.seed(model_deployment("m", replicas=0))
    a, b = two_replicas(apiserver)
    run_replicas([a, b], steps=5)
    assert sorted([bool(a.leading), bool(b.leading)]) == [False, True]
    winner = a if a.leading else b
    assert winner.leading == winner.acted == list(range(5))
    conflicts = [r for r in apiserver.requests if "/leases" in r.path and r.status == 409]
    creates = [r for r in apiserver.requests if r.path.endswith("/leases") and r.method == "POST"]
    assert len(creates) <= 2 and len(conflicts) == len(creates) - 1


def test_a_leader_that_releases_hands_over_at_the_next_try(apiserver: ApiServer) -> None:
    apiserver.seed(model_deployment("m", replicas=0))
    a, b = two_replicas(apiserver)
    assert a.backend.elector.try_acquire_or_renew(a.clock.now())
    assert not b.backend.elector.try_acquire_or_renew(b.clock.now())
    a.backend.elector.release()
    assert not a.backend.elector.is_leader(a.clock.now())
    assert not a.backend.replicas.set_replicas("m", 1).ok
    assert b.backend.elector.try_acquire_or_renew(b.clock.now())  # no lease-duration wait
    assert b.backend.replicas.set_replicas("m", 2).ok


class WallSteppingClock(VirtualClock):
    """A VirtualClock whose wall time can jump (an NTP step) without its monotonic time."""

    def __init__(self, start_at: datetime) -> None:
        super().__init__(start_at)
        self.stepped = timedelta(0)

    def now(self) -> datetime:
        return super().now() + self.stepped


def test_a_follower_whose_wall_clock_steps_ahead_does_not_take_the_lease_from_a_live_leader(
        apiserver: ApiServer) -> None:
    apiserver.seed(model_deployment("m", replicas=0))
    a_clock, b_clock = VirtualClock(START_AT), WallSteppingClock(START_AT)
    a, b = (make_backend(apiserver, clock, identity=name, lease_duration_s=LEASE_DURATION_S,
                         renew_deadline_s=RENEW_DEADLINE_S)
            for name, clock in (("headroom-a", a_clock), ("headroom-b", b_clock)))
    assert a.elector.try_acquire_or_renew(a_clock.now(), a_clock.monotonic())
    assert not b.elector.try_acquire_or_renew(b_clock.now(), b_clock.monotonic())
    b_clock.stepped = timedelta(hours=1)  # NTP steps b's wall clock before a renews again
    assert not b.elector.try_acquire_or_renew(b_clock.now(), b_clock.monotonic())
    lease = apiserver.get("coordination.k8s.io/v1", "Lease", "headroom-leader", HEADROOM_NS)
    assert lease["spec"]["holderIdentity"] == "headroom-a"
    assert a.elector.is_leader(a_clock.now())
    # a leader that really stops renewing is still taken over after the lease duration
    b_clock.advance(LEASE_DURATION_S)
    assert b.elector.try_acquire_or_renew(b_clock.now(), b_clock.monotonic())


def test_an_unreachable_api_means_not_leader(apiserver: ApiServer) -> None:
    a, _ = two_replicas(apiserver)
    assert a.backend.elector.try_acquire_or_renew(a.clock.now())
    apiserver.inject_fault("GET", "/leases/headroom-leader", 503)
    a.clock.advance(STEP_S)
    assert not a.backend.elector.try_acquire_or_renew(a.clock.now())
    assert not a.backend.elector.is_leader(a.clock.now())


def lease_log(apiserver: ApiServer, caplog: pytest.LogCaptureFixture, method: str, path: str,
              code: int) -> list[tuple[str, str, str]]:
    """One acquisition attempt against a fault: the leader logger's (level, event, error)."""
    a, _ = two_replicas(apiserver)
    apiserver.inject_fault(method, path, code)
    with caplog.at_level(logging.DEBUG, logger="headroom.k8s.leader"):
        assert not a.backend.elector.try_acquire_or_renew(a.clock.now())
    return [(r.levelname, r.getMessage(), r.__dict__.get("error", ""))
            for r in caplog.records if r.name == "headroom.k8s.leader"]


def test_a_conflicting_lease_write_is_a_lost_race_at_info(
        apiserver: ApiServer, caplog: pytest.LogCaptureFixture) -> None:
    records = lease_log(apiserver, caplog, "POST", "/leases", 409)
    assert [(level, event) for level, event, _ in records] == [("INFO", "leader.lost_race")]


@pytest.mark.parametrize(("method", "path", "code", "level"), [
    ("POST", "/leases", 403, "ERROR"),  # the service account may not create Leases
    ("POST", "/leases", 404, "ERROR"),  # the namespace does not exist
    ("POST", "/leases", 422, "ERROR"),
    ("GET", "/leases/headroom-leader", 503, "WARNING"),
])
def test_any_other_lease_error_is_logged_loudly_with_its_status(
        apiserver: ApiServer, caplog: pytest.LogCaptureFixture, method: str, path: str,
        code: int, level: str) -> None:
    records = lease_log(apiserver, caplog, method, path, code)
    assert [(lvl, event) for lvl, event, _ in records] == [(level, "leader.lease_failed")]
    assert records[0][2].startswith(f"HTTP {code}: injected fault {code}")


def test_a_dry_run_replica_previews_only_while_no_other_replica_holds_the_lease(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    """A dry-run replica beside a live leader on one store would record its dry_run ticks,
    observations and forecasts between the leader's (`headroom status` then shows a dry run as
    the fleet's last tick, and the leader's guards read the newest tick's memory): it leads its
    preview only while no other replica holds the Lease, and never writes the Lease."""
    leader = make_backend(apiserver, clock, identity="headroom-live",
                          lease_duration_s=LEASE_DURATION_S, renew_deadline_s=RENEW_DEADLINE_S)
    preview = make_backend(apiserver, clock, dry_run=True, identity="headroom-preview",
                           lease_duration_s=LEASE_DURATION_S, renew_deadline_s=RENEW_DEADLINE_S)
    assert preview.elector.try_acquire_or_renew(clock.now(), 0.0)  # no Lease: it previews
    assert preview.elector.is_leader(clock.now())
    assert leader.elector.try_acquire_or_renew(clock.now())
    writes = len(apiserver.writes())
    assert not preview.elector.try_acquire_or_renew(clock.now(), 1.0)
    assert not preview.elector.is_leader(clock.now())
    clock.advance(LEASE_DURATION_S)  # the leader stopped renewing: gone once seen unchanged
    assert preview.elector.try_acquire_or_renew(clock.now(), 1.0 + LEASE_DURATION_S)
    assert preview.elector.is_leader(clock.now())
    assert leader.elector.try_acquire_or_renew(clock.now())  # back, and renewing: it leads
    assert not preview.elector.try_acquire_or_renew(clock.now(), 2.0 + LEASE_DURATION_S)
    leader.elector.release()  # a clean stop: the preview goes on at once
    writes += 2  # the leader's renewal and release
    assert preview.elector.try_acquire_or_renew(clock.now(), 3.0 + LEASE_DURATION_S)
    assert len(apiserver.writes()) == writes  # the dry-run replica never wrote the Lease
    assert apiserver.get("coordination.k8s.io/v1", "Lease", "headroom-leader",
                         HEADROOM_NS)["spec"].get("holderIdentity", "") == ""
