"""SimCluster: a behavioural model of a GPU cluster (reader; node-pool, replica, sharing and MIG
re-layout actuators), on the nodes and replicas of ``SimWorld`` (``sim.world``: provisioning,
cold starts, binding, scale-down). Every node is billed from the moment it is requested until it
is deleted. Time only moves through ``step(now)``.

Node layouts: a node comes up with MIG off and exclusive GPUs. A MIG re-layout of a busy node
first surges a node of the target layout (the pool held one larger), then cordons the node and
moves its replicas: each starts a successor wherever a GPU share is free and leaves the node
once that is ready (one with nowhere to go is evicted, and waits like any pending replica), so
the move costs no serving capacity; a drained (or empty) node is laid out after a sampled
``mig_relayout_s``. Each step is saved to the re-layout store (``RelayoutStore``, as the
Kubernetes relayout's), which ``headroom status`` and the Fleet page read. A sharing change
applies at once, as the device plugin does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from controlplane.domain.actions import ActionOutcome
from controlplane.domain.desired import PoolSpec
from controlplane.domain.mig_layout import (
    ALL_DISABLED,
    NodeMigLayout,
    config_name,
    layout_problems,
)
from controlplane.domain.mig_relayout import (
    MigRelayout,
    RelayoutPhase,
    RelayoutPolicy,
    active_surge_floors,
    start_relayout,
)
from controlplane.domain.models import ModelSpec, SharingMode
from controlplane.domain.observed import ObservedState
from controlplane.domain.sharing_config import SharingLayout
from controlplane.ports import RelayoutStore
from controlplane.settings import SimSettings
from controlplane.sim.nodes import (
    Relayout,
    SimNode,
    SimReplica,
    deletion_costs_of,
    stop_order,
)
from controlplane.sim.observed import (
    end_stored_relayouts,
    observed_models,
    observed_nodes,
    observed_pools,
    restore_layouts,
)
from controlplane.sim.world import SimWorld
from controlplane.store.relayout import MemoryRelayoutStore


class SimCluster(SimWorld):
    def __init__(self, pools: Sequence[PoolSpec], specs: Sequence[ModelSpec],
                 demand_rps: Callable[[str, datetime], float], settings: SimSettings,
                 now: datetime, mig_binding: bool = False,
                 relayouts: RelayoutStore | None = None) -> None:
        super().__init__(pools, specs, settings, now, mig_binding)
        self._demand_rps = demand_rps
        self._gpu_seconds_by_pool: dict[str, float] = {p.name: 0.0 for p in pools}
        self._true_factor = dict(settings.true_throughput_factor)  # by model; missing: 1.0
        self.relayouts_started = 0  # MIG re-layouts begun through ``start_relayout``
        self._relayouts = relayouts if relayouts is not None else MemoryRelayoutStore()

    # -- time: billing and the MIG re-layouts' steps ----------------------------------------
    def step(self, now: datetime) -> None:
        """Advance to ``now``: bill nodes, finish provisioning, bind and start replicas."""
        with self._lock:
            dt_s = max(0.0, (now - self._now).total_seconds())
            for node in self._nodes:
                gpus = self._pools[node.pool].gpus_per_node
                self._gpu_seconds_by_pool[node.pool] += dt_s * gpus
            self._now = now
            self._move_relayouts(now)
            self._move_leaving(now)
            self._bind_pending()

    def _move_relayouts(self, now: datetime) -> None:
        """A re-layout whose surge node is ready (or gone) cordons its node and moves its
        replicas (``_drain``); a drained node is laid out after ``mig_relayout_s``, and then
        uncordoned."""
        ready = {n.name for n in self._nodes if n.ready_at <= now}
        names = {n.name for n in self._nodes}
        for node in self._nodes:
            relayout = node.relayout
            if relayout is None:
                continue
            if not relayout.cordoned and (relayout.surge_node in ready
                                          or relayout.surge_node not in names):
                relayout.draining = True
            if relayout.draining:
                self._drain(node, relayout, now)
            elif relayout.done_at is not None and relayout.done_at <= now:
                node.mig = relayout.target if relayout.target.is_mig_enabled() else None
                node.relayout = None
                self._record(relayout, RelayoutPhase.DONE, "")

    def _drain(self, node: SimNode, relayout: Relayout, now: datetime) -> None:
        """Make before break: each replica on ``node`` starts a successor where there is room
        and leaves once it is ready; one with no room anywhere is evicted (it waits as a
        pending replica). Drained, the node's layout changes (``done_at``)."""
        for replica in self._serving_on(node.name):
            if not self._move(replica, now):
                replica.node, replica.ready_at = None, None
        moving = self._serving_on(node.name)
        if moving:
            self._record(relayout, RelayoutPhase.DRAIN, f"draining: {len(moving)} replicas "
                         f"moving, each once its successor is ready")
            return
        relayout.draining = False
        relayout.done_at = now + timedelta(seconds=self._sample(self._settings.mig_relayout_s))
        self._record(relayout, RelayoutPhase.AWAIT_MIG,
                     f"awaiting_mig_manager: laid out at {relayout.done_at:%H:%M:%S}")

    def _record(self, relayout: Relayout, phase: RelayoutPhase, wait_reason: str) -> None:
        """Save the re-layout's step when its phase or wait reason changed."""
        if (relayout.record.phase, relayout.record.wait_reason) == (phase, wait_reason):
            return
        relayout.record = replace(relayout.record, phase=phase, updated_at=self._now,
                                  deadline_at=None, wait_reason=wait_reason)
        self._relayouts.save_relayout(relayout.record)

    # -- ports: ClusterReader, NodePoolActuator, ReplicaActuator ----------------------------
    def snapshot(self) -> ObservedState:
        with self._lock:
            return ObservedState(
                synced_at=self._now,
                pools=observed_pools(self._pools, self._nodes, self._targets, self._now),
                nodes=observed_nodes(self._pools, self._nodes, self._specs, self._replicas,
                                     self._now),
                models=observed_models(self._replicas, self._specs, self._true_factor,
                                       self._demand_rps, self._now))

    def set_size(self, pool: str, nodes: int) -> ActionOutcome:
        with self._lock:
            if pool not in self._pools:
                return ActionOutcome(pool, False, f"unknown pool {pool}")
            if nodes < 0:
                return ActionOutcome(pool, False, f"negative size {nodes}")
            floor = self.surge_floors().get(pool, 0)  # as surge_floors hold a NodePool
            held = f" (held at the relayout surge floor {floor})" if floor > nodes else ""
            nodes = max(nodes, floor)
            self._resize(pool, nodes)
            return ActionOutcome(pool, True, f"pool {pool} target {nodes} nodes{held}")

    def set_replicas(self, model: str, replicas: int) -> ActionOutcome:
        with self._lock:
            if model not in self._replicas:
                return ActionOutcome(model, False, f"unknown model {model}")
            current = self._replicas[model]
            if replicas < len(current):
                leaving = {n.name for n in self._nodes if n.leaving}
                costs = deletion_costs_of(self._replicas, model, leaving)
                current.sort(key=lambda r: stop_order(r, self._now, leaving, costs[id(r)]))
                del current[: len(current) - replicas]
            current.extend(SimReplica(model) for _ in range(replicas - len(current)))
            self._bind_pending()
            return ActionOutcome(model, True, f"model {model} target {replicas} replicas")

    # -- ports: SharingActuator, MigRelayoutActuator ------------------------------------------
    def _node(self, name: str) -> SimNode | None:
        return next((n for n in self._nodes if n.name == name), None)

    def apply_sharing(self, node: str, layout: SharingLayout) -> ActionOutcome:
        with self._lock:
            found = self._node(node)  # as the Kubernetes actuator: the layout, then the node
            problems = layout.problems() or ([] if found is not None else [f"unknown node {node}"])
            if found is not None and layout.mode is SharingMode.MPS and found.mig is not None:
                problems.append(f"node {node}: MPS runs on whole GPUs only, but MIG is laid out")
            if problems:
                return ActionOutcome(node, False, "; ".join(problems))
            assert found is not None
            found.sharing = layout
            return ActionOutcome(node, True, f"node {node} sharing {layout.describe()}")

    def start_relayout(self, node: str, layout: NodeMigLayout, reason: str) -> ActionOutcome:
        """As the Kubernetes relayout does: one node of a pool at a time (a second is refused,
        retryably); a node running replicas first gets a surge node of its own layout (the pool
        held one larger until the re-layout ends); once that is ready (at once for an empty
        node) it is cordoned and drained, and laid out after ``mig_relayout_s``."""
        with self._lock:
            found = self._node(node)  # as the Kubernetes actuator: the layout, then the node
            problems = layout_problems(layout) or (
                [] if found is not None else [f"unknown node {node}"])
            if problems:
                return ActionOutcome(node, False, "; ".join(problems))
            assert found is not None
            if found.relayout is not None:
                same = found.relayout.target == layout
                return ActionOutcome(node, same, f"node {node} is re-laying out",
                                     retryable=not same)
            other = next((n.name for n in self._nodes if n.pool == found.pool
                          and n.relayout is not None), None)
            if other is not None:
                return ActionOutcome(node, False, f"pool_relayout_in_progress: one node of "
                                     f"{found.pool} at a time ({other} is re-laying out)",
                                     retryable=True)
            if found.has_layout(layout, self._pools[found.pool].gpus_per_node):
                return ActionOutcome(node, True, f"node {node} already has the layout")
            surge = None
            if self._on(node):
                self._resize(found.pool, self._targets[found.pool] + 1)
                surge = self._nodes[-1]  # a replacement of the target layout takes the replicas
                surge.mig = layout if layout.is_mig_enabled() else None
                surge.sharing = found.sharing
            # only a surge holds the pool (as surge_floors: an empty node's asks none)
            record = replace(start_relayout(
                node, found.pool, config_name(found.mig) if found.mig else ALL_DISABLED,
                config_name(layout), layout, self._now, RelayoutPolicy(), reason),
                deadline_at=None, surge_nodes=self._targets[found.pool] if surge else 0,
                wait_reason=f"surge_pending: {surge.name} provisioning" if surge else "")
            self._relayouts.save_relayout(record)
            found.relayout = Relayout(layout, surge.name if surge else None, record)
            self.relayouts_started += 1
            self._move_relayouts(self._now)
            self._bind_pending()
            return ActionOutcome(node, True, f"node {node} re-layout to {layout.describe()} "
                                 f"({reason})")

    def in_flight(self) -> dict[str, NodeMigLayout]:
        with self._lock:
            return {n.name: n.relayout.target for n in self._nodes if n.relayout is not None}

    def advance(self) -> tuple[MigRelayout, ...]:
        """Re-layouts move on with ``step``; the active ones as last saved."""
        with self._lock:
            return tuple(n.relayout.record for n in self._nodes if n.relayout is not None)

    def surge_floors(self) -> Mapping[str, int]:
        with self._lock:
            return active_surge_floors(n.relayout.record for n in self._nodes
                                       if n.relayout is not None)

    def lay_out_now(self, node: str, layout: NodeMigLayout) -> None:
        """``node`` has ``layout`` already (a fleet taken over was laid out before): no drain,
        and its replicas bind where the layout lets them."""
        with self._lock:
            found = self._node(node)
            if found is not None and not layout_problems(layout):
                found.mig = layout if layout.is_mig_enabled() else None
                self._unbind_unheld(found)
                self._bind_pending()

    def _unbind_unheld(self, node: SimNode) -> None:
        """Replicas bound to ``node`` that its layout cannot hold lose their place (they bind
        again wherever one is free); the others stay as they are."""
        bound = [(m, r) for m, r in self._on(node.name) if r.node == node.name]
        for _, replica in bound:
            replica.node = None
        for model, replica in bound:
            if self._has_room(node, self._specs[model]):
                replica.node = node.name
            else:
                replica.ready_at = None

    # -- accounting and resume --------------------------------------------------------------
    @property
    def gpu_hours(self) -> float:
        return sum(self._gpu_seconds_by_pool.values()) / 3600

    def cost_usd(self, price_per_gpu_hour_by_pool: dict[str, float]) -> float:
        return sum(seconds / 3600 * price_per_gpu_hour_by_pool.get(pool, 0.0)
                   for pool, seconds in self._gpu_seconds_by_pool.items())

    def restore(self, observed: ObservedState) -> None:
        """Resume from a stored snapshot: pools at their targets (ready), replicas warm."""
        with self._lock:
            end_stored_relayouts(self._relayouts, self._now)
            for pool in observed.pools:
                if pool.name in self._pools:
                    self._resize(pool.name, pool.target_nodes)
            restore_layouts(self._pools, self._nodes, observed)
            for model in observed.models:
                if model.name in self._replicas:
                    self._replicas[model.name] = [SimReplica(model.name)
                                                  for _ in range(model.replicas_target)]
            self.adopt()

    def adopt(self) -> None:
        """The fleet at its current targets was already running: every node ready now, with
        every model's image and weights, and every replica that fits bound and serving."""
        with self._lock:
            for node in self._nodes:
                node.ready_at = min(node.ready_at, self._now)
                node.warm_models.update(self._replicas)
            self._bind_pending()
            for replicas in self._replicas.values():
                for r in replicas:
                    if r.node is not None:
                        r.ready_at = self._now
