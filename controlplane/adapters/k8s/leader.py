"""Leader election with a ``coordination.k8s.io/v1`` Lease, and actuators that only act while
this replica leads. Every replica serves the gRPC API and reads the cluster; only the leader
writes. Lease writes are guarded by ``resourceVersion``: losing the race (409) means "not
leader" (REFERENCE.md §8.4). Decisions are pure (domain/lease.py); ``now`` is injected.

A leader leads until ``renew_deadline_s`` after its last renewal; a follower takes over no
earlier than ``lease_duration_s`` after it last saw one. Gated actuator calls are fenced to that
deadline (fence.py): every request they make is sent before it and waited for no longer, so a
call that starts just before the deadline cannot write after it (retryable ``not_leader``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from controlplane.adapters.k8s.api import JsonObject, KubeApi
from controlplane.adapters.k8s.fence import leading_until
from controlplane.adapters.k8s.outcomes import failed
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.errors import ConflictError, PermanentError, TransientError
from controlplane.domain.lease import (
    LeaseRecord,
    LeaseSighting,
    LeaseTiming,
    LeaseVerdict,
    decide_lease,
    leads_until,
    leads_until_at,
    released,
)
from controlplane.domain.mig_layout import NodeMigLayout
from controlplane.domain.mig_relayout import MigRelayout
from controlplane.domain.sharing_config import SharingLayout
from controlplane.ports import (
    Clock,
    LeaderElector,
    MigRelayoutActuator,
    NodePoolActuator,
    ReplicaActuator,
    SharingActuator,
)

log = logging.getLogger("headroom.k8s.leader")
T = TypeVar("T")
MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
NOT_LEADER = "not_leader: another replica actuates"


def format_micro_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime(MICRO_TIME)


def parse_micro_time(text: str | None) -> datetime | None:
    if not text:
        return None
    normalized = text.replace("Z", "+00:00")
    return datetime.fromisoformat(normalized).astimezone(UTC)


def lease_from_object(obj: dict[str, Any]) -> LeaseRecord:
    spec = obj.get("spec") or {}
    return LeaseRecord(holder=spec.get("holderIdentity") or "",
                       lease_duration_s=int(spec.get("leaseDurationSeconds") or 0),
                       acquire_at=parse_micro_time(spec.get("acquireTime")),
                       renew_at=parse_micro_time(spec.get("renewTime")),
                       transitions=int(spec.get("leaseTransitions") or 0),
                       resource_version=obj["metadata"].get("resourceVersion", ""))


def lease_object(name: str, namespace: str, record: LeaseRecord) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if record.resource_version:
        meta["resourceVersion"] = record.resource_version
    spec: dict[str, Any] = {"holderIdentity": record.holder,
                            "leaseDurationSeconds": record.lease_duration_s,
                            "leaseTransitions": record.transitions}
    if record.acquire_at is not None:
        spec["acquireTime"] = format_micro_time(record.acquire_at)
    if record.renew_at is not None:
        spec["renewTime"] = format_micro_time(record.renew_at)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": spec}


class _LeaseWatcher:
    """The Lease a replica reads as ``identity``: where it is, its timing, the last sighting."""

    def __init__(self, api: KubeApi, namespace: str, name: str, identity: str,
                 timing: LeaseTiming) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing
        self._sighting: LeaseSighting | None = None

    def _read_lease(self) -> JsonObject | None:
        return self.api.read("coordination.k8s.io/v1", "Lease", self.name, self.namespace)


class K8sLeaseElector(_LeaseWatcher):
    def __init__(self, api: KubeApi, namespace: str, name: str, identity: str,
                 timing: LeaseTiming) -> None:
        super().__init__(api, namespace, name, identity, timing)
        self._renewed_at: datetime | None = None
        self._terms = 0  # the leases taken (created or taken over)

    def try_acquire_or_renew(self, now: datetime, monotonic_s: float | None = None) -> bool:
        try:
            obj = self._read_lease()
            current = lease_from_object(obj) if obj is not None else None
            decision = decide_lease(current, self._sighting, self.identity, now, self.timing,
                                    monotonic_s)
            self._sighting = decision.sighting
            if decision.record is None:
                self._renewed_at = None
                return False
            body = lease_object(self.name, self.namespace, decision.record)
            if decision.verdict is LeaseVerdict.CREATE:
                self.api.create(body)
            else:
                self.api.replace(body)
        except ConflictError as error:  # 409: another replica wrote the Lease first
            log.info("leader.lost_race", extra={"identity": self.identity, "error": str(error)})
            self._renewed_at = None
            return False
        except (TransientError, PermanentError) as error:  # 403 RBAC, 404 namespace, 422, 5xx
            level = logging.WARNING if isinstance(error, TransientError) else logging.ERROR
            log.log(level, "leader.lease_failed", extra={"identity": self.identity,
                                                         "lease": f"{self.namespace}/{self.name}",
                                                         "error": str(error)})
            self._renewed_at = None
            return False
        if decision.verdict is not LeaseVerdict.RENEW:
            self._terms += 1
            log.info("leader.acquired", extra={"identity": self.identity,
                                               "verdict": decision.verdict.value})
        self._renewed_at = now
        return True

    def term(self) -> int | None:
        return self._terms

    def is_leader(self, now: datetime) -> bool:
        return self._renewed_at is not None and now < leads_until(self._renewed_at, self.timing)

    def leads_until_at(self, now: datetime) -> datetime | None:
        return leads_until_at(self._renewed_at, self.timing, now)

    def release(self) -> None:
        if self._renewed_at is None:
            return
        renewed_at, self._renewed_at = self._renewed_at, None
        try:
            obj = self._read_lease()
            if obj is None:
                return
            current = lease_from_object(obj)
            if current.holder == self.identity:
                self.api.replace(lease_object(self.name, self.namespace,
                                              released(current, renewed_at)))
        except (TransientError, PermanentError) as error:
            log.info("leader.release_failed", extra={"error": str(error)})


class DryRunElector(_LeaseWatcher):
    """A dry-run replica writes nothing to the cluster, so it neither holds nor contends for the
    Lease; its actuators only record what they would write. It previews (ticks, forecasts,
    records them) only while no other replica holds the Lease, as it reads it: beside a live
    leader its dry_run ticks, observations and forecasts would go into the store between the
    leader's (``headroom status`` would show a dry run as the fleet's last tick, the leader's
    guards would read its memory), so it follows instead, said once on one line. A Lease it
    cannot read leaves it as it was."""

    def __init__(self, api: KubeApi, namespace: str, name: str, identity: str,
                 timing: LeaseTiming) -> None:
        super().__init__(api, namespace, name, identity, timing)
        self._leader = ""  # the other replica that holds the Lease, "" when none does

    def try_acquire_or_renew(self, now: datetime, monotonic_s: float | None = None) -> bool:
        try:
            obj = self._read_lease()
        except (TransientError, PermanentError) as error:
            log.warning("leader.dry_run_lease_unread", extra={
                "lease": f"{self.namespace}/{self.name}", "error": str(error)})
            return self._leader == ""
        current = lease_from_object(obj) if obj is not None else None
        decision = decide_lease(current, self._sighting, self.identity, now, self.timing,
                                monotonic_s)
        self._sighting = decision.sighting
        leader = current.holder if decision.record is None and current is not None else ""
        if leader and leader != self._leader:
            log.warning("leader.dry_run_follows", extra={
                "identity": self.identity, "leader": leader,
                "why": f"{leader} holds the Lease: this dry run previews and records nothing "
                       "while it does"})
        elif not leader and self._leader:
            log.info("leader.dry_run_previews", extra={
                "identity": self.identity, "previous_leader": self._leader,
                "why": "no replica holds the Lease: this dry run previews and records its ticks"})
        self._leader = leader
        return leader == ""

    def is_leader(self, now: datetime) -> bool:
        return self._leader == ""

    def leads_until_at(self, now: datetime) -> datetime | None:
        return None if self._leader == "" else now  # it writes nothing: no deadline to keep

    def release(self) -> None:
        return

    def term(self) -> int | None:
        return None  # it holds no lease: its previews are not fenced


class LeaderGated:
    """Actuators that refuse to write (retryable ``not_leader``) unless this replica leads, and
    whose every Kubernetes request ends by the leader's deadline (fence.py): a call that starts
    just before it can neither send nor wait for a request after it."""

    def __init__(self, elector: LeaderElector, clock: Clock, node_pools: NodePoolActuator,
                 replicas: ReplicaActuator, sharing: SharingActuator,
                 mig: MigRelayoutActuator) -> None:
        self.elector = elector
        self.clock = clock
        self._node_pools, self._replicas = node_pools, replicas
        self._sharing, self._mig = sharing, mig

    def gated(self, call: Callable[[], T], refused: T) -> T:
        """``call`` fenced to the leader's deadline; ``refused`` when this replica does not
        lead."""
        now = self.clock.now()
        if not self.elector.is_leader(now):
            return refused
        with leading_until(now, self.elector.leads_until_at(now)):
            return call()

    def _gated_outcome(self, target: str, call: Callable[[], ActionOutcome]) -> ActionOutcome:
        return self.gated(call, failed(target, NOT_LEADER, retryable=True))

    def set_size(self, pool: str, nodes: int) -> ActionOutcome:
        return self._gated_outcome(pool, lambda: self._node_pools.set_size(pool, nodes))

    def set_replicas(self, model: str, replicas: int) -> ActionOutcome:
        return self._gated_outcome(model, lambda: self._replicas.set_replicas(model, replicas))

    def apply_sharing(self, node: str, layout: SharingLayout) -> ActionOutcome:
        return self._gated_outcome(node, lambda: self._sharing.apply_sharing(node, layout))

    def start_relayout(self, node: str, layout: NodeMigLayout, reason: str) -> ActionOutcome:
        return self._gated_outcome(node, lambda: self._mig.start_relayout(node, layout, reason))

    def advance(self) -> tuple[MigRelayout, ...]:
        return self.gated(self._mig.advance, ())

    def in_flight(self) -> dict[str, NodeMigLayout]:
        return self._mig.in_flight()  # a read: followers may ask too

    def surge_floors(self) -> Mapping[str, int]:
        return self._mig.surge_floors()  # a read: followers may ask too
