"""Desired state: nodes per pool and replicas per model that a fleet placement implies (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from controlplane.domain.demand import Demand
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


@dataclass(frozen=True, slots=True)
class DesiredState:
    pools: tuple[DesiredTarget, ...]
    replicas: tuple[DesiredTarget, ...]


def desired_state(
    placement: FleetPlacement, pools: Sequence[PoolSpec], demands: Sequence[Demand]
) -> DesiredState:
    """Nodes to hold the placed GPUs plus warm GPUs; one replica per placed segment."""
    pool_targets = []
    for pool in pools:
        placed = placement.gpus_for(pool.product)
        warm = placement.warm_gpus_for(pool.product)
        nodes = math.ceil((placed + warm) / pool.gpus_per_node)
        nodes = min(pool.max_nodes, max(pool.min_nodes, nodes))
        reason = f"placement_{placed}_gpus_warm_{warm}"
        pool_targets.append(DesiredTarget(pool.name, nodes, reason))
    unplaced = {entry.split(":", 1)[0].strip() for entry in placement.unplaced}
    replica_targets = [
        DesiredTarget(d.model, placement.replicas_for(d.model),
                      "unplaced" if d.model in unplaced else d.reason)
        for d in demands
    ]
    return DesiredState(tuple(pool_targets), tuple(replica_targets))
