"""Online placement: pick a node and GPU(s) for one workload, or say why none fits.

Each candidate is scored by how much it raises its node's expected waste (``scoring``); lower
is better, ties go to the lowest node row (then the lowest GPU column), so the same state and
request always give the same answer.

Scoring every node for every request would cost nodes x workload shapes. Requests repeat a
small set of shapes (GPUs, milli, CPU, memory, products, mode) and each placement changes one
node, so the per-node scores of a shape are cached and only nodes that changed since the shape
was last scored are rescored (``ScoreCache``). After a new demand snapshot the cached scores
are refreshed a slice per request (``ROLLING_RESCORE``); whether a node fits never goes stale.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from scheduler.domain.cluster import MODE_CODE, Choice, Cluster, IntArray
from scheduler.domain.errors import Infeasible
from scheduler.domain.fits import (
    Shape,
    idle_fits,
    mig_choice,
    share_fits,
    share_memory_charge,
    why_not,
)
from scheduler.domain.model import WHOLE_GPU_MILLI, SharingMode, WorkloadSpec
from scheduler.domain.scoring import (
    FloatArray,
    NodeCache,
    ScoreTables,
    ScoreWeights,
    shortfall,
    waste_after,
    waste_scalar,
    weighted_waste,
)
from scheduler.domain.sharing import share_mode

#: Shapes whose scores are kept (least recently used ones are dropped first).
MAX_CACHED_SHAPES = 256
#: Up to this many stale nodes are scored with plain Python instead of numpy.
FEW_ROWS = 10
#: Up to this many logged node changes are checked one by one instead of comparing the state
#: of every node (and the best node is then updated from the rescored ones).
FEW_CHANGES = 64
#: Scores remembered per shape by node state id (the memo is emptied past this many).
MAX_MEMO = 1 << 14
#: After a new demand snapshot, each request rescores at most this many nodes whose score is
#: from an older snapshot (besides the nodes that changed), spreading the rescore over requests.
ROLLING_RESCORE = 128


@dataclass(slots=True)
class _Scores:
    """Cached per-node score (inf = does not fit) and GPU column of one shape, with the node
    state ids and the demand-snapshot versions they were computed for; where the cluster's
    change log stood at the last pass (``epoch``, ``seen``), the snapshot version every node
    has been rescored for (-1 while some are older) and the best node (-1: not known)."""

    delta: FloatArray
    col: IntArray
    state: IntArray
    version: IntArray
    epoch: int = -1
    seen: int = 0
    all_version: int = -1
    best: int = -1
    #: Score and column by node state id, for the snapshot ``memo_version``: a node that
    #: returns to contents it had (a Place then its Release) is looked up, not rescored.
    memo: dict[int, tuple[float, int]] = field(default_factory=dict)
    memo_version: int = -1


@dataclass(slots=True)
class ScoreCache:
    """Per-shape node scores; a node's score is stale when its state id changed."""

    entries: OrderedDict[Shape, _Scores] = field(default_factory=OrderedDict)

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
    if not cluster.nodes:
        raise Infeasible("no_inventory", "the inventory has no node (SyncInventory first)")
    mode = None if spec.num_gpu == 0 else (
        SharingMode.EXCLUSIVE if spec.is_whole else share_mode(spec.isolation))
    if mode is SharingMode.EXCLUSIVE and spec.is_share:  # STRICT: a MIG instance if possible
        mig = mig_choice(cluster, spec)
        if mig is not None:
            return mig
    shape = Shape(spec.num_gpu, spec.gpu_milli, spec.cpu_milli, spec.memory_mib,
                  spec.gpu_memory_mib, spec.gpu_products, mode)
    scores = _synced_scores(cluster, shape, scorer)
    node = scores.best
    score = scores.delta.item(node)
    if score == np.inf:
        raise why_not(cluster, spec, shape)
    if spec.num_gpu == 0:
        return Choice(node, (), None, 0, 0, reason="cpu_only", waste_delta=score)
    if mode is SharingMode.EXCLUSIVE:
        count = spec.num_gpu
        idle = idle_fits(cluster, np.array([node]), shape)[0]
        cols = tuple(int(c) for c in np.flatnonzero(idle)[:count])
        reason = "exclusive_gpus" if spec.is_whole else "strict_isolation_exclusive"
        return Choice(node, cols, SharingMode.EXCLUSIVE, WHOLE_GPU_MILLI, 0, reason=reason,
                      waste_delta=score)
    assert mode is not None
    col = scores.col.item(node)
    return Choice(node, (col,), mode, spec.gpu_milli,
                  share_memory_charge(cluster, node, col, spec), reason=f"{mode.value}_share",
                  waste_delta=score)


