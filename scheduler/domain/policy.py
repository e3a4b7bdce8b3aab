"""Online placement: pick a node and GPU(s) for one workload, or say why none fits.

Each candidate is scored by how much it raises its node's expected waste (``scoring``); lower
is better, ties go to the lowest node row (then the lowest GPU column), so the same state and
request always give the same answer.

Scoring every node for every request would cost nodes x workload shapes. Requests repeat a
small set of shapes (GPUs, milli, CPU, memory, products, mode) and each placement changes one
node, so the per-node scores of a shape are cached and only nodes that changed since the shape
was last scored are rescored (``ScoreCache``). A new demand snapshot clears the cache.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from scheduler.domain.cluster import MODE_CODE, BoolArray, Choice, Cluster, IntArray
from scheduler.domain.errors import Infeasible
from scheduler.domain.mig import free_start
from scheduler.domain.model import WHOLE_GPU_MILLI, SharingMode, WorkloadSpec
from scheduler.domain.scoring import FloatArray, NodeCache, ScoreTables, ScoreWeights, exact_waste
from scheduler.domain.sharing import MAX_CLIENTS_PER_GPU, mig_profile_for, share_mode

#: Shapes whose scores are kept (least recently used ones are dropped first).
MAX_CACHED_SHAPES = 256


@dataclass(frozen=True, slots=True)
class Shape:
    """Everything about a request that the choice of node depends on."""

    num_gpu: int
    gpu_milli: int
    cpu_milli: int
    memory_mib: int
    gpu_memory_mib: int
    gpu_products: frozenset[str]
    mode: SharingMode | None  # None for CPU-only


@dataclass(slots=True)
class _Scores:
    """Cached per-node score (inf = does not fit) and GPU column of one shape."""

    delta: FloatArray
    col: IntArray
    synced_at: int


@dataclass(slots=True)
class ScoreCache:
    """Per-shape node scores, invalidated per node by a change clock."""

    nodes: int
    clock: int = 0
    changed_at: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    entries: OrderedDict[Shape, _Scores] = field(default_factory=OrderedDict)

    def __post_init__(self) -> None:
        self.changed_at = np.zeros(self.nodes, dtype=np.int64)

    def touch(self, node: int) -> None:
        self.clock += 1
        self.changed_at[node] = self.clock

    def clear(self) -> None:
        self.entries.clear()


@dataclass(slots=True)
class Scorer:
    """Everything a scoring pass reads besides the cluster itself."""

    tables: ScoreTables
    cache: NodeCache
    weights: ScoreWeights
    scores: ScoreCache


def choose(cluster: Cluster, spec: WorkloadSpec, scorer: Scorer) -> Choice:
    """The best feasible placement of ``spec``; raises Infeasible with a reason otherwise."""
    mode = None if spec.num_gpu == 0 else (
        SharingMode.EXCLUSIVE if spec.is_whole else share_mode(spec.isolation))
    if mode is SharingMode.EXCLUSIVE and spec.is_share:  # STRICT: a MIG instance if possible
        mig = _mig(cluster, spec)
        if mig is not None:
            return mig
    shape = Shape(spec.num_gpu, spec.gpu_milli, spec.cpu_milli, spec.memory_mib,
                  spec.gpu_memory_mib, spec.gpu_products, mode)
    scores = _synced_scores(cluster, shape, scorer)
    node = int(np.argmin(scores.delta))
    if not np.isfinite(scores.delta[node]):
        raise _why_not(cluster, spec, shape)
    score = float(scores.delta[node])
    if spec.num_gpu == 0:
        return Choice(node, (), None, 0, 0, reason="cpu_only", waste_delta=score)
    if mode is SharingMode.EXCLUSIVE:
        count = spec.num_gpu
        idle = _idle_ok(cluster, np.array([node]), shape)[0]
        cols = tuple(int(c) for c in np.flatnonzero(idle)[:count])
        reason = "exclusive_gpus" if spec.is_whole else "strict_isolation_exclusive"
        return Choice(node, cols, SharingMode.EXCLUSIVE, WHOLE_GPU_MILLI, 0, reason=reason,
                      waste_delta=score)
    assert mode is not None
    col = int(scores.col[node])
    return Choice(node, (col,), mode, spec.gpu_milli,
                  share_memory_charge(cluster, node, col, spec), reason=f"{mode.value}_share",
                  waste_delta=score)


def _synced_scores(cluster: Cluster, shape: Shape, scorer: Scorer) -> _Scores:
    cache = scorer.scores
    entry = cache.entries.get(shape)
    n = len(cluster.nodes)
    if entry is None:
        entry = _Scores(np.full(n, np.inf), np.full(n, -1, dtype=np.int64), -1)
        cache.entries[shape] = entry
        if len(cache.entries) > MAX_CACHED_SHAPES:
            cache.entries.popitem(last=False)
        stale = np.arange(n)
    else:
        cache.entries.move_to_end(shape)
        stale = np.flatnonzero(cache.changed_at > entry.synced_at)
    if stale.size:
        delta, col = _score_rows(cluster, stale, shape, scorer)
        entry.delta[stale] = delta
        entry.col[stale] = col
    entry.synced_at = cache.clock
    return entry


def _score_rows(cluster: Cluster, rows: IntArray, shape: Shape,
                scorer: Scorer) -> tuple[FloatArray, IntArray]:
    """Score of placing ``shape`` on each node of ``rows`` (inf where it does not fit) and, for
    shares, the GPU column it would take."""
    delta = np.full(rows.size, np.inf)
    col = np.full(rows.size, -1, dtype=np.int64)
    host = np.flatnonzero((cluster.cpu_free[rows] >= shape.cpu_milli)
                          & (cluster.mem_free[rows] >= shape.memory_mib))
    if host.size == 0:
        return delta, col
    nodes = rows[host]
    total = cluster.total[nodes]
    idle = cluster.idle[nodes]
    cpu = cluster.cpu_free[nodes] - shape.cpu_milli
    mem = cluster.mem_free[nodes] - shape.memory_mib
    before = scorer.cache.waste[nodes]
    per_shape = scorer.cache.per_shape[nodes]
    tables, stranding = scorer.tables, scorer.weights.stranding
    if shape.mode is None:
        delta[host] = exact_waste(tables, total, cpu, mem, per_shape, idle,
                                  total - WHOLE_GPU_MILLI * idle, stranding) - before
        return delta, col
    if shape.mode is SharingMode.EXCLUSIVE:
        count = shape.num_gpu
        fits = np.flatnonzero(_idle_ok(cluster, nodes, shape).sum(axis=1) >= count)
        left = total[fits] - WHOLE_GPU_MILLI * count
        idle_left = idle[fits] - count
        delta[host[fits]] = exact_waste(
            tables, left, cpu[fits], mem[fits], per_shape[fits], idle_left,
            left - WHOLE_GPU_MILLI * idle_left, stranding) - before[fits]
        return delta, col
    milli = shape.gpu_milli
    ok = _share_ok(cluster, nodes, shape)
    free = cluster.free[nodes]
    table, mean_delta = tables.delta(milli)
    is_idle = free == WHOLE_GPU_MILLI
    # Two candidates per node: its best partially used GPU (by fragment change) and an idle GPU.
    on_partial = np.where(ok & ~is_idle, mean_delta[free], np.inf)
    part_col = np.argmin(on_partial, axis=1)
    n = nodes.size
    has_part = np.isfinite(on_partial[np.arange(n), part_col])
    idle_ok = ok & is_idle
    has_idle = idle_ok.any(axis=1)
    left = total - milli
    partial = total - WHOLE_GPU_MILLI * idle
    frag_part = per_shape + table[free[np.arange(n), part_col]]
    frag_idle = per_shape + table[WHOLE_GPU_MILLI]
    both = exact_waste(
        tables, np.concatenate((left, left)), np.concatenate((cpu, cpu)),
        np.concatenate((mem, mem)), np.concatenate((frag_part, frag_idle)),
        np.concatenate((idle, idle - 1)),
        np.concatenate((partial - milli, partial + WHOLE_GPU_MILLI - milli)), stranding)
    score_part = np.where(has_part, both[:n] - before, np.inf)
    score_idle = np.where(has_idle, both[n:] - before, np.inf)
    take_part = score_part <= score_idle
    delta[host] = np.where(take_part, score_part, score_idle)
    col[host] = np.where(take_part, part_col, np.argmax(idle_ok, axis=1))
    return delta, col


def _idle_ok(cluster: Cluster, nodes: IntArray, shape: Shape) -> BoolArray:
    """Idle GPUs of ``nodes`` that the (exclusive) shape may take."""
    ok = cluster.free[nodes] == WHOLE_GPU_MILLI
    if shape.gpu_products:
        ok &= cluster.product_mask(shape.gpu_products)[nodes]
    if shape.gpu_memory_mib > 0:
        ok &= cluster.gmem_known[nodes] & (cluster.gmem_total[nodes] >= shape.gpu_memory_mib)
    result: BoolArray = ok
    return result


def _share_ok(cluster: Cluster, nodes: IntArray, shape: Shape) -> BoolArray:
    """GPUs of ``nodes`` that can take the share (mode, client limit, compute, memory)."""
    assert shape.mode is not None
    milli = shape.gpu_milli
    if shape.gpu_memory_mib > 0:  # stated memory: checked against the GPU's free memory
        mode = cluster.mode[nodes]
        ok = ((cluster.free[nodes] >= milli) & cluster.gmem_known[nodes]
              & (cluster.gmem_free[nodes] >= shape.gpu_memory_mib)
              & ((mode == 0) | (mode == MODE_CODE[shape.mode]))
              & (cluster.clients[nodes] < MAX_CLIENTS_PER_GPU))
    else:  # compute share and its proportional memory (Cluster.share_cap)
        ok = cluster.share_cap[MODE_CODE[shape.mode]][nodes] >= milli
    if shape.gpu_products:
        ok &= cluster.product_mask(shape.gpu_products)[nodes]
    result: BoolArray = ok
    return result


def share_memory_charge(cluster: Cluster, node: int, col: int, spec: WorkloadSpec) -> int:
    """GPU memory a share is charged on a GPU: the stated amount, else its compute share of
    the GPU's memory (0 when the GPU's memory is unknown)."""
    if spec.gpu_memory_mib > 0:
        return spec.gpu_memory_mib
    if not cluster.gmem_known[node, col]:
        return 0
    return int(cluster.gmem_total[node, col]) * spec.gpu_milli // WHOLE_GPU_MILLI


def _why_not(cluster: Cluster, spec: WorkloadSpec, shape: Shape) -> Infeasible:
    """The dominant reason why no node fits ``spec``."""
    host = (cluster.cpu_free >= spec.cpu_milli) & (cluster.mem_free >= spec.memory_mib)
    if not host.any():
        return Infeasible("insufficient_cpu_or_memory",
                          f"no node has {spec.cpu_milli} CPU milli and {spec.memory_mib} MiB "
                          "memory free")
    if spec.num_gpu and not cluster.product_mask(spec.gpu_products)[host].any():
        return Infeasible("no_allowed_gpu_product",
                          f"no node with enough CPU and memory has a GPU of "
                          f"{sorted(spec.gpu_products) or 'any product'}")
    where = f"on a node with {spec.cpu_milli} CPU milli and {spec.memory_mib} MiB memory free"
    if shape.mode is SharingMode.EXCLUSIVE:
        count = spec.num_gpu if spec.is_whole else 1
        return Infeasible("no_idle_gpus",
                          f"no {count} idle GPU(s) of the allowed products {where}")
    assert shape.mode is not None
    return Infeasible("no_gpu_share_fits",
                      f"no GPU of the allowed products has {spec.gpu_milli} milli free in "
                      f"{shape.mode.value} mode {where}")


def _mig(cluster: Cluster, spec: WorkloadSpec) -> Choice | None:
    """A MIG instance for a STRICT share on a MIG-capable GPU: pack GPUs already in MIG mode
    first, then the one with the least free compute left; None when no MIG GPU fits."""
    host = (cluster.cpu_free >= spec.cpu_milli) & (cluster.mem_free >= spec.memory_mib)
    cand = (cluster.product_mask(spec.gpu_products) & cluster.mig_capable & host[:, None]
            & ((cluster.mode == 0) | (cluster.mode == MODE_CODE[SharingMode.MIG])))
    best: tuple[tuple[int, int, int, int], Choice] | None = None
    for node, col in zip(*(a.tolist() for a in np.nonzero(cand)), strict=True):
        product = cluster.product_of(node, col)
        if product is None:
            continue
        prof = mig_profile_for(product, spec.gpu_milli, spec.gpu_memory_mib)
        if prof is None:
            continue
        milli = product.mig_milli(prof.compute_slices)
        if cluster.free[node, col] < milli:
            continue
        start = free_start(product, cluster.mig_layout(node, col), prof)
        if start is None:
            continue
        in_mig = int(cluster.mode[node, col] == MODE_CODE[SharingMode.MIG])
        key = (-in_mig, int(cluster.free[node, col]) - milli, node, col)
        if best is None or key < best[0]:
            best = (key, Choice(node, (col,), SharingMode.MIG, milli, prof.memory_mib,
                                prof.name, start, "strict_isolation_mig"))
    return best[1] if best is not None else None
