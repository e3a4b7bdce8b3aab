"""Desired state: nodes per pool and replicas per model that a fleet placement implies (pure)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controlplane.domain.demand import Demand
from controlplane.domain.node_configs import EXCLUSIVE_GPUS, NodeKind, planned_configs
from controlplane.domain.node_fill import nodes_to_hold
from controlplane.domain.placement import FleetPlacement


@dataclass(frozen=True, slots=True)
class PoolSpec:
    name: str
    product: str
    gpus_per_node: int
    min_nodes: int
    max_nodes: int
    price_per_gpu_hour: float


@dataclass(frozen=True, slots=True)
class DesiredTarget:
    target: str
    value: int
    reason: str
    # pools only: the GPUs the target holds before rounding to whole nodes (placed + warm, at
    # most value x GPUs per node); None when unknown or split between nodes of several kinds
    gpus: int | None = None
    # pools only: the most nodes the pool may grow to over its target for replicas the guards
    # keep over theirs (its max_nodes; its target under a cluster GPU budget); None: none
    max_value: int | None = None
    # pools only: the GPUs of each replica of several GPUs among ``gpus``, each on one node:
    # replicas kept over their targets fill only the room those leave whole on a node
    groups: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicaFootprint:
    """The pool a model's replicas run in ("" for none of the configured pools: no pool offers
    its product) and the GPUs they take there: ``per_gpu`` replicas share one GPU (1 for
    whole-GPU replicas); a replica of several GPUs takes ``whole_gpus``. ``product`` and
    ``gpu_share`` (of one GPU per replica, as showback splits a GPU) let the plan say what the
    replicas the guards keep take, so showback bills them to the model, not as idle ("": not
    known, nothing said)."""

    model: str
    pool: str
    per_gpu: int = 1
    whole_gpus: int = 1
    product: str = ""
    gpu_share: float = 0.0

    def __post_init__(self) -> None:
        if self.per_gpu < 1 or self.whole_gpus < 1:
            raise ValueError(f"model {self.model!r}: per_gpu and whole_gpus must be >= 1")
        if not self.gpu_share >= 0:
            raise ValueError(f"model {self.model!r}: gpu_share must be >= 0")

    def gpus_for(self, replicas: int) -> int:
        """Whole GPUs ``replicas`` of the model take (a shared GPU counts whole)."""
        return math.ceil(replicas / self.per_gpu) * self.whole_gpus


@dataclass(frozen=True, slots=True)
class DesiredState:
    pools: tuple[DesiredTarget, ...]
    replicas: tuple[DesiredTarget, ...]
    stale: tuple[str, ...] = ()  # targets computed from stale inputs: never scaled down
    # where each model's replicas run: the planner keeps the nodes of replicas that the guards
    # keep over their target; a model without one holds every pool while it is kept
    footprints: tuple[ReplicaFootprint, ...] = ()
    # models held at the replicas they have though the placement counts none of them (left
    # unplaced while they serve: ``controlplane.domain.unplaced``): the planner keeps their
    # nodes as it keeps the nodes of replicas the guards keep over their target
    held_unplaced: tuple[str, ...] = ()

    def footprint(self, model: str) -> ReplicaFootprint | None:
        return next((f for f in self.footprints if f.model == model), None)

    def is_fresh(self, target: str) -> bool:
        return target not in self.stale


UNPLACED = "unplaced"  # :<reason code>, a replica target PlanFleet left unplaced


def unplaced_reason(why: str) -> str:
    """A replica target's reason for a model unplaced because ``why`` (its unplaced entry
    without the model: ``pool_max_gpus (not enough GPUs ...)`` -> ``unplaced:pool_max_gpus``)."""
    code = why.split(" (", 1)[0].strip()
    return f"{UNPLACED}:{code}" if code else UNPLACED


def tensor_parallel_groups(placement: FleetPlacement, product: str,
                           mode: str | None = None) -> tuple[int, ...]:
    """The GPUs of each replica of several GPUs of ``product`` (of ``mode`` only, when given),
    each counted once (its first GPU's segment): they must share one node."""
    return tuple(s.gpus for s in placement.segments if s.product == product and s.gpus > 1
                 and s.gpu_index == 0 and mode in (None, s.mode))


def _nodes_by_kind(kinds: Mapping[NodeKind, int], placement: FleetPlacement,
                   pool: PoolSpec) -> int:
    """Nodes for the planned GPUs of each node kind apart (a node carries one MIG / sharing
    config): the replicas of several GPUs, on exclusive whole GPUs, each on one node of the
    kind of exclusive GPUs."""
    exclusive = tensor_parallel_groups(placement, pool.product, "exclusive")
    return sum(nodes_to_hold(exclusive, gpus - sum(exclusive), pool.gpus_per_node)
               if kind == EXCLUSIVE_GPUS else nodes_to_hold((), gpus, pool.gpus_per_node)
               for kind, gpus in kinds.items())


def desired_state(
    placement: FleetPlacement, pools: Sequence[PoolSpec], demands: Sequence[Demand],
    budget_cuts: Mapping[str, str] | None = None,
) -> DesiredState:
    """Nodes to hold the placed GPUs plus warm GPUs, and at least one node per started
    ``gpus_per_node`` GPUs of each node kind the placement needs (a node carries one MIG / sharing
    config, so MIG GPUs and whole GPUs of a pool do not share a node); each replica of several
    GPUs on one node (``node_fill``: a node of G GPUs holds floor(G / N) replicas of N); one
    replica per placed segment (a replica of several GPUs once).

    A replica target's reason is its demand's, or ``unplaced:<reason code>`` (PlanFleet's,
    e.g. ``unplaced:no_pool_for_profile``), or, for a model in ``budget_cuts`` (model ->
    reason: a GPU budget cut its serving replicas), the budget's.

    A model whose demand came from stale inputs is marked stale, and so is every pool that holds
    one of its segments: the planner will not scale those down.
    """
    pool_targets = []
    configs = planned_configs(placement)
    for pool in pools:
        placed = placement.gpus_for(pool.product)
        warm = placement.warm_gpus_for(pool.product)
        kinds = Counter(c.kind for c in configs.get(pool.product, []))
        groups = tensor_parallel_groups(placement, pool.product)
        needed = max(nodes_to_hold(groups, placed - sum(groups) + warm, pool.gpus_per_node),
                     _nodes_by_kind(kinds, placement, pool))
        nodes = min(pool.max_nodes, max(pool.min_nodes, needed))
        reason = f"placement_{placed}_gpus_warm_{warm}"
        # the free room of nodes of several kinds may not be of the kind a replica needs
        gpus = min(placed + warm, nodes * pool.gpus_per_node) if len(kinds) <= 1 else None
        # a pool capped under what the placement needs has no room: its nodes count as full
        held = groups if nodes >= needed and gpus is not None else ()
        pool_targets.append(DesiredTarget(pool.name, nodes, reason, gpus,
                                          max(nodes, pool.max_nodes), held))
    cuts = budget_cuts or {}
    replica_targets = [
        DesiredTarget(d.model, placement.replicas_for(d.model),
                      unplaced_reason(why) if (why := placement.unplaced_why(d.model))
                      else cuts.get(d.model, d.reason))
        for d in demands
    ]
    stale_models = {d.model for d in demands if not d.is_fresh}
    stale_products = {s.product for s in placement.segments if s.model in stale_models}
    stale = (*sorted(stale_models), *(p.name for p in pools if p.product in stale_products))
    return DesiredState(tuple(pool_targets), tuple(replica_targets), stale)
