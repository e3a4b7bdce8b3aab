"""Turn a packing (how many GPUs of which layout, how many segments of which shape) into
concrete GPUs with MIG starts and segments, reusing the previous plan where it can."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scheduler.domain.catalog import MigProfile
from scheduler.domain.cluster import product_key
from scheduler.domain.fleet_options import (
    WHOLE,
    PoolInfo,
    SegmentOption,
    time_sliced,
    time_slices,
)
from scheduler.domain.fleet_types import FleetPlan, GpuAssignment, ProfilePoint, Segment
from scheduler.domain.mig import MigInstance, is_valid_layout, solve_layout
from scheduler.domain.model import Isolation, SharingMode


@dataclass(frozen=True, slots=True)
class PriorGpu:
    """A GPU of the previous plan whose layout is valid on one of the request's pools."""

    gpu_id: str
    pool: int
    sizes: tuple[int, ...]  # descending
    instances: tuple[tuple[int, int, str], ...]  # (size, start, model)
    #: (size, start, model, batch, MPS processes) of each segment; batch and processes 0 = not
    #: known (a prior taken from the inventory)
    segments: tuple[tuple[int, int, str, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Packing:
    """What the solver (or the greedy fallback) decided."""

    layouts: tuple[tuple[int, tuple[int, ...], int], ...]  # (pool, layout, new GPUs)
    kept: tuple[str, ...]  # previous GPU ids kept with their layout
    segments: tuple[tuple[SegmentOption, int], ...]  # (shape, count)
    unplaced: frozenset[str]


def holdings(priors: Sequence[PriorGpu], options: Sequence[SegmentOption]
             ) -> list[dict[int, int]]:
    """Per option: the prior GPUs (index into ``priors``) with segments that are that option
    as it is (same pool, model, size, batch and MPS processes), and how many each has; those
    stay where they are on a GPU kept when the plan wants that many of the option."""
    by_key: dict[tuple[int, str, int], list[tuple[int, int, int]]] = {}
    for k, gpu in enumerate(priors):
        for size, _, model, batch, mps in gpu.segments:
            by_key.setdefault((gpu.pool, model, size), []).append((k, batch, mps))
    out: list[dict[int, int]] = []
    for opt in options:
        counts: dict[int, int] = {}
        for k, batch, mps in by_key.get((opt.pool, opt.model, opt.size), []):
            if _same_shape((batch, mps), opt.point):
                counts[k] = counts.get(k, 0) + 1
        out.append(counts)
    return out


def _same_shape(before: tuple[int, int], now: ProfilePoint | Segment) -> bool:
    """Whether a prior segment's (batch, MPS processes) is ``now``'s (0 = not known: any)."""
    batch, mps = before
    return batch in (0, now.batch_size) and mps in (0, now.mps_processes)


def prior_gpus(previous: FleetPlan | None, pools: Sequence[PoolInfo]) -> list[PriorGpu]:
    """Previous GPUs that could be kept as they are (valid layout on a requested pool)."""
    if previous is None:
        return []
    keys = [product_key(p.name) for p in pools]
    out: list[PriorGpu] = []
    for gpu in sorted(previous.gpus, key=lambda g: g.gpu_id):
        if not gpu.segments or product_key(gpu.product) not in keys:
            continue
        k = keys.index(product_key(gpu.product))
        placed = gpu_instances(gpu.segments)
        inst = tuple(sorted((size, start, s.model) for size, start, s in placed))
        if not _valid(pools[k], [(size, start) for size, start, _ in inst]):
            continue
        sizes = tuple(sorted((size for size, _, _ in inst), reverse=True))
        if sizes not in pools[k].layouts:
            continue
        segments = tuple(sorted((size, start, s.model, s.batch_size, s.mps_processes)
                                for size, start, s in placed))
        out.append(PriorGpu(gpu.gpu_id, k, sizes, inst, segments))
    return out


def gpu_instances(segments: Sequence[Segment]) -> list[tuple[int, int, Segment]]:
    """(size, start, segment) of a GPU's segments: a MIG instance's compute slices and
    memory-slice start, a whole GPU's (0, 0); the n time-slices of a time-sliced GPU are of size
    -n, numbered 0 .. n-1 in the order of their models."""
    sliced = sorted((s for s in segments if s.mode is SharingMode.TIME_SLICING),
                    key=lambda s: s.model)
    out = [(s.compute_slices, s.mig_start, s) for s in segments
           if s.mode is not SharingMode.TIME_SLICING]
    out += [(-len(sliced), i, s) for i, s in enumerate(sliced)]
    return out


def _valid(info: PoolInfo, instances: Sequence[tuple[int, int]]) -> bool:
    if any(size == WHOLE for size, _ in instances):
        return len(instances) == 1 and instances[0][1] == 0
    if any(size < WHOLE for size, _ in instances):
        n = len(instances)  # prior_gpus checks that n time-slices are a layout of the pool
        return sorted(instances) == [(-n, i) for i in range(n)]
    if info.known is None:
        return False
    layout: list[MigInstance] = []
    for size, start in instances:
        prof = info.profile(size)
        if prof is None:
            return False
        layout.append(MigInstance(prof, start))
    return is_valid_layout(info.known, layout)


@dataclass(slots=True)
class _Gpu:
    gpu_id: str
    instances: list[tuple[int, int]]  # (size, start)
    before: dict[tuple[int, int], str]  # (size, start) -> model in the previous plan
    segments: list[Segment]
    was: tuple[int, ...] | None = None  # the previous GPU's layout it takes over, if any

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(sorted((size for size, _ in self.instances), reverse=True))


def lay_out(pools: Sequence[PoolInfo], packing: Packing, priors: Sequence[PriorGpu],
            isolation: dict[str, Isolation]) -> tuple[list[GpuAssignment], int, int]:
    """Concrete GPUs for ``packing``; also returns how many previous GPUs were re-laid out
    and how many segments of the GPUs kept as they were do not stay where they were."""
    out: list[GpuAssignment] = []
    relaid = 0
    moved = 0
    taken_ids = {g.gpu_id for g in priors}
    for k, info in enumerate(pools):
        mine = [g for g in priors if g.pool == k]
        kept = [g for g in mine if g.gpu_id in packing.kept]
        reusable = [g for g in mine if g.gpu_id not in packing.kept]
        gpus = [_Gpu(g.gpu_id, [(s, st) for s, st, _ in g.instances],
                     {(s, st): m for s, st, m in g.instances}, []) for g in kept]
        fresh = 0
        wanted = {(o.model, o.size) for o, _ in packing.segments if o.pool == k}
        for layout, old in _reuse(packing, k, reusable, wanted):
            if old is not None and old.sizes == layout:  # the same layout: nothing to redo
                instances = [(s, st) for s, st, _ in old.instances]
            else:
                instances = list(zip(layout, _starts(info, layout), strict=True))
            if old is not None:
                before = {(s, st): m for s, st, m in old.instances}
                gpu_id = old.gpu_id
            else:
                before = {}
                while f"{info.name}/{fresh}" in taken_ids:
                    fresh += 1
                gpu_id = f"{info.name}/{fresh}"
                taken_ids.add(gpu_id)
            gpus.append(_Gpu(gpu_id, instances, before, [],
                             old.sizes if old is not None else None))
        wanted_here = [(o, c) for o, c in packing.segments if o.pool == k]
        _fill(info, gpus, wanted_here, isolation)
        for gpu in gpus:
            _fewer_time_slices(gpu, {(o.model, o.size): o for o, _ in wanted_here})
        relaid += sum(1 for gpu in gpus if gpu.was is not None and gpu.was != gpu.sizes)
        moved += sum(_moved(prior, gpu.segments) for prior, gpu
                     in zip(kept, gpus[:len(kept)], strict=True))
        out.extend(GpuAssignment(g.gpu_id, info.name, tuple(g.segments))
                   for g in _tensor_replicas(gpus) if g.segments)
    return out, relaid, moved


def _reuse(packing: Packing, pool: int, reusable: Sequence[PriorGpu],
           wanted: set[tuple[str, int]]
           ) -> list[tuple[tuple[int, ...], PriorGpu | None]]:
    """The new GPUs of ``pool`` in ``packing``, each with the previous GPU it takes over
    (None: a GPU the previous plan did not have). A previous GPU with the same layout is
    taken first (the one whose instances hold the most models still wanted at their size),
    then any other, in order."""
    layouts = [layout for p, layout, count in packing.layouts if p == pool
               for _ in range(count)]
    by_sizes: dict[tuple[int, ...], list[PriorGpu]] = {}
    for g in reusable:
        by_sizes.setdefault(g.sizes, []).append(g)
    for group in by_sizes.values():  # most wanted instances first, then in order (stable)
        group.sort(key=lambda g: -sum((m, s) in wanted for s, _, m in g.instances))
    paired: list[PriorGpu | None] = [None] * len(layouts)
    taken: set[str] = set()
    for i, layout in enumerate(layouts):
        same = by_sizes.get(layout)
        if same:
            prior = same.pop(0)
            paired[i] = prior
            taken.add(prior.gpu_id)
    left = iter([g for g in reusable if g.gpu_id not in taken])
    for i in range(len(layouts)):
        if paired[i] is None:
            paired[i] = next(left, None)
    return list(zip(layouts, paired, strict=True))


def churn(packing: Packing, priors: Sequence[PriorGpu]) -> int:
    """Previous GPUs ``packing`` neither keeps nor gives the same layout again (each is
    re-laid out or drained)."""
    out = 0
    for pool in {g.pool for g in priors}:
        left = Counter(g.sizes for g in priors if g.pool == pool and g.gpu_id not in packing.kept)
        new = Counter({layout: count for p, layout, count in packing.layouts if p == pool})
        out += left.total() - (left & new).total()
    return out


def _moved(prior: PriorGpu, segments: Sequence[Segment]) -> int:
    """Segments of ``prior`` that ``segments`` (the kept GPU's new ones) no longer hold."""
    now = {(size, start, s.model): s for size, start, s in gpu_instances(segments)}
    return sum(1 for size, start, model, batch, mps in prior.segments
               if (seg := now.get((size, start, model))) is None
               or not _same_shape((batch, mps), seg))


def _starts(info: PoolInfo, layout: tuple[int, ...]) -> list[int]:
    if layout and layout[0] < WHOLE:  # time-slices: numbered
        return list(range(len(layout)))
    if layout == (WHOLE,) or info.known is None:
        return [0] * len(layout)
    profiles: list[MigProfile] = []
    for size in layout:
        prof = info.profile(size)
        assert prof is not None, f"{size}g is not a {info.name} profile"
        profiles.append(prof)
    starts = solve_layout(info.known, profiles)
    assert starts is not None, f"{layout} has no valid geometry on {info.name}"
    return starts


def _fill(info: PoolInfo, gpus: list[_Gpu], wanted: Sequence[tuple[SegmentOption, int]],
          isolation: dict[str, Isolation]) -> None:
    """Put the wanted segments into the GPUs' instances: an instance keeps the model it had
    in the previous plan when that model still wants a segment of its size."""
    need = {(o.model, o.size): c for o, c in wanted}
    option = {(o.model, o.size): o for o, _ in wanted}
    free: list[tuple[int, int, int]] = []  # (gpu, size, start) still empty
    for g, gpu in enumerate(gpus):
        for size, start in gpu.instances:
            model = gpu.before.get((size, start))
            if model is not None and need.get((model, size), 0) > 0:
                need[(model, size)] -= 1
                gpu.segments.append(_segment(info, option[(model, size)], start, isolation))
            else:
                free.append((g, size, start))
    for key in sorted(need):
        model, size = key
        for slot in [s for s in free if s[1] == size][: need[key]]:
            free.remove(slot)
            gpus[slot[0]].segments.append(_segment(info, option[key], slot[2], isolation))


def _fewer_time_slices(gpu: _Gpu, options: dict[tuple[str, int], SegmentOption]) -> None:
    """A time-sliced GPU whose layout has more slices than it fills is sliced only as many
    ways as it has segments (the device plugin's ``replicas`` is set from them), so each gets
    that larger share of its time; one segment alone has the whole GPU."""
    sizes = [size for size, _ in gpu.instances if size < WHOLE]
    filled = len(gpu.segments)
    if not sizes or not filled or filled >= time_slices(sizes[0]):
        return
    redone: list[Segment] = []
    for seg in gpu.segments:
        measured = options[(seg.model, sizes[0])].measured
        assert measured is not None, "a time-slice's option keeps its whole-GPU point"
        point = measured if filled == 1 else time_sliced(measured, filled)
        mode = SharingMode.EXCLUSIVE if filled == 1 else SharingMode.TIME_SLICING
        redone.append(Segment(seg.model, mode, "", 0, WHOLE, point.batch_size,
                              point.mps_processes, point.throughput_rps, point.latency_ms))
    gpu.segments = redone
    gpu.instances = [(WHOLE, 0)] if filled == 1 else [(-filled, i) for i in range(filled)]


def _segment(info: PoolInfo, opt: SegmentOption, start: int,
             isolation: dict[str, Isolation]) -> Segment:
    point = opt.point
    prof = info.profile(opt.size)
    strict = isolation.get(opt.model) is Isolation.STRICT
    if opt.size < WHOLE:
        mode, start = SharingMode.TIME_SLICING, 0
    elif point.mps_processes > 1 and not strict:
        mode = SharingMode.MPS
    else:
        mode = SharingMode.EXCLUSIVE if opt.size == WHOLE else SharingMode.MIG
    return Segment(opt.model, mode, prof.name if prof is not None else "", start,
                   point.compute_slices, point.batch_size, point.mps_processes,
                   point.throughput_rps, point.latency_ms, point.gpus)


def _tensor_replicas(gpus: list[_Gpu]) -> list[_Gpu]:
    """``gpus`` with each model's parts of replicas of several GPUs grouped into replicas:
    ``gpus`` parts at a time in GPU order (the kept GPUs first), numbered 0 .. gpus - 1 and
    listed one after another where the replica's first GPU is."""
    parts: dict[str, list[int]] = {}  # model -> the GPUs holding its parts, in order
    for i, gpu in enumerate(gpus):
        if len(gpu.segments) == 1 and gpu.segments[0].gpus > 1:
            parts.setdefault(gpu.segments[0].model, []).append(i)
    replica_at: dict[int, list[int]] = {}  # a replica's first GPU -> its GPUs
    for model, members in parts.items():
        size = gpus[members[0]].segments[0].gpus
        assert len(members) % size == 0, f"{model}: {len(members)} GPUs, not whole replicas"
        for first in range(0, len(members), size):
            replica = members[first:first + size]
            replica_at[replica[0]] = replica
            for index, i in enumerate(replica):
                gpus[i].segments = [replace(gpus[i].segments[0], gpu_index=index)]
    order: list[int] = []
    listed: set[int] = set()
    for i in range(len(gpus)):
        if i not in listed:
            order.extend(replica_at.get(i, [i]))
            listed.update(replica_at.get(i, [i]))
    return [gpus[i] for i in order]
