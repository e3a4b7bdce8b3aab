"""Builders and a plan checker shared by the PlanFleet tests."""

from __future__ import annotations

from collections import defaultdict

from scheduler.domain import catalog
from scheduler.domain.fleet_options import tensor_part, time_sliced
from scheduler.domain.fleet_types import (
    SLO_LATENCY_FRACTION,
    FleetPlan,
    FleetRequest,
    GpuPool,
    ModelDemand,
    ProfilePoint,
    Segment,
)
from scheduler.domain.mig import MigInstance, layout_violations
from scheduler.domain.model import Isolation, SharingMode
from scheduler.domain.sharing import MAX_TIME_SLICES
from scheduler.domain.usable_memory import segment_usable_mib


def points(product: str, per_slice_rps: float, latency_ms: float = 10.0,
           sizes: tuple[int, ...] = (1, 2, 3, 4, 7)) -> tuple[ProfilePoint, ...]:
    return tuple(ProfilePoint(product, g, 8, 1, per_slice_rps * g * (1.1 if g == 7 else 1.0),
                              latency_ms) for g in sizes)


def demand(model: str, rate: float, per_slice: float, product: str = "A100-80GB",
           slo_ms: float = 100.0, isolation: Isolation = Isolation.TRUSTED,
           cold_start_s: float = 0.0, latency_ms: float = 10.0) -> ModelDemand:
    return ModelDemand(model, "t", isolation, rate, slo_ms,
                       points(product, per_slice, latency_ms), cold_start_s)


def request(*models: ModelDemand, pools: tuple[GpuPool, ...] = (
        GpuPool("A100-80GB", 100, 4.0),)) -> FleetRequest:
    return FleetRequest(tuple(models), pools)


def check_plan(plan: FleetPlan, req: FleetRequest) -> dict[str, float]:
    """Assert the contract of DESIGN.md on ``plan``; returns the capacity per model."""
    by_model = {m.model: m for m in req.models}
    capacity: dict[str, float] = defaultdict(float)
    ids = [g.gpu_id for g in plan.gpus]
    assert len(ids) == len(set(ids)), "duplicate gpu_id"
    for gpu in plan.gpus:
        known = catalog.lookup(gpu.product)
        mig = [s for s in gpu.segments if s.compute_slices]
        sliced = [s for s in gpu.segments if s.mode is SharingMode.TIME_SLICING]
        if sliced:
            _check_time_slices(gpu.segments, known, by_model)
        elif len(mig) < len(gpu.segments):
            assert len(gpu.segments) == 1, "a whole-GPU segment must be alone"
        if mig:
            assert known is not None
            layout = []
            for s in mig:
                prof = known.profile(s.mig_profile)
                assert prof is not None and prof.compute_slices == s.compute_slices
                layout.append(MigInstance(prof, s.mig_start))
            assert not layout_violations(known, layout), layout_violations(known, layout)
        for s in gpu.segments:
            demand = by_model[s.model]
            assert s.latency_ms <= SLO_LATENCY_FRACTION * demand.latency_slo_ms
            measured = tuple(tensor_part(p) for p in demand.profile) if not sliced else tuple(
                time_sliced(p, len(sliced)) for p in demand.profile if p.gpus == 1)
            assert any(p.compute_slices == s.compute_slices and p.batch_size == s.batch_size
                       and p.mps_processes == s.mps_processes
                       and p.throughput_rps == s.throughput_rps
                       and p.latency_ms == s.latency_ms for p in measured), s
            if demand.isolation is Isolation.STRICT:  # MIG or a whole GPU, never MPS
                assert s.mps_processes <= 1 and s.mode.value in ("exclusive", "mig"), s
            capacity[s.model] += s.throughput_rps
    _check_tensor_replicas(plan, by_model)
    # the plan's cost is exactly its GPUs' (each holds a segment) and its warm GPUs' prices
    assert all(gpu.segments for gpu in plan.gpus), "a GPU of the plan holds no segment"
    price = {p.product: p.price_per_gpu_hour for p in req.pools}
    counted = sum(price[g.product] for g in plan.gpus) + sum(
        price[w.product] * w.gpus for w in plan.warm_pools)
    assert abs(plan.cost_per_hour - counted) <= 1e-6, (plan.cost_per_hour, counted)
    placed = {u.split(":", 1)[0] for u in plan.unplaced}
    for m in req.models:
        if m.model not in placed and m.rate_rps > 0:
            assert capacity[m.model] >= m.rate_rps - 1e-9, f"{m.model} under capacity"
    return dict(capacity)


def _check_time_slices(segments: tuple[Segment, ...], known: catalog.GpuProduct | None,
                       by_model: dict[str, ModelDemand]) -> None:
    """A time-sliced GPU: only time-slices, 2..MAX_TIME_SLICES of them, of NONE (or
    UNSPECIFIED) models only, each within 1/n of the GPU's usable memory, so that together
    they never oversubscribe it."""
    n = len(segments)
    assert all(s.mode is SharingMode.TIME_SLICING for s in segments), segments
    assert 2 <= n <= MAX_TIME_SLICES, n
    assert known is not None, "time-slicing needs the GPU's memory known"
    usable = segment_usable_mib(known, 0)
    assert usable is not None
    for s in segments:
        assert s.compute_slices == 0 and not s.mig_profile and s.mps_processes <= 1, s
        demand = by_model[s.model]
        assert demand.isolation in (Isolation.NONE, Isolation.UNSPECIFIED), s
        memory = max(p.memory_mib for p in demand.profile if p.batch_size == s.batch_size
                     and p.compute_slices == 0 and p.mps_processes == s.mps_processes)
        assert 0 < memory <= usable // n, (s, memory, usable)


def _check_tensor_replicas(plan: FleetPlan, by_model: dict[str, ModelDemand]) -> None:
    """A replica of n GPUs (tensor parallel): n whole GPUs of one product listed one after
    another, each alone with a segment of the model numbered 0 .. n - 1, of a point of n GPUs
    the model was profiled with."""
    gpus = list(plan.gpus)
    i = 0
    while i < len(gpus):
        first = gpus[i].segments[0] if len(gpus[i].segments) == 1 else None
        if first is None or first.gpus <= 1:
            assert all(s.gpus == 1 and s.gpu_index == 0 for s in gpus[i].segments), gpus[i]
            i += 1
            continue
        n = first.gpus
        assert any(p.gpus == n for p in by_model[first.model].profile), first
        replica = gpus[i:i + n]
        assert len(replica) == n, f"{first.model}: a replica of {n} GPUs lists {len(replica)}"
        for index, gpu in enumerate(replica):
            assert gpu.product == gpus[i].product and len(gpu.segments) == 1, gpu
            seg = gpu.segments[0]
            assert (seg.model, seg.gpus, seg.gpu_index) == (first.model, n, index), gpu
            assert seg.mode is SharingMode.EXCLUSIVE and seg.compute_slices == 0, seg
        i += n
