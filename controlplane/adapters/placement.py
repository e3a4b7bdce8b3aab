"""Placement clients: the control plane's view of the scheduler, in-process or over gRPC.

Both speak the fixed proto messages (``headroom.v1``); conversion to and from the control plane's
domain values lives here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from controlplane.domain.demand import Demand
from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import Isolation, ModelSpec
from controlplane.domain.observed import ObservedNode, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment, WarmGpus
from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.validate import MAX_POOL_GPUS

_ISOLATION = {Isolation.STRICT: pb.STRICT, Isolation.TRUSTED: pb.TRUSTED, Isolation.NONE: pb.NONE}
_MODE = {pb.EXCLUSIVE: "exclusive", pb.MIG: "mig", pb.MPS: "mps", pb.TIME_SLICING: "time_sliced",
         pb.SHARING_MODE_UNSPECIFIED: "unspecified"}


class FleetPlanner(Protocol):
    """What both the in-process engine and a gRPC stub offer (proto in, proto out)."""

    def sync_inventory(self, request: pb.SyncInventoryRequest) -> pb.SyncInventoryResponse: ...

    def plan_fleet(self, request: pb.PlanFleetRequest) -> pb.FleetPlan: ...


def inventory_request(observed: ObservedState) -> pb.SyncInventoryRequest:
    """Every node with what its GPUs hold now: MIG instances (starts and models are not
    observed), or whole GPUs in use: the node's ``whole_gpus_in_use`` GPUs with MIG off, lowest
    index first (which of them the device plugin gave out is not observed, how many is). The
    engine keeps those layouts where it can when it has no plan of its own (a restart). A
    cordoned or not-ready node is sent ``unschedulable``: the engine keeps the bindings on it
    (its pods may still run, and come back with it) but places nothing new there. A SyncInventory
    is a full snapshot, so a node left out would lose its bindings, and its GPUs would look free
    once it is back."""
    return pb.SyncInventoryRequest(nodes=[
        pb.Node(name=n.name, cpu_milli=n.cpu_milli, memory_mib=n.memory_mib, pool=n.pool,
                labels=dict(n.labels), gpus=_gpus(n), unschedulable=not n.ready or n.cordoned)
        for n in observed.nodes
    ])


def _gpus(node: ObservedNode) -> list[pb.Gpu]:
    whole = [g.index for g in node.gpus if not g.mig_enabled]
    in_use = set(sorted(whole)[:node.whole_gpus_in_use])
    return [pb.Gpu(index=g.index, product=g.product, memory_mib=g.memory_mib,
                   mig_capable=g.mig_capable,
                   mig_instances=[pb.MigInstance(profile=p) for p in g.mig_layout],
                   whole_in_use=g.index in in_use)
            for g in node.gpus]


def plan_request(demands: Sequence[Demand], specs: Sequence[ModelSpec],
                 pools: Sequence[PoolSpec],
                 warm: Sequence[WarmGpus] | None = None) -> pb.PlanFleetRequest:
    """The PlanFleet request; with ``warm`` (even none) the plan keeps exactly those warm GPUs
    and sizes none of its own."""
    by_name = {s.name: s for s in specs}
    models = []
    for demand in demands:
        spec = by_name[demand.model]
        models.append(pb.ModelDemand(
            model=spec.name, tenant=spec.tenant, isolation=_ISOLATION[spec.isolation],
            rate_rps=demand.rate_rps, latency_slo_ms=spec.latency_slo_ms,
            cold_start_s=spec.cold_start.p90_s,
            profile=[pb.ProfilePoint(product=p.product, compute_slices=p.compute_slices,
                                     batch_size=p.batch_size, mps_processes=p.mps_processes,
                                     throughput_rps=p.throughput_rps, latency_ms=p.latency_ms,
                                     memory_mib=p.memory_mib, gpus=p.gpus)
                     for p in spec.profile]))
    request = pb.PlanFleetRequest(models=models, pools=[
        pb.GpuPool(product=p.product, max_gpus=min(p.max_nodes * p.gpus_per_node, MAX_POOL_GPUS),
                   price_per_gpu_hour=p.price_per_gpu_hour, gpus_per_node=p.gpus_per_node)
        for p in pools])
    if warm is not None:
        request.warm.SetInParent()  # set, also with no pools: "keep none warm"
        request.warm.pools.extend(pb.WarmPool(product=w.product, gpus=w.gpus, reason=w.reason)
                                  for w in warm)
    return request


def placement_from(plan: pb.FleetPlan) -> FleetPlacement:
    segments: list[PlacedSegment] = []
    ids: dict[str, list[str]] = {}
    for gpu in plan.gpus:
        if gpu.segments:
            ids.setdefault(gpu.product, []).append(gpu.gpu_id)
        segments.extend(PlacedSegment(
            model=s.model, gpu_id=gpu.gpu_id, product=gpu.product, mode=_MODE.get(s.mode, "?"),
            mig_profile=s.mig_profile, mig_start=s.mig_start, compute_slices=s.compute_slices,
            throughput_rps=s.throughput_rps, mps_processes=max(1, s.mps_processes),
            gpus=max(1, s.gpus), gpu_index=s.gpu_index)
            for s in gpu.segments)
    return FleetPlacement(
        revision=plan.revision, segments=tuple(segments),
        gpu_ids_by_product=tuple((p, tuple(v)) for p, v in sorted(ids.items())),
        warm_pools=tuple(WarmGpus(w.product, w.gpus, w.reason) for w in plan.warm_pools),
        cost_per_hour=plan.cost_per_hour, unplaced=tuple(plan.unplaced))


class LocalPlacementClient:
    """PlacementClient that calls the scheduler in-process (simulator, demo, tests)."""

    def __init__(self, planner: FleetPlanner) -> None:
        self._planner = planner

    def sync_inventory(self, observed: ObservedState) -> None:
        self._planner.sync_inventory(inventory_request(observed))

    def plan_fleet(self, demands: Sequence[Demand], specs: Sequence[ModelSpec],
                   pools: Sequence[PoolSpec],
                   warm: Sequence[WarmGpus] | None = None) -> FleetPlacement:
        return placement_from(self._planner.plan_fleet(plan_request(demands, specs, pools,
                                                                    warm)))