def _synced_scores(cluster: Cluster, shape: Shape, scorer: Scorer) -> _Scores:
    """The shape's cached scores with every node that changed since the last pass rescored
    (and, after a new demand snapshot, a slice of the nodes scored for an older one), and its
    best node: the lowest score, ties to the lowest row."""
    cache = scorer.scores
    entry = cache.entries.get(shape)
    n = len(cluster.nodes)
    version = scorer.tables.snapshot.version
    if entry is None:
        entry = _Scores(np.full(n, np.inf), np.full(n, -1, dtype=np.int64),
                        np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64))
        cache.entries[shape] = entry
        if len(cache.entries) > MAX_CACHED_SHAPES:
            cache.entries.popitem(last=False)
        stale = np.arange(n)
    else:
        cache.entries.move_to_end(shape)
        stale = _changed_rows(cluster, entry)
        if entry.all_version != version:
            old = np.flatnonzero(entry.version != version)
            if old.size:  # feasibility is still right; refresh the values a slice at a time
                stale = np.union1d(stale, old[:ROLLING_RESCORE])
            if old.size <= ROLLING_RESCORE:
                entry.all_version = version
    entry.epoch, entry.seen = cluster.log_epoch, len(cluster.change_log)
    if stale.size:
        if stale.size <= FEW_ROWS:
            delta, col = _score_few(cluster, stale, shape, scorer, _memo(entry, version))
        else:
            delta, col = _score_rows(cluster, stale, shape, scorer)
        entry.delta[stale] = delta
        entry.col[stale] = col
        entry.state[stale] = cluster.state_id[stale]
        entry.version[stale] = version
        entry.best = _best_after(entry, stale)
    elif entry.best < 0:
        entry.best = int(np.argmin(entry.delta))
    # The best node must be scored for the current snapshot: rescore it until it is.
    while entry.version.item(entry.best) != version and entry.delta.item(entry.best) != np.inf:
        row = entry.best
        entry.delta[row], entry.col[row] = _score_node(cluster, row, shape, scorer)
        entry.state[row] = cluster.state_id.item(row)
        entry.version[row] = version
        entry.best = int(np.argmin(entry.delta))
    return entry


def _memo(entry: _Scores, version: int) -> dict[int, tuple[float, int]]:
    """The entry's memo of scores by state id, emptied for a new snapshot or when full."""
    if entry.memo_version != version or len(entry.memo) >= MAX_MEMO:
        entry.memo.clear()
        entry.memo_version = version
    return entry.memo


def _changed_rows(cluster: Cluster, entry: _Scores) -> IntArray:
    """Rows whose state id differs from the one ``entry`` was scored for: read from the
    cluster's change log when few changes happened since the last pass (no pass over every
    node), else by comparing every row."""
    log = cluster.change_log
    if entry.epoch == cluster.log_epoch and len(log) - entry.seen <= FEW_CHANGES:
        state, now = entry.state, cluster.state_id
        rows = sorted({r for r in log[entry.seen:] if state.item(r) != now.item(r)})
        return np.array(rows, dtype=np.int64)
    return np.flatnonzero(entry.state != cluster.state_id)


