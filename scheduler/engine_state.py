"""EngineState: the state a PlacementEngine (``scheduler.engine``) keeps under one lock, kept in
step with its journal, and the leases of its bindings.

It holds the inventory and bindings (``scheduler.held_bindings``), the current fleet plan and the
journal version applied; brings them up to date with what other engines on the journal
(``scheduler.journal``) changed; releases the bindings whose lease ran out (logged, and counted
through ``on_leases_expired``) and renews leases (RenewLeases). PlacementEngine builds the
placement and fleet-plan calls on it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from protos.headroom.v1 import placement_pb2 as pb
from scheduler import convert
from scheduler.domain.fleet import DEFAULT_TIME_LIMIT_S
from scheduler.domain.fleet_types import FleetPlan
from scheduler.domain.milp import MilpSolver
from scheduler.domain.scoring import ScoreWeights
from scheduler.domain.validate import validate_workload_id
from scheduler.held_bindings import HeldBindings
from scheduler.highs import HighsSolver
from scheduler.journal import JournalChange, JournalChanges, PlacementJournal
from scheduler.tenancy import Scope
from scheduler.wallclock import unix_now_s

log = logging.getLogger("headroom.placement")


class EngineState:
    """Inventory, bindings and the current fleet plan (with its revision) under one lock,
    following a ``journal`` when given, with the bindings' leases expired and renewed; the
    base of PlacementEngine, which documents the parameters."""

    def __init__(self, weights: ScoreWeights | None = None,
                 solver: MilpSolver | None = None,
                 plan_time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                 journal: PlacementJournal | None = None,
                 now_s: Callable[[], float] = unix_now_s,
                 model_tenant: Callable[[str], str | None] | None = None) -> None:
        self._lock = threading.Lock()
        self._plan_changed = threading.Condition(self._lock)
        self._held = HeldBindings(weights)  # its placer, and the bindings waiting for a node
        self._plan = FleetPlan(0, (), (), 0.0, ())
        self._solver: MilpSolver = solver or HighsSolver()
        self._plan_time_limit_s = plan_time_limit_s
        self._journal = journal
        self._seen_version = 0  # the journal version this engine has applied
        #: whether a SyncInventory succeeded since this engine started (the inventory is not
        #: journaled: a restarted engine knows no node until its first SyncInventory)
        self._synced = False
        self._now_s = now_s
        #: the tenant the store's models table lists a model under (None: not listed)
        self._model_tenant = model_tenant
        #: called with how many bindings a sweep released (the server's metrics)
        self.on_leases_expired: Callable[[int], None] | None = None
        if journal is not None:
            with self._lock:
                self._apply(journal.read(0))

    # ---------------------------------------------------------------- the journal
    def _apply(self, changes: JournalChanges) -> None:
        """Bring the engine to ``changes.version`` (caller holds the lock, or is __init__)."""
        self._held.follow(changes)
        if changes.plan is not None and changes.plan.revision != self._plan.revision:
            self._plan = changes.plan
            self._plan_changed.notify_all()
        self._seen_version = changes.version

    @contextmanager
    def _journaled(self) -> Iterator[JournalChange]:
        """One locked journal change, the engine first brought up to date with it (caller holds
        the lock); once it commits, the engine has seen the version it wrote."""
        assert self._journal is not None
        with self._journal.change(self._seen_version) as change:
            self._apply(change.changes)
            yield change
        if change.committed_version is not None:
            self._seen_version = change.committed_version

    def refresh(self) -> None:
        """Apply what other engines on the journal changed (reads and WatchPlan see it);
        raises Unavailable when the journal cannot be read. Nothing without a journal."""
        if self._journal is None:
            return
        changes = self._journal.read(self._seen_version)
        with self._lock:
            if changes.version > self._seen_version:  # not when a change of its own passed it
                self._apply(changes)

    # ---------------------------------------------------------------- leases
    def _expire(self, now_s: float) -> None:
        """Release the bindings whose lease ran out by ``now_s`` (caller holds the lock)."""
        if now_s < self._held.lease_check_at_s:
            return
        expired = [b.workload_id for b in self._held.expired(now_s)]
        if expired and self._journal is not None:
            with self._journaled() as change:  # another engine may have renewed one since
                expired = [b.workload_id for b in self._held.expired(now_s)]
                if expired:
                    change.released(expired)
        self._held.forget(expired)
        self._report(expired)

    def _report(self, expired: list[str]) -> None:
        if expired:
            log.info("placement.leases_expired", extra={"workload_ids": sorted(expired)})
            if self.on_leases_expired is not None:
                self.on_leases_expired(len(expired))

    def expire_leases(self) -> None:
        """Release the bindings whose lease ran out (a server's periodic sweep: so the store
        and every reader stop showing them without waiting for the next Place)."""
        with self._lock:
            self._expire(self._now_s())

    def renew_leases(self, request: pb.RenewLeasesRequest,
                     scope: Scope = None) -> pb.RenewLeasesResponse:
        """Extend each named binding's lease by its own ``lease_s`` from now; ids not bound
        (or whose lease ran out), and to a caller scoped to tenants (``scope``) those bound for
        another tenant, come back as unknown; each id is answered in the order asked, as often
        as asked. Raises InvalidArgument, Unavailable."""
        for k, workload_id in enumerate(request.workload_ids):
            validate_workload_id(f"workload_ids[{k}]", workload_id)
        with self._lock:
            now_s = self._now_s()
            self._expire(now_s)
            if self._journal is None:
                renewed = self._held.renewed(request.workload_ids, now_s, scope)
            else:
                with self._journaled() as change:
                    renewed = self._held.renewed(request.workload_ids, now_s, scope)
                    leased = [b for b in renewed.values() if b is not None and b.leased]
                    if leased:
                        change.renewed(leased)
            self._held.renew(renewed)
        # every id answered as often and in the order asked (an id asked twice, e.g. batches
        # merged by a serving layer, is renewed once and answered twice; refusing the call
        # would let every lease in it run out)
        answers = {w: convert.binding_to_pb(b) for w, b in renewed.items() if b is not None}
        return pb.RenewLeasesResponse(
            renewed=[answers[w] for w in request.workload_ids if w in answers],
            unknown=[w for w in request.workload_ids if w not in answers])
