"""Batch fleet planning (PlanFleet): segments per model, packed onto GPUs with valid MIG
geometry. Greedy first version: best throughput per compute slice, first-fit decreasing."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.domain import catalog
from scheduler.domain.catalog import GpuProduct
from scheduler.domain.fleet_types import (
    SLO_LATENCY_FRACTION,
    FleetPlan,
    FleetRequest,
    GpuAssignment,
    ModelDemand,
    ProfilePoint,
    Segment,
)
from scheduler.domain.mig import MigInstance, free_start
from scheduler.domain.model import Isolation, SharingMode


@dataclass(frozen=True, slots=True)
class Option:
    """A usable segment shape for a model on a product."""

    model: str
    product: str
    point: ProfilePoint
    slices: int  # compute slices it occupies (whole GPU = all)


def options_for(demand: ModelDemand, products: dict[str, GpuProduct | None]) -> list[Option]:
    limit = SLO_LATENCY_FRACTION * demand.latency_slo_ms
    out: list[Option] = []
    for point in demand.profile:
        if point.throughput_rps <= 0 or point.latency_ms <= 0 or point.latency_ms > limit:
            continue
        for name, known in products.items():
            if catalog.lookup(point.product) is not known or (known is None and
                                                            point.product != name):
                continue
            full = known.compute_slices if known is not None and known.mig_capable else 0
            if point.compute_slices == 0 or point.compute_slices == full:
                out.append(Option(demand.model, name, point, full or 1))
            elif known is not None and known.standard_profile(point.compute_slices) is not None:
                out.append(Option(demand.model, name, point, point.compute_slices))
    return out


def segment_mode(demand: ModelDemand, point: ProfilePoint, whole: bool) -> SharingMode:
    if point.mps_processes > 1 and demand.isolation is not Isolation.STRICT:
        return SharingMode.MPS
    return SharingMode.EXCLUSIVE if whole else SharingMode.MIG


def plan_fleet(request: FleetRequest, revision: int) -> FleetPlan:
    products = {p.product: catalog.lookup(p.product) for p in request.pools}
    prices = {p.product: p.price_per_gpu_hour for p in request.pools}
    limits = {p.product: p.max_gpus for p in request.pools}
    unplaced: list[str] = []
    wanted: list[tuple[Option, ModelDemand]] = []
    for demand in request.models:
        opts = options_for(demand, products)
        if not opts:
            unplaced.append(f"{demand.model}: no_profile_meets_slo")
            continue
        best = max(opts, key=lambda o: (o.point.throughput_rps / o.slices, -prices[o.product]))
        count = math.ceil(demand.rate_rps / best.point.throughput_rps - 1e-9)
        wanted.extend((best, demand) for _ in range(max(count, 1)))
    wanted.sort(key=lambda od: (-od[0].slices, od[1].model))
    gpus: list[tuple[str, str, list[tuple[MigInstance, Segment]]]] = []
    for opt, demand in wanted:
        known = products[opt.product]
        placed = False
        for gid, product, segs in gpus:
            if product != opt.product or known is None or not known.mig_capable:
                continue
            if opt.slices >= known.compute_slices:
                continue
            prof = known.standard_profile(opt.slices)
            if prof is None:
                continue
            start = free_start(known, [m for m, _ in segs], prof)
            if start is None:
                continue
            segs.append((MigInstance(prof, start), _segment(demand, opt, prof.name, start)))
            placed = True
            del gid
            break
        if placed:
            continue
        if sum(1 for g in gpus if g[1] == opt.product) >= limits[opt.product]:
            unplaced.append(f"{demand.model}: pool_max_gpus")
            continue
        gid = f"{opt.product}/{len(gpus)}"
        if known is not None and known.mig_capable and opt.slices < known.compute_slices:
            prof = known.standard_profile(opt.slices)
            assert prof is not None
            start = free_start(known, [], prof) or 0
            gpus.append((gid, opt.product, [(MigInstance(prof, start),
                                             _segment(demand, opt, prof.name, start))]))
        else:
            whole = known.standard_profile(known.compute_slices) if known is not None else None
            name = whole.name if whole is not None else ""
            inst = [(MigInstance(whole, 0), _segment(demand, opt, name, 0))] if whole else []
            gpus.append((gid, opt.product, inst or [(MigInstance(_dummy(), 0),
                                                     _segment(demand, opt, "", 0))]))
    assignments = tuple(GpuAssignment(gid, product, tuple(s for _, s in segs))
                        for gid, product, segs in gpus)
    cost = sum(prices[a.product] for a in assignments)
    return FleetPlan(revision, assignments, (), cost, tuple(dict.fromkeys(unplaced)))


def _dummy() -> catalog.MigProfile:
    return catalog.MigProfile("", 0, 0, (0,), 1, 0)


def _segment(demand: ModelDemand, opt: Option, profile: str, start: int) -> Segment:
    p = opt.point
    whole = opt.slices >= 7 or p.compute_slices == 0
    return Segment(demand.model, segment_mode(demand, p, whole), profile, start, p.compute_slices,
                   p.batch_size, p.mps_processes, p.throughput_rps, p.latency_ms)
