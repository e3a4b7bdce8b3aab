"""SimWorld: the simulated cluster's nodes and replicas, which ``SimCluster`` (``sim.cluster``)
drives through time and acts on as its ports.

Nodes take a sampled provisioning time before they are ready; a replica needs a GPU share on a
ready node of its product, then a sampled cold start (image pull on a node that never ran the
model, weight load, warm-up; a few seconds on a node that already has image and weights).

Scaling a pool down removes nodes still provisioning at once; a ready node leaves make-before-
break, as Karpenter consolidates (and as ``headroom simulate``'s fleet drains): cordoned, each of
its replicas starts a successor elsewhere and keeps serving until that one is ready, and the node
is deleted once empty. Without room elsewhere a replica keeps serving and the node stays.

Replicas bind by GPU share, a replica of N GPUs on N GPUs of one node that no other replica
touches (never split across nodes); with ``mig_binding`` (the demo, whose loop lays nodes out)
a replica on a MIG slice also needs a free instance of its compute size on the node, a
whole-GPU replica a node with MIG off and a replica of several GPUs one whose GPUs are not
shared either, so MIG models are served only where the loop has laid nodes out.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import ModelSpec
from controlplane.domain.node_configs import EXCLUSIVE
from controlplane.settings import SimSettings
from controlplane.sim.nodes import (
    SimNode,
    SimReplica,
    bound_to,
    instance_free_for,
    replica_share,
    whole_gpus_held,
)


class SimWorld:
    def __init__(self, pools: Sequence[PoolSpec], specs: Sequence[ModelSpec],
                 settings: SimSettings, now: datetime, mig_binding: bool = False) -> None:
        self._pools = {p.name: p for p in pools}
        self._specs = {s.name: s for s in specs}
        self._settings = settings
        self._rng = random.Random(settings.seed)
        self._now = now
        self._nodes: list[SimNode] = []
        self._targets: dict[str, int] = {p.name: p.min_nodes for p in pools}
        self._replicas: dict[str, list[SimReplica]] = {s.name: [] for s in specs}
        self._serial = 0
        self._lock = threading.RLock()
        self._mig_binding = mig_binding
        for pool in pools:
            self._resize(pool.name, pool.min_nodes, ready=True)

    def _sample(self, bounds: tuple[float, float]) -> float:
        return self._rng.uniform(*bounds)

    def _resize(self, pool: str, nodes: int, ready: bool = False) -> None:
        """``nodes`` in ``pool``, not counting those leaving it. Shrinking removes nodes still
        provisioning at once, then makes the ready ones with the fewest replicas (the least to
        move) leave, newest first and a re-laying-out one last (``_move_leaving``)."""
        mine = [n for n in self._nodes if n.pool == pool and not n.leaving]
        for _ in range(nodes - len(mine)):
            self._serial += 1
            delay_s = 0.0 if ready else self._sample(self._settings.node_provision_s)
            self._nodes.append(SimNode(f"{pool}-{self._serial:04d}", pool, self._now,
                                     self._now + timedelta(seconds=delay_s)))
        if nodes < len(mine):
            victims = sorted(mine, key=lambda n: (n.ready_at <= self._now, n.relayout is not None,
                                                  len(self._on(n.name)),
                                                  -n.created_at.timestamp()))[: len(mine) - nodes]
            for node in victims:
                node.leaving = True
            gone = {n.name for n in victims if n.ready_at > self._now}
            self._nodes = [n for n in self._nodes if n.name not in gone]
            for name in gone:
                self._evict(name)
            self._move_leaving(self._now)
        self._targets[pool] = nodes

    def _pool_of_product(self, product: str) -> str | None:
        return next((p.name for p in self._pools.values() if p.product == product), None)

    def _on(self, node: str) -> list[tuple[str, SimReplica]]:
        return bound_to(self._replicas, node)

    def _serving_on(self, node: str) -> list[SimReplica]:
        """The replicas bound to ``node`` itself (not their successors elsewhere)."""
        return [r for rs in self._replicas.values() for r in rs if r.node == node]

    def _free_share(self, node: SimNode) -> float:
        used = sum(replica_share(self._specs[m]) for m, _ in self._on(node.name))
        return self._pools[node.pool].gpus_per_node - used

    def _has_room(self, node: SimNode, spec: ModelSpec) -> bool:
        """Whether ``node`` can take a replica of ``spec`` now: its layout holds it
        (``_can_hold``) and its GPUs have the replica's share free; a replica of N GPUs needs
        N GPUs of this one node that no other replica touches."""
        point = spec.best_point()
        if not self._can_hold(node, spec):
            return False
        if point.gpus > 1:
            held = whole_gpus_held(self._specs[m].best_point() for m, _ in self._on(node.name))
            return self._pools[node.pool].gpus_per_node - held >= point.gpus
        return self._free_share(node) >= point.replica_gpu_share - 1e-9

    def _bind_pending(self) -> None:
        for model, replicas in self._replicas.items():
            for replica in replicas:
                if replica.node is not None:
                    continue
                node = self._room_for(model)
                if node is None:
                    break
                replica.node = node.name
                replica.ready_at = self._now + timedelta(seconds=self._start_s(node, model))
                node.warm_models.add(model)

    def _room_for(self, model: str) -> SimNode | None:
        """A ready, uncordoned node with room for a replica of ``model``: the first (one that
        already ran it first: image and weights cached), or under ``sim.binding`` spread the
        one with the most GPU capacity free; None: none."""
        spec = self._specs[model]
        pool = self._pool_of_product(spec.best_point().product)
        ready_nodes = [n for n in self._nodes if n.pool == pool and n.ready_at <= self._now
                       and not n.leaving and not (n.relayout and n.relayout.cordoned)]
        ready_nodes.sort(key=lambda n: (model not in n.warm_models, n.name))
        fits = [n for n in ready_nodes if self._has_room(n, spec)]
        if self._settings.binding == "spread":  # the most free, the first of equals
            return min(fits, key=lambda n: -self._free_share(n), default=None)
        return fits[0] if fits else None

    def _can_hold(self, node: SimNode, spec: ModelSpec) -> bool:
        """With ``mig_binding`` a replica on a MIG slice needs a free MIG instance of its
        compute size and memory on the node, a whole-GPU replica a node with MIG off, and a
        replica of several GPUs a node with MIG off whose GPUs the device plugin does not
        share (it fails a pod asking for more than one shared GPU)."""
        if not self._mig_binding:
            return True
        point = spec.best_point()
        if point.gpus > 1:  # its pod asks for N nvidia.com/gpu: no shared one (the plugin
            return node.mig is None and node.sharing == EXCLUSIVE  # fails it), no MIG one
        if not point.compute_slices or node.mig is None:
            return not point.compute_slices and node.mig is None
        pool = self._pools[node.pool]
        held = [p for i in range(pool.gpus_per_node) for p in node.profiles(i)]
        bound = [self._specs[m].best_point() for m, _ in self._on(node.name)]
        return instance_free_for(pool.product, held, [b for b in bound if b.compute_slices],
                                 point)

    def _start_s(self, node: SimNode, model: str) -> float:
        if model in node.warm_models:
            return self._settings.warm_node_start_s
        return (self._sample(self._settings.image_pull_s) + self._sample(
            self._settings.weight_load_s) + self._sample(self._settings.warmup_s))

    def _move_leaving(self, now: datetime) -> None:
        """Make before break, as Karpenter consolidates a node: each ready replica on a leaving
        node starts a successor where there is room and leaves once it is ready (without room
        it keeps serving, and the node stays, billed); one still starting goes pending. An
        empty leaving node is deleted."""
        for node in [n for n in self._nodes if n.leaving]:
            for replica in self._serving_on(node.name):
                if replica.ready_at is None or replica.ready_at > now:
                    replica.node, replica.ready_at = None, None
                else:
                    self._move(replica, now)
            if not self._on(node.name):
                self._nodes.remove(node)

    def _move(self, replica: SimReplica, now: datetime) -> bool:
        """One step of moving ``replica`` make-before-break: a successor starts where there is
        room, and takes the replica's place once ready. False: no room anywhere."""
        if replica.next_node is None:
            room = self._room_for(replica.model)
            if room is None:
                return False
            replica.next_node = room.name
            replica.next_ready_at = now + timedelta(seconds=self._start_s(room, replica.model))
            room.warm_models.add(replica.model)
        if replica.next_ready_at is not None and replica.next_ready_at <= now:
            self._promote(replica)
        return True

    @staticmethod
    def _promote(replica: SimReplica) -> None:
        replica.node, replica.ready_at = replica.next_node, replica.next_ready_at
        replica.next_node, replica.next_ready_at = None, None

    def _evict(self, node: str) -> None:
        """``node`` is gone: its replicas unbind (a moving one's successor takes its place),
        and successors starting there are dropped."""
        for _, replica in self._on(node):
            if replica.next_node == node:
                replica.next_node, replica.next_ready_at = None, None
            elif replica.next_node is not None:
                self._promote(replica)
            else:
                replica.node, replica.ready_at = None, None

    def set_models(self, specs: Sequence[ModelSpec]) -> None:
        """The models the fleet runs from now on (the models table changed): a new model starts
        with no replica, a changed one keeps its replicas, a removed one's replicas stop (its
        workload goes with it, so nothing of it is observed, placed or billed any more)."""
        with self._lock:
            self._specs = {s.name: s for s in specs}
            self._replicas = {s.name: self._replicas.get(s.name, []) for s in specs}
            self._bind_pending()
