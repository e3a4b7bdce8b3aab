"""Expected-waste scores of candidate placements (lower is better), vectorised over nodes.

The waste of a node is the GPU milli it is not expected to be able to host. For every workload
shape ``t`` the placer has seen (``DemandSnapshot``), the node's free GPU ``G`` splits into

* a **fragment** ``F_t`` the shape cannot use because of GPU granularity (after FGD, ATC'23):
  for a share of ``m`` milli, GPUs with less than ``m`` free; for ``k`` whole GPUs, partially
  used GPUs, or all of ``G`` when fewer than ``k`` GPUs are idle;
* a **stranded** part: the shape needs ``cpu_t`` CPU and ``mem_t`` memory per GPU milli, so the
  node's CPU and memory cover at most ``C / cpu_t`` and ``M / mem_t`` of its GPU.

waste_t = min(G, max(F_t, G - C / cpu_t, G - M / mem_t)), and the node's waste is the
frequency-weighted sum over shapes plus ``stranding`` x the same stranded amount for the
average shape, plus ``residual`` x the milli of its partly used GPUs that the common share
sizes cannot fill (``residual``). A placement is scored by how much it raises the waste of
its node. This steers CPU-heavy and CPU-only work to CPU-rich nodes, keeps CPU on GPU-dense
nodes for GPU work and fills GPU fragments with the shares that close them best.

Scoring a node costs one pass over the shapes; ``policy`` caches the scores per request shape
and rescores only nodes that changed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.domain.demand_model import DemandSnapshot
from scheduler.domain.model import WHOLE_GPU_MILLI
from scheduler.domain.residual import common_sizes, residual_milli

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MILLI_AXIS = np.arange(WHOLE_GPU_MILLI + 1, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class ScoreWeights:
    """Knobs of the online score: ``stranding`` weighs the stranded GPU of the average shape on
    top of the per-shape waste; ``residual`` weighs the milli of partly used GPUs that the share
    sizes with at least ``fill_share`` of the share requests cannot fill."""

    stranding: float = 1.5
    residual: float = 5.0
    fill_share: float = 0.03


class ScoreTables:
    """Lookup tables for one demand snapshot."""

    def __init__(self, snapshot: DemandSnapshot, max_gpus: int,
                 weights: ScoreWeights | None = None) -> None:
        self.snapshot = snapshot
        share = snapshot.is_share
        knobs = weights or ScoreWeights()
        sizes = common_sizes(snapshot.milli, snapshot.weight, share, knobs.fill_share)
        # residual[a]: weighted residual of a GPU with ``a`` milli free (index -1: no GPU).
        self.residual: FloatArray = knobs.residual * residual_milli(sizes).astype(np.float64)
        self.residual_list: list[float] = self.residual.tolist()
        self.share = share
        self.whole_cols = np.flatnonzero(~share)
        self.whole_gpus = snapshot.gpus[~share]
        self.weight = snapshot.weight
        self.inv_cpu = 1.0 / snapshot.cpu_per_milli
        self.inv_mem = 1.0 / snapshot.mem_per_milli
        self.mean_inv_cpu = 1.0 / snapshot.mean_cpu_per_milli
        self.mean_inv_mem = 1.0 / snapshot.mean_mem_per_milli
        # frag[a, t]: share fragment of one GPU with ``a`` milli free for shape t.
        below = share[None, :] & (MILLI_AXIS[:, None] < snapshot.milli[None, :])
        # One extra zero row at the end so that index -1 (a GPU slot without a GPU) reads 0.
        self.frag = np.vstack([np.where(below, MILLI_AXIS[:, None], 0).astype(np.float64),
                               np.zeros((1, share.size))])
        self._deltas: dict[int, tuple[FloatArray, FloatArray]] = {}
        self._changes: dict[int, FloatArray] = {}
        # Python-list copies for the scalar path (a few nodes at a time): per shape its weight,
        # inverse CPU and memory ratios and, for whole-GPU shapes, their GPU count (0: share).
        whole_gpus = dict(zip(self.whole_cols.tolist(), self.whole_gpus.tolist(), strict=True))
        self.scalar = [(w, c, m, int(whole_gpus.get(t, 0))) for t, (w, c, m) in enumerate(zip(
            self.weight.tolist(), self.inv_cpu.tolist(), self.inv_mem.tolist(), strict=True))]

    def delta(self, milli: int) -> tuple[FloatArray, FloatArray]:
        """Change of a GPU when ``milli`` is taken from it, indexed by its free milli before
        (rows below ``milli`` are meaningless): its share fragment per shape, and its weighted
        fragment plus its residual (the key that picks among a node's partly used GPUs)."""
        found = self._deltas.get(milli)
        if found is None:
            after = np.append(np.clip(MILLI_AXIS - milli, 0, None), -1)
            per_shape = self.frag[after] - self.frag
            found = (per_shape, per_shape @ self.weight + self.residual_change(milli))
            self._deltas[milli] = found
        return found

    def residual_change(self, milli: int) -> FloatArray:
        """Change of a GPU's residual when ``milli`` is taken from it, by free milli before."""
        found = self._changes.get(milli)
        if found is None:
            after = np.append(np.clip(MILLI_AXIS - milli, 0, None), -1)
            found = self.residual[after] - self.residual
            self._changes[milli] = found
        return found


class NodeCache:
    """Per node: the share fragment of its GPUs for every shape, their weighted residual and
    the node's exact waste now (residual included). Kept in step with the cluster by
    ``update`` after every change."""

    def __init__(self, tables: ScoreTables, free: IntArray, cpu: IntArray, mem: IntArray,
                 stranding: float) -> None:
        self.shape_key = tables.snapshot.shape_key
        self.stranding = stranding
        self.per_shape = tables.frag[free].sum(axis=1)
        self.resid: FloatArray = tables.residual[free].sum(axis=1)
        self.waste = self._waste(tables, free, cpu, mem, self.per_shape) + self.resid

    def _waste(self, tables: ScoreTables, free: IntArray, cpu: IntArray, mem: IntArray,
               per_shape: FloatArray) -> FloatArray:
        total = np.maximum(free, 0).sum(axis=1)
        idle = (free == WHOLE_GPU_MILLI).sum(axis=1)
        return waste_after(tables, total, cpu, mem, per_shape.copy(), idle,
                           total - WHOLE_GPU_MILLI * idle, self.stranding)

    def reweigh(self, tables: ScoreTables, free: IntArray, cpu: IntArray,
                mem: IntArray) -> None:
        """New weights, ratios and common sizes for the same shapes."""
        self.resid = tables.residual[free].sum(axis=1)
        self.waste = self._waste(tables, free, cpu, mem, self.per_shape) + self.resid

    def placed(self, tables: ScoreTables, node: int, waste_delta: float, shared_gpu_free: int,
               milli: int) -> None:
        """Account a scored placement: the node's waste rose by ``waste_delta``; a share of
        ``milli`` landed on a GPU that had ``shared_gpu_free`` free (-1: no share)."""
        self.waste[node] += waste_delta
        if shared_gpu_free >= 0:
            per_shape, _ = tables.delta(milli)
            self.per_shape[node] += per_shape[shared_gpu_free]
            self.resid[node] += (tables.residual_list[shared_gpu_free - milli]
                                 - tables.residual_list[shared_gpu_free])

    def restore(self, node: int, waste: float, per_shape: FloatArray, resid: float) -> None:
        """Put back a node's values saved before a placement that was then released."""
        self.waste[node] = waste
        self.per_shape[node] = per_shape
        self.resid[node] = resid

    def update(self, tables: ScoreTables, node: int, free: IntArray, cpu: IntArray,
               mem: IntArray) -> None:
        """Recompute one node (``free`` etc. are the cluster's full arrays); its waste with
        plain Python numbers, cheaper than numpy for one node."""
        row = tables.frag[free[node]].sum(axis=0)
        self.per_shape[node] = row
        gpus = free[node].tolist()
        resid = sum(tables.residual_list[f] for f in gpus)
        self.resid[node] = resid
        total = sum(f for f in gpus if f > 0)
        idle = sum(1 for f in gpus if f == WHOLE_GPU_MILLI)
        self.waste[node] = waste_scalar(tables, total, int(cpu[node]), int(mem[node]),
                                        row.tolist(), idle, total - WHOLE_GPU_MILLI * idle,
                                        self.stranding) + resid


def shortfall(tables: ScoreTables, free: IntArray, cpu: IntArray, mem: IntArray,
          stranding: float) -> tuple[FloatArray, FloatArray]:
    """Per shape, the GPU that CPU/memory cannot cover (K x shapes), and the weighted stranded
    GPU of the average shape (K)."""
    cap = np.minimum(cpu[:, None] * tables.inv_cpu, mem[:, None] * tables.inv_mem)
    short: FloatArray = np.subtract(free[:, None], cap, out=cap)
    stranded = free - np.minimum(cpu * tables.mean_inv_cpu, mem * tables.mean_inv_mem)
    np.clip(stranded, 0.0, free, out=stranded)
    stranded *= stranding
    return short, stranded


def weighted_waste(tables: ScoreTables, short: FloatArray, free: IntArray, share_frag: FloatArray,
               idle: IntArray, partial: IntArray) -> FloatArray:
    """Weighted per-shape waste given the shortfall and the share fragments (K x shapes; its
    whole-shape columns are overwritten)."""
    if tables.whole_cols.size:
        enough = idle[:, None] >= tables.whole_gpus
        share_frag[:, tables.whole_cols] = np.where(enough, partial[:, None], free[:, None])
    per_shape = np.maximum(short, share_frag, out=share_frag)
    np.minimum(per_shape, free[:, None], out=per_shape)
    waste: FloatArray = per_shape @ tables.weight
    return waste


def waste_after(tables: ScoreTables, free: IntArray, cpu: IntArray, mem: IntArray,
                share_frag: FloatArray, idle: IntArray, partial: IntArray,
                stranding: float) -> FloatArray:
    """Per-shape waste (module docstring) of K node states; ``share_frag`` (K x shapes) holds
    the share fragments and is used as scratch space."""
    short, stranded = shortfall(tables, free, cpu, mem, stranding)
    return weighted_waste(tables, short, free, share_frag, idle, partial) + stranded


def waste_scalar(tables: ScoreTables, free: int, cpu: int, mem: int, share_frag: list[float],
                 idle: int, partial: int, stranding: float) -> float:
    """``waste_after`` for one node state with plain Python numbers (cheaper than numpy for a
    few nodes). ``share_frag`` holds the share fragments per shape."""
    total = 0.0
    for frag, (w, inv_cpu, inv_mem, gpus) in zip(share_frag, tables.scalar, strict=True):
        if gpus:
            frag = partial if idle >= gpus else free
        cap = cpu * inv_cpu
        alt = mem * inv_mem
        short = free - (alt if alt < cap else cap)
        x = frag if frag > short else short
        total += w * (x if x < free else free)
    cap = cpu * tables.mean_inv_cpu
    alt = mem * tables.mean_inv_mem
    stranded = free - (alt if alt < cap else cap)
    stranded = 0.0 if stranded < 0 else (free if stranded > free else stranded)
    return total + stranding * stranded
