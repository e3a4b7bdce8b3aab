"""The bindings a PlacementEngine (``scheduler.engine``) holds, and when their leases run out.

Bindings on nodes in the engine's inventory are its OnlinePlacer's; following a journal, those
on nodes the inventory does not have (yet) wait aside (``waiting``) until an inventory has their
node or releases them. ``lease_check_at_s`` is a lower bound: no lease runs out before it.
Not locked: the engine calls it under its lock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

from scheduler.domain.model import Binding
from scheduler.domain.placer import OnlinePlacer
from scheduler.domain.scoring import ScoreWeights
from scheduler.journal import JournalChanges
from scheduler.tenancy import Scope, may_act_for


class HeldBindings:
    """The placer's bindings and the waiting ones, found, counted and released together."""

    def __init__(self, weights: ScoreWeights | None = None) -> None:
        self.placer = OnlinePlacer((), weights)
        self.waiting: dict[str, Binding] = {}  # journal bindings on nodes not in the inventory
        self.lease_check_at_s = math.inf  # no lease runs out before this (a lower bound)

    def follow(self, changes: JournalChanges) -> None:
        """Bring the bindings to the journal's ``changes`` (all of them when ``changes.full``)."""
        placer = self.placer
        if changes.full:
            placer = OnlinePlacer(placer.cluster.nodes, placer.weights, placer.demand)
            self.waiting = {}
        for workload_id in changes.released:
            placer.release(workload_id)
            self.waiting.pop(workload_id, None)
        for binding in changes.bound:
            self.watch_lease(binding)
            current = placer.cluster.bindings.get(binding.workload_id)
            if current == binding:
                continue
            if current is not None and _same_but_lease(current, binding):  # renewed elsewhere
                placer.leased(binding.workload_id, binding.lease_s, binding.lease_expires_at_s)
                continue
            placer.release(binding.workload_id)  # bound again since, elsewhere
            self.waiting.pop(binding.workload_id, None)
            if not placer.adopt(binding):
                self.waiting[binding.workload_id] = binding
        self.placer = placer

    def all(self) -> list[Binding]:
        return [*self.placer.cluster.bindings.values(), *self.waiting.values()]

    def get(self, workload_id: str) -> Binding | None:
        """The binding of ``workload_id`` held now, its lease run out or not."""
        return self.placer.cluster.bindings.get(workload_id) or self.waiting.get(workload_id)

    def may_act_on(self, scope: Scope, workload_id: str) -> bool:
        """Whether a caller of ``scope`` may act on the binding of ``workload_id`` held now
        (an id bound to nobody: yes)."""
        held = self.get(workload_id)
        return held is None or may_act_for(scope, held.tenant)

    def keep(self, binding: Binding) -> None:
        """Hold ``binding`` again: on its node, or waiting for it."""
        if not self.placer.adopt(binding):
            self.waiting[binding.workload_id] = binding

    def release(self, workload_id: str) -> None:
        self.placer.release(workload_id)
        self.waiting.pop(workload_id, None)

    def bound_count(self, now_s: float) -> int:
        """How many are bound at ``now_s``: not those whose lease ran out, swept or not."""
        if now_s < self.lease_check_at_s:
            return len(self.placer.cluster.bindings) + len(self.waiting)
        return sum(1 for b in self.all() if not b.expired(now_s))

    # ---------------------------------------------------------------- leases
    def watch_lease(self, binding: Binding) -> None:
        if binding.leased:
            self.lease_check_at_s = min(self.lease_check_at_s, binding.lease_expires_at_s)

    def expired(self, now_s: float) -> list[Binding]:
        return [b for b in self.all() if b.expired(now_s)]

    def forget(self, expired: list[str]) -> None:
        for workload_id in expired:
            self.release(workload_id)
        self.lease_check_at_s = min((b.lease_expires_at_s for b in self.all()
                                     if b.leased), default=math.inf)

    def leased(self, binding: Binding, lease_s: float, now_s: float) -> Binding:
        """``binding`` (just placed) with a lease of ``lease_s`` from ``now_s`` (none: <= 0)."""
        if lease_s <= 0:
            return binding
        leased = self.placer.leased(binding.workload_id, lease_s, now_s + lease_s)
        assert leased is not None  # just placed
        self.watch_lease(leased)
        return leased

    def renewed(self, workload_ids: Iterable[str], now_s: float,
                scope: Scope) -> dict[str, Binding | None]:
        """Each id's binding with its lease extended from ``now_s`` (None: not bound, or bound
        for a tenant outside ``scope``)."""
        out: dict[str, Binding | None] = {}
        for workload_id in workload_ids:
            held = self.get(workload_id) if self.may_act_on(scope, workload_id) else None
            if held is not None and held.leased:
                held = replace(held, lease_expires_at_s=now_s + held.lease_s)
            out[workload_id] = held
        return out

    def renew(self, renewed: dict[str, Binding | None]) -> None:
        """Hold the leased bindings of ``renewed`` with their extended leases."""
        for workload_id, binding in renewed.items():
            if binding is None or not binding.leased:
                continue
            if workload_id in self.waiting:
                self.waiting[workload_id] = binding
            else:
                self.placer.leased(workload_id, binding.lease_s, binding.lease_expires_at_s)


def _same_but_lease(current: Binding, other: Binding) -> bool:
    """The same resources, only the lease differs (a renewal)."""
    return replace(current, lease_s=other.lease_s,
                   lease_expires_at_s=other.lease_expires_at_s) == other
