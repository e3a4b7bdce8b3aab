"""The autoscaling core for the reconcile loop (``headroom demo`` / ``serve``), pure.

The live loop places replicas with the scheduler's PlanFleet (MIG geometry, MPS, time-slicing),
so it runs the core in two halves around it: ``core.size`` decides the hot replicas and the
warm-pool ladder, PlanFleet places exactly the hot replicas (``placement_demands``) and keeps the
ladder's warm GPUs (``ladder_warm``, sent with the request), not its own heuristic's, in the plan
it prices, stores and serves (GetPlan / WatchPlan), before ``core.settle`` turns them into node
targets and a guarded plan: the plan served under a revision is the one the loop records.

The live backends have no actuator for loaded-but-idle replicas, so a live model's ladder has
three rungs: hot, cached (warm GPU share on a node that is up; a start there is the fast mode of
the cold start) and cold (a new node: provisioning + the model's load). On Kubernetes such a rung
would not pay: a sleeping vLLM engine or an unrouted Triton pod keeps its device-plugin
allocation (the whole GPU, MIG slice or MPS / time-slicing replica), so it costs what a hot
replica costs while waking slower, and the predictive policy then keeps those units hot (hot
replicas cover the warm quantile: ``policies.predictive_policy``). The rung pays only where a
standby gives part of its share back (``idle_gpu_fraction`` < 1 in ``headroom simulate``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from controlplane.autoscaling.core import FleetModel, Sizing
from controlplane.autoscaling.ladder import Rung, RungSpec
from controlplane.autoscaling.sizing import ReplicaShape, warm_gpus
from controlplane.domain.demand import Demand, replicas_for
from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import ModelSpec
from controlplane.domain.placement import WarmGpus


def live_models(specs: Sequence[ModelSpec], pools: Sequence[PoolSpec],
                node_provision_p90_s: float, cached_start_p90_s: float
                ) -> tuple[FleetModel, ...]:
    """One ``FleetModel`` per spec: its best profile point on a product the ``pools`` offer as
    the replica shape (what one replica serves, ``replica_rps``: on a whole GPU shared by MPS
    one process's part of the segment's throughput, as PlanFleet's segment runs one replica per
    process), the price of its GPU share on its product's pool, and the three live rungs."""
    price_by_product = {p.product: p.price_per_gpu_hour for p in pools}
    out = []
    for spec in specs:
        shape = replica_shape(spec, pools)
        price = price_by_product.get(shape.product, 0.0) * shape.gpu_share
        rungs = (RungSpec(Rung.HOT, 0.0, price),
                 RungSpec(Rung.CACHED, cached_start_p90_s, price),
                 RungSpec(Rung.COLD, node_provision_p90_s + spec.cold_start.p90_s, 0.0))
        out.append(FleetModel(spec, shape, rungs, price))
    return tuple(out)


def replica_shape(spec: ModelSpec, pools: Sequence[PoolSpec]) -> ReplicaShape:
    """One replica of ``spec`` as the live loop sizes it: the product, GPU share and
    per-replica throughput (the offline profile) of its best profile point on a product the
    ``pools`` offer (``ModelSpec.best_point``; of its best point when they offer none). The GPU
    budgets and pools' ``max_nodes`` then trim it to what those pools hold: sized on a product
    no pool offers, nothing would be trimmed, and PlanFleet, which cannot place the whole rate
    on the pools that can run it, would leave the model unplaced."""
    point = spec.best_point([p.product for p in pools])
    return ReplicaShape(spec.name, spec.tenant, point.product, point.replica_gpu_share,
                        point.replica_rps)


def cold_wake_s(specs: Sequence[ModelSpec], node_provision_p90_s: float) -> float:
    """Time a new node needs to serve: provisioning p90 + the slowest model's load p90."""
    return node_provision_p90_s + max((s.cold_start.p90_s for s in specs), default=0.0)


def placement_demands(sizing: Sizing, models: Sequence[FleetModel]) -> tuple[Demand, ...]:
    """The demands to ask PlanFleet for: each model's policy demand, capped at the hot replicas
    the core kept (a GPU budget or ``max_replicas`` may have trimmed them), raised to them where
    the core kept more than the demand asks (``min_replicas``, a paused model held)."""
    rps = {m.spec.name: m.shape.per_replica_rps for m in models}
    hot = {r.model: r.hot for r in sizing.requests}

    def rate(d: Demand) -> float:
        kept_rps = hot[d.model] * rps[d.model]
        return kept_rps if hot[d.model] > replicas_for(d.rate_rps, rps[d.model]) else min(
            d.rate_rps, kept_rps)

    return tuple(replace(d, rate_rps=rate(d)) for d in sizing.demands)


def ladder_warm(sizing: Sizing, models: Sequence[FleetModel]) -> tuple[WarmGpus, ...]:
    """The whole warm GPUs per product the ladder keeps (idle and cached rungs), for PlanFleet
    to keep in its plan instead of sizing its own."""
    return warm_gpus(sizing.requests, {m.spec.name: m.shape for m in models})
