"""What PlanFleet can build from: usable segment shapes per model and GPU layouts per pool."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from scheduler.domain import catalog
from scheduler.domain.catalog import GpuProduct, MigProfile
from scheduler.domain.cluster import product_key
from scheduler.domain.fleet_types import SLO_LATENCY_FRACTION, GpuPool, ModelDemand, ProfilePoint
from scheduler.domain.mig import valid_size_mixes
from scheduler.domain.sharing import allows_mps, mps_client_limit
from scheduler.domain.usable_memory import segment_usable_mib

#: Segment size 0 = a whole GPU without MIG.
WHOLE = 0


@dataclass(frozen=True, slots=True)
class PoolInfo:
    """A GPU pool of the request with its catalog entry and the layouts its GPUs may take."""

    pool: GpuPool
    known: GpuProduct | None
    layouts: tuple[tuple[int, ...], ...]  # multisets of segment sizes, descending

    @property
    def name(self) -> str:
        return self.pool.product

    def profile(self, size: int) -> MigProfile | None:
        if size == WHOLE or self.known is None:
            return None
        return self.known.standard_profile(size)

    def slices(self, size: int) -> int:
        """Compute slices a segment of ``size`` occupies (a whole GPU counts all of them)."""
        if size == WHOLE:
            return self.known.compute_slices if self.known and self.known.mig_capable else 1
        return size


@dataclass(frozen=True, slots=True)
class SegmentOption:
    """The best profile point of a model for one (pool, segment size)."""

    model: str
    pool: int  # index into the pool list
    size: int
    point: ProfilePoint


def pool_infos(pools: Sequence[GpuPool]) -> list[PoolInfo]:
    infos: list[PoolInfo] = []
    for pool in pools:
        known = catalog.lookup(pool.product)
        if known is not None and known.mig_capable:
            layouts = (*valid_size_mixes(known), (WHOLE,))
        else:
            layouts = ((WHOLE,),)
        infos.append(PoolInfo(pool, known, tuple(sorted(set(layouts)))))
    return infos


def options_for(demand: ModelDemand, pools: Sequence[PoolInfo]) -> list[SegmentOption]:
    """Usable shapes of ``demand``: latency <= 0.45 x SLO, no MPS processes unless its
    isolation allows MPS (STRICT does not) and no more than the segment's MPS client limit
    (``mps_client_limit``: it shrinks with a MIG instance), a pool of the point's product, a
    segment size the product supports and enough memory; the best throughput per (pool, size)
    (ties: lower latency, then smaller batch, then fewer processes)."""
    limit = SLO_LATENCY_FRACTION * demand.latency_slo_ms
    mps = allows_mps(demand.isolation)
    best: dict[tuple[int, int], SegmentOption] = {}
    keys = [product_key(p.name) for p in pools]
    for point in demand.profile:
        if point.throughput_rps <= 0 or point.latency_ms <= 0 or point.latency_ms > limit:
            continue
        if point.mps_processes > 1 and not mps:
            continue
        key = product_key(point.product)
        for k, info in enumerate(pools):
            if keys[k] != key or not _fits(info, point):
                continue
            if point.mps_processes > mps_client_limit(info.known, point.compute_slices):
                continue
            opt = SegmentOption(demand.model, k, point.compute_slices, point)
            old = best.get((k, point.compute_slices))
            if old is None or _rank(point) < _rank(old.point):
                best[(k, point.compute_slices)] = opt
    return [best[k] for k in sorted(best)]


def _rank(point: ProfilePoint) -> tuple[float, float, int, int]:
    return (-point.throughput_rps, point.latency_ms, point.batch_size, point.mps_processes)


def _fits(info: PoolInfo, point: ProfilePoint) -> bool:
    """Whether the segment has the point's memory: what CUDA can use of it (``usable_memory``),
    not its profile name's; a whole GPU of undisclosed memory takes any point."""
    if info.known is None:
        return point.compute_slices == WHOLE
    usable = segment_usable_mib(info.known, point.compute_slices)
    if usable is None:
        return False
    return point.memory_mib <= 0 or usable <= 0 or point.memory_mib <= usable


def memory_shortfall(demand: ModelDemand, pools: Sequence[PoolInfo]) -> str | None:
    """Why ``demand`` has no usable shape when memory is why: the shapes it would have
    (``options_for`` with its points' memory not stated), each with what its point needs and
    what CUDA can use of it; None when it would have none either."""
    needs: dict[ProfilePoint, int] = {}
    for point in demand.profile:
        free = replace(point, memory_mib=0)
        needs[free] = min(needs.get(free, point.memory_mib), point.memory_mib)
    shapes = options_for(replace(demand, profile=tuple(needs)), pools)
    if not shapes:
        return None
    parts = []
    for opt in shapes[:3]:
        info = pools[opt.pool]
        prof = info.profile(opt.size)
        usable = segment_usable_mib(info.known, opt.size) if info.known is not None else None
        shape = f"a {prof.name} of {info.name}" if prof is not None else f"a whole {info.name}"
        parts.append(f"{needs[opt.point]} MiB on {shape} ({usable} MiB usable)")
    more = f"; {len(shapes) - 3} more" if len(shapes) > 3 else ""
    return "; ".join(parts) + more
