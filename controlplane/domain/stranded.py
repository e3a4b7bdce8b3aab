"""Replicas of several GPUs that no node can take although the pool has the GPUs (pure).

A replica of N GPUs (tensor parallel) needs N free whole GPUs on ONE node. The pool's node target
counts nodes as if replicas were packed well (``node_fill``), but the Kubernetes scheduler places
pods one by one, by default spreading them (LeastAllocated): single-GPU pods can leave one free
GPU on every node, and the pod of a replica of 2 then waits, Pending, with GPUs free in the pool.
Under Karpenter the NodePool's node limit is the target, so Karpenter cannot add a node for it
either (Cluster Autoscaler could: there the target is a floor), and the replica would wait for
good.

So: a model whose replicas of N GPUs have pods no node has bound, while no ready, uncordoned node of
its pool with whole, unshared GPUs has N of them free though those nodes have N free in all (GPUs
that warm-pool placeholders hold count as free: the scheduler preempts those), has *stranded*
replicas (with fewer free in all, a replica waits for nodes, as any scale-up does). Their pool's
target is raised, once they have waited ``autoscaling.stranded_grace_s`` (the guard memory keeps
since when: a pod bound a moment later, or given room by replicas scaling down, costs no node),
to its ready nodes plus the nodes the stranded replicas fill on their own
(``node_fill.nodes_to_hold``), within its max_nodes and, under a cluster GPU budget, within the
GPUs the budget leaves over the other pools' targets. The raise is absolute and recomputed every
tick: while the new node provisions the replicas are still stranded and the target holds; once
they are bound it falls back to what the placement needs, and a node their pods now hold is not
removed by Karpenter's consolidation or Cluster Autoscaler, which move pods only where they fit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from controlplane.domain.desired import DesiredState, DesiredTarget, PoolSpec
from controlplane.domain.guards import GuardMemory, Recommendation
from controlplane.domain.node_fill import nodes_to_hold
from controlplane.domain.observed import ObservedNode, ObservedState

STRANDED = "stranded"  # a pool target's reason: stranded:<model> <k>x<N> GPUs[, ...]
_NOTE = re.compile(r"model (?P<model>.+?): \d+ replica\(s\) of \d+ GPUs unscheduled: .*")
#: the guard memory's key of a pool with stranded replicas (stranded/<pool>): since when
MEMORY_PREFIX = "stranded/"


@dataclass(frozen=True, slots=True)
class StrandedReplicas:
    """``replicas`` of ``model``, each of ``gpus`` GPUs of one node, that ``pool`` cannot bind:
    the most GPUs any of its nodes has free is ``most_free_gpus`` (of ``free_gpus`` in all)."""

    model: str
    pool: str
    gpus: int
    replicas: int
    most_free_gpus: int
    free_gpus: int

    def describe(self) -> str:
        return f"{self.model} {self.replicas}x{self.gpus} GPUs"


def free_whole_gpus(node: ObservedNode) -> int:
    """Whole GPUs of ``node`` that a replica of several GPUs could take now: 0 on a node not
    ready or cordoned, or with a GPU in MIG mode or shared (the device plugin fails a pod asking
    for several shared GPUs); else its GPUs less those pods hold."""
    if not node.ready or node.cordoned or any(
            g.mig_enabled or g.sharing != "exclusive" for g in node.gpus):
        return 0
    return max(0, len(node.gpus) - node.whole_gpus_in_use)


def stranded_replicas(observed: ObservedState, desired: DesiredState
                      ) -> tuple[StrandedReplicas, ...]:
    """The models with replicas of several GPUs (``desired.footprints``) whose unscheduled pods
    (``ObservedModel.replicas_unscheduled``; a model whose pods were not read has none) no ready
    node of their pool has room for although the pool has as many GPUs free as one of them
    takes, on several nodes."""
    found = []
    for footprint in desired.footprints:
        seen = observed.model(footprint.model)
        if footprint.whole_gpus < 2 or not footprint.pool or seen is None \
                or not seen.replicas_unscheduled:
            continue
        free = [free_whole_gpus(n) for n in observed.nodes if n.pool == footprint.pool]
        most = max(free, default=0)
        # no node has room, yet the pool has the GPUs (with fewer free in all, the replica waits
        # for nodes, as any scale-up does)
        if most < footprint.whole_gpus <= sum(free):
            found.append(StrandedReplicas(footprint.model, footprint.pool,
                                          footprint.whole_gpus, seen.replicas_unscheduled,
                                          most, sum(free)))
    return tuple(found)


def _nodes_wanted(stranded: Sequence[StrandedReplicas], nodes_ready: int, pool: PoolSpec) -> int:
    """A pool's ready nodes and the nodes its stranded replicas fill on their own."""
    groups = [s.gpus for s in stranded for _ in range(s.replicas)]
    return nodes_ready + nodes_to_hold(groups, 0, pool.gpus_per_node)


