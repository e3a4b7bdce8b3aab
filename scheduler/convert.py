"""Conversion between the generated protobuf messages and domain values (no decisions)."""

from __future__ import annotations

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.cluster import product_key
from scheduler.domain.errors import InvalidArgument
from scheduler.domain.fleet_types import (
    FleetPlan,
    FleetRequest,
    GpuPool,
    ModelDemand,
    ProfilePoint,
    WarmPool,
)
from scheduler.domain.model import (
    WHOLE_GPU_MILLI,
    Binding,
    GpuSpec,
    HeldInstance,
    Isolation,
    NodeSpec,
    SharingMode,
    WorkloadSpec,
)
from scheduler.domain.names import MAX_PRODUCT_CHARS, check_name
from scheduler.domain.routing import DEFAULT_VERSION_MISMATCH_FACTOR, RankedReplica, ReplicaLoad
from scheduler.domain.validate import validate_loads, validate_workload

_ISOLATION: dict[int, Isolation] = {
    pb.ISOLATION_UNSPECIFIED: Isolation.UNSPECIFIED,
    pb.STRICT: Isolation.STRICT,
    pb.TRUSTED: Isolation.TRUSTED,
    pb.NONE: Isolation.NONE,
}
_NO_PRODUCTS: frozenset[str] = frozenset()
_MODE_TO_PB = {
    SharingMode.EXCLUSIVE: pb.EXCLUSIVE,
    SharingMode.MIG: pb.MIG,
    SharingMode.MPS: pb.MPS,
    SharingMode.TIME_SLICING: pb.TIME_SLICING,
}


def isolation_from_pb(value: int, field: str) -> Isolation:
    iso = _ISOLATION.get(int(value))
    if iso is None:
        raise InvalidArgument(field, f"unknown Isolation value {value}")
    return iso


def nodes_from_pb(request: pb.SyncInventoryRequest) -> list[NodeSpec]:
    return [
        NodeSpec(
            name=n.name, cpu_milli=n.cpu_milli, memory_mib=n.memory_mib,
            gpus=tuple(GpuSpec(g.index, g.product, g.memory_mib, g.mig_capable,
                               tuple(HeldInstance(i.profile,
                                                  i.start if i.HasField("start") else None,
                                                  i.model) for i in g.mig_instances),
                               g.whole_in_use) for g in n.gpus),
            labels=tuple(sorted(n.labels.items())), pool=n.pool, unschedulable=n.unschedulable,
        )
        for n in request.nodes
    ]


def workload_from_pb(request: pb.PlaceRequest) -> WorkloadSpec:
    """Validate and normalise a PlaceRequest; raises InvalidArgument naming the field.

    ``gpu_milli`` becomes 1000 for multi-GPU requests and for ``gpu_milli`` 0 with GPUs (whole
    GPUs), stays the share for one GPU, and is 0 for CPU-only requests.
    """
    products = request.gpu_products
    for k, product in enumerate(products):
        if not product.strip():
            raise InvalidArgument(f"gpu_products[{k}]", "must not be empty")
        check_name(f"gpu_products[{k}]", product, MAX_PRODUCT_CHARS)
    num_gpu = request.num_gpu
    raw = request.gpu_milli
    if num_gpu > 1 or (num_gpu >= 1 and raw in (0, WHOLE_GPU_MILLI)):
        milli = WHOLE_GPU_MILLI
    elif num_gpu == 1:
        milli = raw
    else:
        milli = 0
    iso = _ISOLATION.get(request.isolation)
    if iso is None:
        raise InvalidArgument("isolation", f"unknown Isolation value {request.isolation}")
    spec = WorkloadSpec(
        request.workload_id, request.model, request.tenant, request.cpu_milli,
        request.memory_mib, num_gpu, milli, request.gpu_memory_mib,
        frozenset(product_key(p) for p in products) if products else _NO_PRODUCTS, iso,
        tuple(dict.fromkeys(p.strip() for p in products)), request.lease_s)
    validate_workload(spec, raw)
    return spec


def binding_to_pb(binding: Binding) -> pb.Binding:
    return pb.Binding(
        workload_id=binding.workload_id, node=binding.node, gpu_indices=list(binding.gpu_indices),
        mode=_MODE_TO_PB[binding.mode] if binding.mode is not None else pb.SHARING_MODE_UNSPECIFIED,
        mig_profile=binding.mig_profile, gpu_milli=binding.gpu_milli, reason=binding.reason,
        lease_s=binding.lease_s, lease_expires_at_s=binding.lease_expires_at_s,
        model=binding.model, tenant=binding.tenant,
        mig_start=binding.mig_start if binding.mig_start >= 0 else None,
    )


