"""What PlanFleet can build from: usable segment shapes per model and GPU layouts per pool.

A segment's size is its MIG instance's compute slices, ``WHOLE`` (0) for a whole GPU, or -k for
one of k time-slices of a whole GPU: a layout of k of them time-slices the GPU k ways among
replicas of NONE-isolation models, each of which must fit in 1/k of the GPU's usable memory
(time-slicing does not isolate memory, so the packer keeps it from being oversubscribed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scheduler.domain import catalog
from scheduler.domain.catalog import GpuProduct, MigProfile
from scheduler.domain.cluster import product_key
from scheduler.domain.fleet_types import SLO_LATENCY_FRACTION, GpuPool, ModelDemand, ProfilePoint
from scheduler.domain.mig import valid_size_mixes
from scheduler.domain.sharing import (
    MAX_TIME_SLICES,
    TIME_SLICE_OVERHEAD,
    allows_mps,
    allows_time_slicing,
    mps_client_limit,
)
from scheduler.domain.usable_memory import segment_usable_mib

#: Segment size 0 = a whole GPU without MIG.
WHOLE = 0
#: Time-sliced layouts: k slices of size -k (k = 2 .. MAX_TIME_SLICES).
TIME_SLICED_LAYOUTS = tuple((-k,) * k for k in range(2, MAX_TIME_SLICES + 1))


def time_slices(size: int) -> int:
    """How many time-slices share the GPU of a segment of ``size``; 0 when it is not one."""
    return -size if size < 0 else 0


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
        if size <= WHOLE or self.known is None:
            return None
        return self.known.standard_profile(size)

    def slices(self, size: int) -> float:
        """Compute slices a segment of ``size`` occupies (a whole GPU counts all of them, a
        time-slice its share of them)."""
        if size <= WHOLE:
            whole = self.known.compute_slices if self.known and self.known.mig_capable else 1
            return whole / time_slices(size) if size < WHOLE else whole
        return size

    def can_take(self, sizes: Sequence[int], size: int) -> bool:
        """Whether a GPU holding segments of ``sizes`` has room for one of ``size``."""
        if size == WHOLE:
            return not sizes
        if size < WHOLE:
            return all(s == size for s in sizes) and len(sizes) < time_slices(size)
        return tuple(sorted([*sizes, size], reverse=True)) in self.layouts

    def is_full(self, sizes: Sequence[int]) -> bool:
        """Whether a GPU holding segments of ``sizes`` can take no other segment."""
        if not sizes or sizes[0] > WHOLE:
            return sum(sizes) >= self.slices(WHOLE)
        return sizes[0] == WHOLE or len(sizes) >= time_slices(sizes[0])


@dataclass(frozen=True, slots=True)
class SegmentOption:
    """The best profile point of a model for one (pool, segment size). A replica of several
    GPUs (``point.gpus`` > 1, tensor parallel) is packed as that many whole-GPU segments, its
    parts: ``point`` is then one part's (1/gpus of the replica's throughput), and a model's
    parts of it come in whole replicas (``gpus`` at a time)."""

    model: str
    pool: int  # index into the pool list
    size: int
    point: ProfilePoint
    #: a time-slice's: the whole-GPU point ``point`` was derived from (``time_sliced``)
    measured: ProfilePoint | None = None

    @property
    def gpus(self) -> int:
        """Segments (whole GPUs) one replica of this option takes: 1 but for tensor parallel."""
        return self.point.gpus

    def segments_for(self, rate_rps: float) -> int:
        """The segments of this option that serve ``rate_rps`` (at least one; in whole
        replicas: a multiple of ``gpus``)."""
        segments = max(1, math.ceil(rate_rps / self.point.throughput_rps - 1e-9))
        return -(-segments // self.gpus) * self.gpus


def pool_infos(pools: Sequence[GpuPool]) -> list[PoolInfo]:
    infos: list[PoolInfo] = []
    for pool in pools:
        known = catalog.lookup(pool.product)
        if known is not None and known.mig_capable:
            layouts = (*valid_size_mixes(known), (WHOLE,))
        else:
            layouts = ((WHOLE,),)
        if known is not None:  # time-slicing needs the GPU's memory known
            layouts = (*layouts, *TIME_SLICED_LAYOUTS)
        infos.append(PoolInfo(pool, known, tuple(sorted(set(layouts)))))
    return infos


def options_for(demand: ModelDemand, pools: Sequence[PoolInfo]) -> list[SegmentOption]:
    """Usable shapes of ``demand``: latency <= 0.45 x SLO, no MPS processes unless its
    isolation allows MPS (STRICT does not) and no more than the segment's MPS client limit
    (``mps_client_limit``: it shrinks with a MIG instance), a pool of the point's product, a
    segment size the product supports and enough memory; the best throughput per (pool, size)
    (ties: lower latency, then smaller batch, then fewer processes). A NONE model also gets
    time-slices of a whole GPU (``time_sliced``) where they meet the same rules."""
    limit = SLO_LATENCY_FRACTION * demand.latency_slo_ms
    mps = allows_mps(demand.isolation)
    best: dict[tuple[int, int], SegmentOption] = {}
    keys = [product_key(p.name) for p in pools]
    for point in demand.profile:
        if point.throughput_rps <= 0 or point.latency_ms <= 0:
            continue
        if point.mps_processes > 1 and not mps:
            continue
        key = product_key(point.product)
        shapes = [(point.compute_slices, tensor_part(point))]
        if allows_time_slicing(demand.isolation) and _time_sliceable(point):
            shapes += [(-n, time_sliced(point, n)) for n in range(2, MAX_TIME_SLICES + 1)]
        for k, info in enumerate(pools):
            if keys[k] != key or not holds_replica(info.pool.gpus_per_node, point.gpus):
                continue
            for size, shape in shapes:
                if shape.latency_ms > limit or not _fits(info, size, shape):
                    continue
                if shape.mps_processes > mps_client_limit(info.known, shape.compute_slices):
                    continue
                old = best.get((k, size))
                if old is None or _rank(shape) < _rank(old.point):
                    measured = point if size < WHOLE else None
                    best[(k, size)] = SegmentOption(demand.model, k, size, shape, measured)
    return [best[k] for k in sorted(best)]


def tensor_part(point: ProfilePoint) -> ProfilePoint:
    """One GPU's part of a replica of ``point.gpus`` GPUs: 1/gpus of its throughput (the same
    latency and memory, which are per GPU); ``point`` itself for a replica of one."""
    if point.gpus <= 1:
        return point
    return replace(point, throughput_rps=point.throughput_rps / point.gpus)


def holds_replica(gpus_per_node: int, gpus: int) -> bool:
    """Whether nodes of ``gpus_per_node`` GPUs hold replicas of ``gpus`` GPUs, each on one
    node, with no GPU left over (``gpus`` divides it: a node of 4 GPUs holds two of 2 or one of
    4, but one of 3 would strand a GPU no other replica of 3 can use); a pool that does not
    say how many GPUs its nodes have (0) holds any."""
    return gpus <= 1 or gpus_per_node <= 0 or gpus_per_node % gpus == 0


def time_sliced(point: ProfilePoint, k: int) -> ProfilePoint:
    """What one of ``k`` time-slices of a whole GPU serves for a model measured at ``point``
    on the whole GPU: CUDA gives each context an equal turn (REFERENCE.md §2.1), so with all k
    busy a replica gets 1/k of the GPU's time less the context switches; its throughput
    shrinks and its latency grows by that factor (the worst case: idle neighbours give their
    turns back)."""
    factor = k / (1.0 - TIME_SLICE_OVERHEAD)
    return replace(point, throughput_rps=point.throughput_rps / factor,
                   latency_ms=point.latency_ms * factor)


def _time_sliceable(point: ProfilePoint) -> bool:
    """Whether ``point`` can be time-sliced: one process on a whole GPU whose memory is
    stated (time-slicing does not isolate memory, so it must be known to be kept apart)."""
    return (point.compute_slices == WHOLE and point.mps_processes <= 1 and point.gpus <= 1
            and point.memory_mib > 0)


def _rank(point: ProfilePoint) -> tuple[float, float, int, int]:
    return (-point.throughput_rps, point.latency_ms, point.batch_size, point.mps_processes)


def _fits(info: PoolInfo, size: int, point: ProfilePoint) -> bool:
    """Whether a segment of ``size`` has the point's memory: what CUDA can use of it
    (``usable_memory``), not its profile name's, and a time-slice 1/k of the whole GPU's; a
    whole GPU of undisclosed memory takes any point."""
    if info.known is None:
        return size == WHOLE
    usable = segment_usable_mib(info.known, max(size, WHOLE))
    if usable is None:
        return False
    if size < WHOLE:
        return 0 < point.memory_mib <= usable // time_slices(size)
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
