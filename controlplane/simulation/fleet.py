"""SimFleet: the simulated GPU fleet ``headroom simulate`` replays demand on.

It implements the control plane's ports (``ClusterReader``, ``NodePoolActuator``,
``ReplicaActuator``) plus ``set_idle_replicas`` for the ladder's idle rung, on a clock the caller
moves with ``advance``. The rungs of the warm-pool ladder are physical here:

* a node is billed from its request; it is ready after a provisioning draw, then pre-pulls the
  images and weights of its product's models (one uncached-load draw per model);
* a replica needs its GPU share on a ready node of its product (whole GPUs on one node when it
  needs several), then a start: a draw from the model's cached load times once the node holds its
  weights, else the wait for the pre-pull plus a cached draw;
* an idle replica (loaded, not routed) keeps ``idle_gpu_fraction`` of its share and wakes in
  ``idle_wake_s`` when its GPU still has room for the rest;
* a hot replica taken out of service becomes idle while the idle target allows, else it stops.

Scaling a pool down removes nodes still provisioning first; a ready node is drained
make-before-break, as Karpenter consolidates: it takes no new replicas, each of its serving
replicas gets a successor elsewhere and keeps serving until that one is ready, and the node is
deleted (and no longer billed) once empty. Without room elsewhere a drain waits.

Times are seconds since the start (floats); draws use one seeded generator, so a seed replays the
same fleet.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from controlplane.domain.actions import ActionOutcome
from controlplane.domain.desired import PoolSpec
from controlplane.domain.observed import (
    ObservedGpu,
    ObservedModel,
    ObservedNode,
    ObservedPool,
    ObservedState,
)
from controlplane.simulation.nodes import EPS, SimNode, SimReplica, gpu_slots, removal_order
from controlplane.simulation.sim_config import SimConfig, SimModel


class SimFleet:
    def __init__(self, config: SimConfig, pools: Sequence[PoolSpec],
                 observed_rps: Callable[[str, float], float], start_at: datetime,
                 seed: int) -> None:
        self._config = config
        self._pools = {p.name: p for p in pools}
        self._pool_of = {m.name: next(p.name for p in pools if p.product == m.shape.product)
                         for m in config.models}
        self._models: dict[str, SimModel] = {m.name: m for m in config.models}
        self._observed_rps = observed_rps
        self._start_at = start_at
        self._rng = random.Random(seed)
        self._now_s = 0.0
        self._serial = 0
        self._nodes: dict[str, list[SimNode]] = {p.name: [] for p in pools}  # incl. draining
        self._hot: dict[str, list[SimReplica]] = {m.name: [] for m in config.models}
        self._idle: dict[str, list[SimReplica]] = {m.name: [] for m in config.models}
        self._idle_target: dict[str, int] = {m.name: 0 for m in config.models}
        self._node_cache: tuple[ObservedNode, ...] | None = None
        self._next_ready_s = float("inf")

    # -- time ---------------------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        return self._now_s

    def advance(self, now_s: float) -> None:
        """Move to ``now_s``: nodes that became ready meanwhile take pending replicas then."""
        while self._next_ready_s <= now_s:
            self._now_s = max(self._now_s, self._next_ready_s)
            self._node_cache = None
            self._bind_all()
            self._next_ready_s = min((n.ready_s for ns in self._nodes.values() for n in ns
                                      if n.ready_s > self._now_s), default=float("inf"))
        self._now_s = max(self._now_s, now_s)
        self._settle_idle()
        self._drain()

    def _settle_idle(self) -> None:
        """Idle replicas that finished loading shrink to their idle share."""
        for model, replicas in self._idle.items():
            shape = self._models[model].shape
            keep = min(shape.gpu_share, 1.0) * shape.idle_gpu_fraction
            for r in replicas:
                if r.node is not None and r.ready_s is not None and r.ready_s <= self._now_s \
                        and r.held > keep + EPS:
                    self._release(r, r.held - keep)

    # -- placement on GPUs --------------------------------------------------------------------
    def _draw(self, model: SimModel, node: SimNode) -> float:
        cached_at = node.cached_s.get(model.name, float("inf"))
        wait_s = max(0.0, cached_at - self._now_s)
        return wait_s + model.true_cold_start.cached.draw(self._rng.random())

    def _bind(self, replica: SimReplica) -> bool:
        """First fit over the pool's ready nodes (oldest first), preferring nodes that already
        hold the model's weights; best fit among a node's GPUs."""
        model = self._models[replica.model]
        need = min(model.shape.gpu_share, 1.0) - EPS
        found: tuple[SimNode, tuple[int, ...]] | None = None
        for node in self._nodes[self._pool_of[replica.model]]:
            if node.ready_s > self._now_s or node.draining or max(node.free) < need:
                continue
            slots = gpu_slots(node, model.shape.gpu_share)
            if slots is None:
                continue
            if node.cached_s.get(model.name, float("inf")) <= self._now_s:
                found = (node, slots)
                break
            if found is None:
                found = (node, slots)
        if found is None:
            return False
        node, slots = found
        share = min(model.shape.gpu_share, 1.0)
        for i in slots:
            node.free[i] -= share
        replica.node, replica.gpus, replica.held = node, slots, share
        replica.ready_s = self._now_s + self._draw(model, node)
        return True

    def _release(self, replica: SimReplica, amount: float | None = None) -> None:
        if replica.successor is not None:
            self._release(replica.successor)
            replica.successor = None
        if replica.node is None:
            return
        give = replica.held if amount is None else amount
        for i in replica.gpus:
            replica.node.free[i] = min(1.0, replica.node.free[i] + give)
        replica.held -= give
        if amount is None:
            replica.node, replica.gpus, replica.held, replica.ready_s = None, (), 0.0, None

    def _bind_pending(self) -> None:
        for group in (self._hot, self._idle):
            for replicas in group.values():
                for replica in replicas:
                    if replica.node is None and not self._bind(replica):
                        break

    def _bind_all(self) -> None:
        self._bind_pending()
        self._drain()

    # -- draining -------------------------------------------------------------------------------
    def _drain(self) -> None:
        """Give replicas on draining nodes successors; swap once ready; delete empty nodes."""
        if not any(n.draining for ns in self._nodes.values() for n in ns):
            return
        unbound = False
        for model in self._models:
            self._idle[model] = [r for r in self._idle[model] if not self._leaves(r)]
            hot = self._hot[model]
            for i, replica in enumerate(hot):
                if replica.node is None or not replica.node.draining:
                    continue
                if replica.successor is None:
                    fresh = SimReplica(model)
                    if self._bind(fresh):
                        replica.successor = fresh
                successor = replica.successor
                ready = replica.ready_s is not None and replica.ready_s <= self._now_s
                if not ready or (successor is not None and successor.ready_s is not None
                                 and successor.ready_s <= self._now_s):
                    replica.successor = None
                    self._release(replica)
                    hot[i] = successor if successor is not None else replica
                    unbound = unbound or successor is None
        if unbound:
            self._bind_pending()
        for pool, nodes in self._nodes.items():
            kept = [n for n in nodes if not (n.draining and n.used() <= EPS)]
            if len(kept) != len(nodes):
                self._nodes[pool] = kept
                self._node_cache = None

    def _leaves(self, replica: SimReplica) -> bool:
        """An idle replica on a draining node stops at once."""
        if replica.node is not None and replica.node.draining:
            self._release(replica)
            return True
        return False

    # -- ports ----------------------------------------------------------------------------------
    def _active(self, pool: str) -> list[SimNode]:
        return [n for n in self._nodes[pool] if not n.draining]

    def set_size(self, pool: str, nodes: int) -> ActionOutcome:
        if pool not in self._pools:
            return ActionOutcome(pool, False, f"unknown pool {pool}")
        if nodes < 0:
            return ActionOutcome(pool, False, f"negative size {nodes}")
        active = self._active(pool)
        spec = self._pools[pool]
        for _ in range(nodes - len(active)):
            self._serial += 1
            ready_s = self._now_s + self._config.fleet.node_provision.draw(self._rng.random())
            self._nodes[pool].append(self._new_node(pool, spec, ready_s))
        if nodes < len(active):
            self._remove_nodes(pool, active, len(active) - nodes)
        self._node_cache = None
        self._next_ready_s = min([self._next_ready_s] + [n.ready_s for n in self._nodes[pool]
                                                         if n.ready_s > self._now_s])
        return ActionOutcome(pool, True, f"pool {pool} target {nodes} nodes")

    def _new_node(self, pool: str, spec: PoolSpec, ready_s: float) -> SimNode:
        node = SimNode(f"{pool}-{self._serial:05d}", pool, self._now_s, ready_s,
                     [1.0] * spec.gpus_per_node)
        for model in self._models.values():
            if self._pool_of[model.name] == pool:
                node.cached_s[model.name] = ready_s + model.true_cold_start.uncached.draw(
                    self._rng.random())
        return node

    def _remove_nodes(self, pool: str, active: list[SimNode], count: int) -> None:
        """Nodes still provisioning go at once (newest first); ready ones drain, emptiest first."""
        order = sorted(active, key=lambda n: (n.ready_s <= self._now_s, n.used(), -n.requested_s))
        for node in order[:count]:
            node.draining = True
        self._nodes[pool] = [n for n in self._nodes[pool]
                             if not (n.draining and n.ready_s > self._now_s)]
        self._bind_all()

    def _victims(self, replicas: list[SimReplica], count: int) -> list[SimReplica]:
        return sorted(replicas, key=lambda r: removal_order(r, self._now_s))[:count]

    def set_replicas(self, model: str, replicas: int) -> ActionOutcome:
        if model not in self._hot:
            return ActionOutcome(model, False, f"unknown model {model}")
        if replicas < 0:
            return ActionOutcome(model, False, f"negative replicas {replicas}")
        hot = self._hot[model]
        if replicas > len(hot):
            self._wake(model, replicas - len(hot))
            hot.extend(SimReplica(model) for _ in range(replicas - len(hot)))
            self._bind_all()
        elif replicas < len(hot):
            for victim in self._victims(hot, len(hot) - replicas):
                hot.remove(victim)
                self._retire(model, victim)
            self._bind_all()
        return ActionOutcome(model, True, f"model {model} target {replicas} replicas")

    def _wake(self, model: str, wanted: int) -> None:
        """Idle replicas that are loaded and still have room on their GPU start serving."""
        share = min(self._models[model].shape.gpu_share, 1.0)
        for replica in sorted(self._idle[model], key=lambda r: r.ready_s or float("inf")):
            if wanted <= 0 or replica.node is None or replica.node.draining:
                continue
            extra = share - replica.held
            if any(replica.node.free[i] < extra - EPS for i in replica.gpus):
                continue
            for i in replica.gpus:
                replica.node.free[i] -= extra
            replica.held = share
            loaded_s = replica.ready_s if replica.ready_s is not None else self._now_s
            replica.ready_s = max(loaded_s, self._now_s + self._config.fleet.idle_wake_s)
            self._idle[model].remove(replica)
            self._hot[model].append(replica)
            wanted -= 1

    def _retire(self, model: str, replica: SimReplica) -> None:
        """A hot replica leaves service: it stays loaded as idle if the idle target has room (or
        takes the place of an idle one still unbound or loading), else it stops."""
        loaded = replica.ready_s is not None and replica.ready_s <= self._now_s
        keep = replica.node is not None and not replica.node.draining
        idle = self._idle[model]
        if loaded and keep and len(idle) >= self._idle_target[model]:
            waiting = [r for r in idle if r.ready_s is None or r.ready_s > self._now_s]
            if waiting:
                idle.remove(waiting[-1])
                self._release(waiting[-1])
        if loaded and keep and len(idle) < self._idle_target[model]:
            if replica.successor is not None:
                self._release(replica.successor)
                replica.successor = None
            self._idle[model].append(replica)
            self._settle_idle()
        else:
            self._release(replica)

    def set_idle_replicas(self, model: str, replicas: int) -> ActionOutcome:
        """Absolute target of loaded-but-unrouted replicas; new ones load on free GPU share."""
        if model not in self._idle:
            return ActionOutcome(model, False, f"unknown model {model}")
        if replicas < 0:
            return ActionOutcome(model, False, f"negative idle replicas {replicas}")
        self._idle_target[model] = replicas
        idle = self._idle[model]
        if len(idle) > replicas:
            for victim in self._victims(idle, len(idle) - replicas):
                idle.remove(victim)
                self._release(victim)
        elif len(idle) < replicas:
            idle.extend(SimReplica(model) for _ in range(replicas - len(idle)))
            self._bind_all()
        return ActionOutcome(model, True, f"model {model} idle target {replicas}")

    def materialize(self, nodes: Mapping[str, int], hot: Mapping[str, int]) -> None:
        """Start state: pools at ``nodes`` and ``hot`` replicas, all ready and cached now."""
        for pool, count in nodes.items():
            spec = self._pools[pool]
            for _ in range(count):
                self._serial += 1
                node = self._new_node(pool, spec, self._now_s)
                node.cached_s = dict.fromkeys(node.cached_s, self._now_s)
                self._nodes[pool].append(node)
        for model, count in hot.items():
            self.set_replicas(model, count)
            for r in self._hot[model]:
                if r.node is not None:
                    r.ready_s = self._now_s
        self._node_cache = None

    # -- reading --------------------------------------------------------------------------------
    def ready_replicas(self, model: str) -> int:
        return sum(1 for r in self._hot[model] if r.ready_s is not None
                   and r.ready_s <= self._now_s)

    def idle_replicas(self, model: str) -> int:
        return len(self._idle[model])

    def billed_gpus(self, pool: str | None = None) -> int:
        """GPUs of every node requested and not yet deleted, draining ones included."""
        return sum(len(ns) * self._pools[p].gpus_per_node for p, ns in self._nodes.items()
                   if pool is None or p == pool)

    def draining_nodes(self) -> int:
        return sum(1 for ns in self._nodes.values() for n in ns if n.draining)

    def snapshot(self) -> ObservedState:
        now_at = self._start_at + timedelta(seconds=self._now_s)
        pools = []
        for p in self._pools.values():
            active = self._active(p.name)
            ready = sum(1 for n in active if n.ready_s <= self._now_s)
            pools.append(ObservedPool(p.name, p.product, p.gpus_per_node, ready,
                                      len(active) - ready, len(active)))
        models = []
        for name, hot in self._hot.items():
            ready = self.ready_replicas(name)
            rps = self._models[name].true_per_replica_rps  # what the replicas really serve
            models.append(ObservedModel(name, ready, len(hot) - ready, len(hot),
                                        self._observed_rps(name, self._now_s), ready * rps))
        return ObservedState(now_at, tuple(pools), self._observed_nodes(), tuple(models))

    def _observed_nodes(self) -> tuple[ObservedNode, ...]:
        if self._node_cache is None:
            out = []
            for pool, nodes in self._nodes.items():
                spec = self._pools[pool]
                for node in nodes:
                    gpus = tuple(ObservedGpu(i, spec.product, 0, False)
                                 for i in range(spec.gpus_per_node))
                    out.append(ObservedNode(node.name, pool, spec.product,
                                            node.ready_s <= self._now_s, 0, 0, gpus,
                                            cordoned=node.draining))
            self._node_cache = tuple(out)
        return self._node_cache