@dataclass(frozen=True, slots=True)
class Relief:
    """``desired`` with the pools of stranded replicas raised, the guard memory that says since
    when each pool has had them, and one note per model with stranded replicas."""

    desired: DesiredState
    memory: GuardMemory
    notes: tuple[str, ...] = ()


def _since(memory: GuardMemory, stranded: Sequence[StrandedReplicas], now: datetime
           ) -> tuple[dict[str, datetime], GuardMemory]:
    """Since when each pool with stranded replicas has had them (now for a pool that had none
    at the last tick), and the memory that keeps it: the other pools' entries dropped."""
    since = {}
    for pool in sorted({s.pool for s in stranded}):
        seen = memory.for_target(MEMORY_PREFIX + pool)
        since[pool] = seen[-1].at if seen else now
    history = tuple((k, h) for k, h in memory.history if not k.startswith(MEMORY_PREFIX))
    history += tuple((MEMORY_PREFIX + pool, (Recommendation(at, 1),))
                     for pool, at in since.items())
    return since, replace(memory, history=history)


def relieve_stranded(desired: DesiredState, observed: ObservedState, pools: Sequence[PoolSpec],
                     memory: GuardMemory, now: datetime, grace_s: float,
                     cluster_gpu_budget: int | None = None) -> Relief:
    """Each pool that has had stranded replicas for ``grace_s`` (a pod the scheduler binds a
    moment later, or one whose room other replicas scaling down free, costs no node) raised to
    its ready nodes plus the nodes those replicas fill, never past its max_nodes nor, with
    ``cluster_gpu_budget``, the GPUs the budget leaves over the other targets; the reason names
    them (``stranded:<model> <k>x<N> GPUs``)."""
    stranded = stranded_replicas(observed, desired)
    since, memory = _since(memory, stranded, now)
    if not stranded:
        return Relief(desired, memory)
    specs = {p.name: p for p in pools}
    spare_gpus = (None if cluster_gpu_budget is None else cluster_gpu_budget - sum(
        t.value * specs[t.target].gpus_per_node for t in desired.pools if t.target in specs))
    targets, wanted_by_pool = [], {}
    for target in desired.pools:
        mine = [s for s in stranded if s.pool == target.target]
        seen, spec = observed.pool(target.target), specs.get(target.target)
        if mine and seen is not None and spec is not None:
            wanted_by_pool[target.target] = wanted = _nodes_wanted(mine, seen.nodes_ready, spec)
            room = spec.max_nodes if spare_gpus is None else min(
                spec.max_nodes, target.value + max(0, spare_gpus) // spec.gpus_per_node)
            raised = min(wanted, room)
            if raised > target.value and (now - since[target.target]).total_seconds() >= grace_s:
                if spare_gpus is not None:
                    spare_gpus -= (raised - target.value) * spec.gpus_per_node
                target = replace(
                    target, value=raised,
                    reason=f"{STRANDED}:{', '.join(s.describe() for s in mine)}",
                    max_value=None if target.max_value is None
                    else max(target.max_value, raised))
        targets.append(target)
    desired = replace(desired, pools=tuple(targets))
    notes = tuple(_note(s, _pool_target(desired, s.pool), wanted_by_pool.get(s.pool),
                        (now - since[s.pool]).total_seconds(), grace_s) for s in stranded)
    return Relief(desired, memory, notes)


def _note(s: StrandedReplicas, target: DesiredTarget | None, wanted: int | None,
          waited_s: float, grace_s: float) -> str:
    """What waits, why no node takes it, and what the pool's target does for it."""
    if target is None or wanted is None:
        then = f"pool {s.pool} is not one of the configured pools"
    elif target.reason.startswith(STRANDED):
        then = f"pool {s.pool}'s target raised to {target.value} node(s) for them"
    elif target.value >= wanted:
        then = f"pool {s.pool}'s target of {target.value} node(s) has room for them"
    elif waited_s < grace_s:
        then = (f"stranded for {waited_s:.0f} s: pool {s.pool}'s target is raised for them "
                f"after {grace_s:.0f} s (autoscaling.stranded_grace_s)")
    else:
        then = (f"pool {s.pool}'s target stays at {target.value} node(s) ({target.reason}), "
                f"under the {wanted} they need: its max_nodes or the cluster GPU budget leaves "
                "no room for more")
    return (f"model {s.model}: {s.replicas} replica(s) of {s.gpus} GPUs unscheduled: no ready "
            f"node of pool {s.pool} has {s.gpus} whole GPUs free ({s.free_gpus} free in all, at "
            f"most {s.most_free_gpus} on one node); {then}; a scheduler that scores nodes "
            "MostAllocated on nvidia.com/gpu packs replicas whole")


def stranded_noted(notes: Iterable[str]) -> dict[str, str]:
    """Model -> the note a tick's ``notes`` say of its stranded replicas (``_note``, read back
    by the dashboard); models with none absent."""
    return {found["model"]: note for note in notes if (found := _NOTE.fullmatch(note))}


def _pool_target(desired: DesiredState, pool: str) -> DesiredTarget | None:
    return next((t for t in desired.pools if t.target == pool), None)