def _best_after(entry: _Scores, rescored: IntArray) -> int:
    """The best row once ``rescored`` rows got new scores: the previous best stays best among
    the others, so only the few rescored rows need a look (ties to the lowest row)."""
    best = entry.best
    if best < 0 or rescored.size > FEW_CHANGES or best in rescored.tolist():
        return int(np.argmin(entry.delta))
    delta = entry.delta
    best_score = delta.item(best)
    for row in rescored.tolist():
        score = delta.item(row)
        if score < best_score or (score == best_score and row < best):
            best, best_score = row, score
    return best


def _score_rows(cluster: Cluster, rows: IntArray, shape: Shape,
                scorer: Scorer) -> tuple[FloatArray, IntArray]:
    """Score of placing ``shape`` on each node of ``rows`` (inf where it does not fit) and, for
    shares, the GPU column it would take."""
    delta = np.full(rows.size, np.inf)
    col = np.full(rows.size, -1, dtype=np.int64)
    cpu = cluster.cpu_free[rows] - shape.cpu_milli
    mem = cluster.mem_free[rows] - shape.memory_mib
    host = (cpu >= 0) & (mem >= 0) & cluster.open[rows]
    if not host.all():
        keep = np.flatnonzero(host)
        if keep.size == 0:
            return delta, col
        rows, cpu, mem = rows[keep], cpu[keep], mem[keep]
    else:
        keep = np.arange(rows.size)
    tables, stranding, cache = scorer.tables, scorer.weights.stranding, scorer.cache
    total = cluster.total[rows]
    idle = cluster.idle[rows]
    if shape.mode is SharingMode.EXCLUSIVE:
        fits = np.flatnonzero(idle_fits(cluster, rows, shape).sum(axis=1) >= shape.num_gpu)
        if fits.size < rows.size:
            rows, cpu, mem, keep = rows[fits], cpu[fits], mem[fits], keep[fits]
            total, idle = total[fits], idle[fits]
        taken = WHOLE_GPU_MILLI * shape.num_gpu
        left, idle_left = total - taken, idle - shape.num_gpu
        delta[keep] = waste_after(tables, left, cpu, mem, cache.per_shape[rows], idle_left,
                                  left - WHOLE_GPU_MILLI * idle_left,
                                  stranding) + cache.resid[rows] - cache.waste[rows]
        return delta, col
    if shape.mode is None:
        delta[keep] = waste_after(tables, total, cpu, mem, cache.per_shape[rows], idle,
                                  total - WHOLE_GPU_MILLI * idle,
                                  stranding) + cache.resid[rows] - cache.waste[rows]
        return delta, col
    milli = shape.gpu_milli
    ok = share_fits(cluster, rows, shape)
    free = cluster.free[rows]
    table, gpu_key = tables.delta(milli)
    change = tables.residual_change(milli)
    is_idle = free == WHOLE_GPU_MILLI
    # Two candidates per node: its best partially used GPU (by fragment and residual change)
    # and an idle GPU.
    partial_ok = ok & ~is_idle
    idle_ok = ok & is_idle
    part_col = np.where(partial_ok, gpu_key[free], np.inf).argmin(axis=1)
    picked = np.arange(rows.size)
    has_part = partial_ok[picked, part_col]
    has_idle = idle_ok.any(axis=1)
    left = total - milli
    partial = total - WHOLE_GPU_MILLI * idle
    per_shape = cache.per_shape[rows]
    base, stranded = shortfall(tables, left, cpu, mem, stranding)
    before = cache.waste[rows] - cache.resid[rows]  # the residual is added back by ``change``
    part_free = free[picked, part_col]
    on_part = (weighted_waste(tables, base, left, per_shape + table[part_free], idle,
                              partial - milli) + stranded + change[part_free] - before)
    on_idle = (weighted_waste(tables, base, left, per_shape + table[WHOLE_GPU_MILLI], idle - 1,
                              partial + WHOLE_GPU_MILLI - milli)
               + stranded + change[WHOLE_GPU_MILLI] - before)
    on_part[~has_part] = np.inf
    on_idle[~has_idle] = np.inf
    take_part = on_part <= on_idle
    delta[keep] = np.where(take_part, on_part, on_idle)
    col[keep] = np.where(take_part, part_col, idle_ok.argmax(axis=1))
    return delta, col