def replica_loads_from_pb(request: pb.RankReplicasRequest) -> tuple[list[ReplicaLoad], float]:
    """The validated replica loads and version mismatch factor of a RankReplicas request;
    raises InvalidArgument naming the field."""
    loads = [ReplicaLoad(
        r.workload_id, r.queue_depth,
        r.kv_cache_usage if r.HasField("kv_cache_usage") else None,
        r.gpu_memory_used_mib if r.HasField("gpu_memory_used_mib") else None,
        r.model_version, r.sleeping, tuple(r.adapters)) for r in request.replicas]
    factor = (request.version_mismatch_factor if request.HasField("version_mismatch_factor")
              else DEFAULT_VERSION_MISMATCH_FACTOR)
    validate_loads(loads, factor, request.model_version)
    return loads, factor


def ranking_to_pb(ranked: list[RankedReplica], unknown: list[str]) -> pb.RankReplicasResponse:
    return pb.RankReplicasResponse(ranked=[pb.RankedReplica(
        workload_id=r.workload_id, score=r.score, node=r.node, memory_headroom=r.memory_headroom,
        queue_factor=r.queue_factor, version_factor=r.version_factor, reason=r.reason,
        mode=_MODE_TO_PB[r.mode] if r.mode is not None else pb.SHARING_MODE_UNSPECIFIED,
        memory_mib=r.memory_mib, can_serve=r.can_serve) for r in ranked], unknown=unknown)


def fleet_request_from_pb(request: pb.PlanFleetRequest) -> FleetRequest:
    models = tuple(
        ModelDemand(
            model=m.model, tenant=m.tenant,
            isolation=isolation_from_pb(m.isolation, f"models[{i}].isolation"),
            rate_rps=m.rate_rps, latency_slo_ms=m.latency_slo_ms,
            profile=tuple(ProfilePoint(p.product, p.compute_slices, p.batch_size, p.mps_processes,
                                       p.throughput_rps, p.latency_ms, p.memory_mib,
                                       p.gpus or 1)
                          for p in m.profile),
            cold_start_s=m.cold_start_s,
        )
        for i, m in enumerate(request.models)
    )
    pools = tuple(GpuPool(p.product, p.max_gpus, p.price_per_gpu_hour, p.gpus_per_node)
                  for p in request.pools)
    warm = tuple(WarmPool(w.product, w.gpus, w.reason) for w in request.warm.pools) \
        if request.HasField("warm") else None
    return FleetRequest(models, pools, warm)


def fleet_plan_to_pb(plan: FleetPlan) -> pb.FleetPlan:
    return pb.FleetPlan(
        revision=plan.revision,
        gpus=[pb.GpuAssignment(
            gpu_id=a.gpu_id, product=a.product,
            segments=[pb.Segment(
                model=s.model, mode=_MODE_TO_PB[s.mode], mig_profile=s.mig_profile,
                mig_start=s.mig_start, compute_slices=s.compute_slices, batch_size=s.batch_size,
                mps_processes=s.mps_processes, throughput_rps=s.throughput_rps,
                latency_ms=s.latency_ms, gpus=s.gpus, gpu_index=s.gpu_index)
                for s in a.segments]) for a in plan.gpus],
        warm_pools=[pb.WarmPool(product=w.product, gpus=w.gpus, reason=w.reason)
                    for w in plan.warm_pools],
        cost_per_hour=plan.cost_per_hour, unplaced=list(plan.unplaced),
    )


def fleet_plan_from_pb(plan: pb.FleetPlan) -> FleetPlan:
    from scheduler.domain.fleet_types import GpuAssignment, Segment

    modes = {v: k for k, v in _MODE_TO_PB.items()}
    return FleetPlan(
        revision=plan.revision,
        gpus=tuple(GpuAssignment(a.gpu_id, a.product, tuple(
            Segment(s.model, modes.get(s.mode, SharingMode.EXCLUSIVE), s.mig_profile,
                    s.mig_start, s.compute_slices, s.batch_size, s.mps_processes,
                    s.throughput_rps, s.latency_ms, max(1, s.gpus), s.gpu_index)
            for s in a.segments)) for a in plan.gpus),
        warm_pools=tuple(WarmPool(w.product, w.gpus, w.reason) for w in plan.warm_pools),
        cost_per_hour=plan.cost_per_hour, unplaced=tuple(plan.unplaced),
    )
