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
average shape. A placement is scored by how much it raises the waste of its node. This steers
CPU-heavy and CPU-only work to CPU-rich nodes, keeps CPU on GPU-dense nodes for GPU work and
fills GPU fragments with the shares that fit them.

Scoring a node costs one pass over the shapes; ``policy`` caches the scores per request shape
and rescores only nodes that changed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.domain.demand_model import DemandSnapshot
from scheduler.domain.model import WHOLE_GPU_MILLI

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MILLI_AXIS = np.arange(WHOLE_GPU_MILLI + 1, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class ScoreWeights:
    """Knobs of the online score: ``stranding`` weighs the stranded GPU of the average shape on
    top of the per-shape waste."""

    stranding: float = 1.5


class ScoreTables:
    """Lookup tables for one demand snapshot."""

    def __init__(self, snapshot: DemandSnapshot, max_gpus: int) -> None:
        self.snapshot = snapshot
        share = snapshot.is_share
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
        # Python-list copies for the scalar path (a few nodes at a time).
        self.scalar = list(zip(self.weight.tolist(), self.inv_cpu.tolist(),
                               self.inv_mem.tolist(), strict=True))
        self.whole_index = {int(c): int(k) for c, k in zip(self.whole_cols.tolist(),
                                                           self.whole_gpus.tolist(),
                                                           strict=True)}

    def delta(self, milli: int) -> tuple[FloatArray, FloatArray]:
        """(per-shape, weighted) change of a GPU's share fragment when ``milli`` is taken from
        it, indexed by its free milli before (rows below ``milli`` are meaningless)."""
        found = self._deltas.get(milli)
        if found is None:
            after = np.append(np.clip(MILLI_AXIS - milli, 0, None), -1)
            per_shape = self.frag[after] - self.frag
            found = (per_shape, per_shape @ self.weight)
            self._deltas[milli] = found
        return found


class NodeCache:
    """Per node: the share fragment of its GPUs for every shape, their weighted mean and the
    node's exact waste now. Kept in step with the cluster by ``update`` after every change."""

    def __init__(self, tables: ScoreTables, free: IntArray, cpu: IntArray, mem: IntArray,
                 stranding: float) -> None:
        self.shape_key = tables.snapshot.shape_key
        self.stranding = stranding
        self.per_shape = tables.frag[free].sum(axis=1)
        self.mean = self.per_shape @ tables.weight
        self.waste = self._waste(tables, free, cpu, mem, self.per_shape)

    def _waste(self, tables: ScoreTables, free: IntArray, cpu: IntArray, mem: IntArray,
               per_shape: FloatArray) -> FloatArray:
        total = np.maximum(free, 0).sum(axis=1)
        idle = (free == WHOLE_GPU_MILLI).sum(axis=1)
        return waste_after(tables, total, cpu, mem, per_shape.copy(), idle,
                           total - WHOLE_GPU_MILLI * idle, self.stranding)

    def reweigh(self, tables: ScoreTables, free: IntArray, cpu: IntArray,
                mem: IntArray) -> None:
        """New weights and ratios for the same shapes."""
        self.mean = self.per_shape @ tables.weight
        self.waste = self._waste(tables, free, cpu, mem, self.per_shape)

    def placed(self, tables: ScoreTables, node: int, waste_delta: float, shared_gpu_free: int,
               milli: int) -> None:
        """Account a scored placement: the node's waste rose by ``waste_delta``; a share of
        ``milli`` landed on a GPU that had ``shared_gpu_free`` free (-1: no share)."""
        self.waste[node] += waste_delta
        if shared_gpu_free >= 0:
            per_shape, mean = tables.delta(milli)
            self.per_shape[node] += per_shape[shared_gpu_free]
            self.mean[node] += mean[shared_gpu_free]

    def restore(self, node: int, waste: float, per_shape: FloatArray, mean: float) -> None:
        """Put back a node's values saved before a placement that was then released."""
        self.waste[node] = waste
        self.per_shape[node] = per_shape
        self.mean[node] = mean

    def update(self, tables: ScoreTables, node: int, free: IntArray, cpu: IntArray,
               mem: IntArray) -> None:
        """Recompute one node (``free`` etc. are the cluster's full arrays); its waste with
        plain Python numbers, cheaper than numpy for one node."""
        row = tables.frag[free[node]].sum(axis=0)
        self.per_shape[node] = row
        self.mean[node] = row @ tables.weight
        gpus = free[node].tolist()
        total = sum(f for f in gpus if f > 0)
        idle = sum(1 for f in gpus if f == WHOLE_GPU_MILLI)
        self.waste[node] = waste_scalar(tables, total, int(cpu[node]), int(mem[node]),
                                        row.tolist(), idle, total - WHOLE_GPU_MILLI * idle,
                                        self.stranding)


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
    whole = tables.whole_index
    total = 0.0
    for t, (w, inv_cpu, inv_mem) in enumerate(tables.scalar):
        frag = share_frag[t]
        if t in whole:
            frag = partial if idle >= whole[t] else free
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