def _score_few(cluster: Cluster, rows: IntArray, shape: Shape, scorer: Scorer,
               memo: dict[int, tuple[float, int]]) -> tuple[FloatArray, IntArray]:
    """``_score_rows`` for a few nodes with plain Python numbers (the same score; the sums can
    differ from numpy's in the last bits, which only matters for exact ties), each looked up
    in ``memo`` by the node's state id first and remembered there."""
    scored = []
    state_id = cluster.state_id
    for node in rows.tolist():
        sid = state_id.item(node)
        found = memo.get(sid)
        if found is None:
            found = memo[sid] = _score_node(cluster, node, shape, scorer)
        scored.append(found)
    return (np.array([d for d, _ in scored], dtype=np.float64),
            np.array([c for _, c in scored], dtype=np.int64))


def _score_node(cluster: Cluster, node: int, shape: Shape, scorer: Scorer) -> tuple[float, int]:
    """Score of placing ``shape`` on one node (inf where it does not fit) and, for shares, the
    GPU column it would take (-1 otherwise): ``_score_rows`` for one row, in plain Python."""
    cpu = cluster.cpu_free.item(node) - shape.cpu_milli
    mem = cluster.mem_free.item(node) - shape.memory_mib
    if cpu < 0 or mem < 0 or not cluster.open.item(node):
        return np.inf, -1
    tables, stranding, cache = scorer.tables, scorer.weights.stranding, scorer.cache
    total, idle = cluster.total.item(node), cluster.idle.item(node)
    partial = total - WHOLE_GPU_MILLI * idle
    before = cache.waste.item(node) - cache.resid.item(node)
    frag = cache.per_shape[node]
    if shape.mode is None:
        return waste_scalar(tables, total, cpu, mem, frag.tolist(), idle, partial,
                            stranding) - before, -1
    # Without a product or GPU-memory filter an exclusive shape fits on the node's idle GPUs
    # and a compute share on the GPUs whose share capacity covers it: read them directly.
    plain = not shape.gpu_products and shape.gpu_memory_mib <= 0
    if shape.mode is SharingMode.EXCLUSIVE:
        fitting = idle if plain else int(
            idle_fits(cluster, np.array([node], dtype=np.int64), shape).sum())
        if fitting < shape.num_gpu:
            return np.inf, -1
        left, idle_left = total - WHOLE_GPU_MILLI * shape.num_gpu, idle - shape.num_gpu
        return waste_scalar(tables, left, cpu, mem, frag.tolist(), idle_left,
                            left - WHOLE_GPU_MILLI * idle_left, stranding) - before, -1
    milli = shape.gpu_milli
    if plain:
        ok = [cap >= milli for cap in cluster.share_cap[MODE_CODE[shape.mode]][node].tolist()]
    else:
        ok = share_fits(cluster, np.array([node], dtype=np.int64), shape)[0].tolist()
    table, gpu_key = tables.delta(milli)
    resid = tables.residual_list
    free = cluster.free[node].tolist()
    part_col, idle_col, part_best = -1, -1, np.inf
    for g, (fits, a) in enumerate(zip(ok, free, strict=True)):
        if not fits:
            continue
        if a == WHOLE_GPU_MILLI:
            if idle_col < 0:
                idle_col = g
        elif gpu_key[a] < part_best:
            part_best, part_col = float(gpu_key[a]), g
    left = total - milli
    best, best_col = np.inf, -1
    if part_col >= 0:
        a = free[part_col]
        moved = (frag + table[a]).tolist()
        best = waste_scalar(tables, left, cpu, mem, moved, idle, partial - milli,
                            stranding) + resid[a - milli] - resid[a] - before
        best_col = part_col
    if idle_col >= 0:
        moved = (frag + table[WHOLE_GPU_MILLI]).tolist()
        score = waste_scalar(tables, left, cpu, mem, moved, idle - 1,
                             partial + WHOLE_GPU_MILLI - milli,
                             stranding) + resid[WHOLE_GPU_MILLI - milli] - before
        if score < best:
            best, best_col = score, idle_col
    return best, best_col
