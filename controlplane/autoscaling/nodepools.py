"""Node pools: desired nodes per GPU product from the placement plus warm pools (pure).

``desired_state`` rounds placed and warm GPUs up to whole nodes within each pool's min/max; this
module adds the cluster-wide GPU budget on top, taking whole nodes away from the pool with the
most GPUs first, and says so in the target's reason. It also says where each model's replicas
run (``ReplicaFootprint``), so the planner keeps the nodes of replicas the guards keep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from controlplane.domain.demand import Demand
from controlplane.domain.desired import DesiredState, PoolSpec, ReplicaFootprint, desired_state
from controlplane.domain.placement import FleetPlacement

if TYPE_CHECKING:  # sizing imports this module (its budget clamp)
    from controlplane.autoscaling.sizing import ReplicaShape

CLUSTER_GPU_BUDGET = "cluster_gpu_budget"
#: the reason of the pools held at min_nodes when even their floor is over the budget (the
#: settings refuse such a budget; the core says so rather than giving up without a word)
CLUSTER_GPU_BUDGET_BELOW_FLOOR = "cluster_gpu_budget_below_min_nodes"


def clamp_nodes_to_budget(desired: DesiredState, pools: Sequence[PoolSpec],
                          cluster_gpu_budget: int | None) -> DesiredState:
    """Remove whole nodes until the fleet's GPUs fit the budget (pools never below min_nodes);
    a clamped pool's target holds no more GPUs than its nodes, all of them full (no replica of
    several GPUs named on them: ``DesiredTarget.groups``). When every pool is at
    min_nodes and the fleet is still over the budget, the pools holding nodes say so in their
    reason (``CLUSTER_GPU_BUDGET_BELOW_FLOOR``)."""
    if cluster_gpu_budget is None:
        return desired
    specs = {p.name: p for p in pools}
    targets = {t.target: t for t in desired.pools}

    def total() -> int:
        return sum(t.value * specs[name].gpus_per_node for name, t in targets.items())

    while total() > cluster_gpu_budget:
        shrinkable = [n for n, t in targets.items() if t.value > specs[n].min_nodes]
        if not shrinkable:
            targets = {n: replace(t, reason=CLUSTER_GPU_BUDGET_BELOW_FLOOR) if t.value else t
                       for n, t in targets.items()}
            break
        name = max(shrinkable, key=lambda n: (targets[n].value * specs[n].gpus_per_node, n))
        target, value = targets[name], targets[name].value - 1
        gpus = (None if target.gpus is None
                else min(target.gpus, value * specs[name].gpus_per_node))
        # its nodes are cut under what its replicas need: none is known to leave room
        targets[name] = replace(target, value=value, reason=CLUSTER_GPU_BUDGET, gpus=gpus,
                                groups=())
    return replace(desired, pools=tuple(targets[t.target] for t in desired.pools))


def replica_footprints(shapes: Sequence[ReplicaShape], pools: Sequence[PoolSpec]
                       ) -> tuple[ReplicaFootprint, ...]:
    """Each model's pool (the first of its GPU product) and the GPUs its replicas take there;
    a model of a product no pool offers runs on none of them (pool ""): the replicas the guards
    keep of it hold no pool's nodes (the live loop sizes a model on a product a pool offers
    whenever its profile has one: ``live.replica_shape``)."""
    found = []
    for shape in shapes:
        pool = next((p for p in pools if p.product == shape.product), None)
        found.append(ReplicaFootprint(shape.model, pool.name if pool else "", shape.per_gpu,
                                      shape.whole_gpus, shape.product, shape.gpu_share))
    return tuple(found)


def node_pool_targets(placement: FleetPlacement, pools: Sequence[PoolSpec],
                      demands: Sequence[Demand], cluster_gpu_budget: int | None = None,
                      shapes: Sequence[ReplicaShape] = (),
                      budget_cuts: Mapping[str, str] | None = None) -> DesiredState:
    """Desired nodes per pool (placed + warm GPUs, whole nodes, budget), replicas per model (the
    budget's reason where ``budget_cuts``, model -> reason, says a GPU budget cut them) and
    where the replicas of each model in ``shapes`` run. Under a cluster GPU budget no pool may
    grow over its target for replicas the guards keep (``DesiredTarget.max_value``)."""
    desired = clamp_nodes_to_budget(desired_state(placement, pools, demands, budget_cuts), pools,
                                    cluster_gpu_budget)
    if cluster_gpu_budget is not None:  # kept replicas hold nodes, never add any over it
        desired = replace(desired, pools=tuple(replace(t, max_value=t.value)
                                               for t in desired.pools))
    return replace(desired, footprints=replica_footprints(shapes, pools))
