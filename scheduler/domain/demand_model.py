"""What the online placer expects to arrive: a running histogram of workload shapes.

Fragmentation-aware scoring (FGD, ATC'23) needs the distribution of future workloads. We learn
it from the Place requests themselves: for every GPU shape (GPUs x per-GPU milli) how often it
arrives and how much CPU and memory it asks per GPU milli. Counts decay slowly so the model
follows drift.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.domain.model import WHOLE_GPU_MILLI, WorkloadSpec

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Before anything was observed: one whole GPU with 11 CPU cores and 40 GiB (openb medians).
DEFAULT_CPU_PER_GPU_MILLI = 11.0
DEFAULT_MEM_PER_GPU_MILLI = 40.0
#: Counts are multiplied by DECAY_FACTOR every DECAY_EVERY GPU requests.
DECAY_FACTOR = 0.5
DECAY_EVERY = 50_000
#: Only the most frequent shapes are scored against (bounds the cost of a scoring pass).
MAX_SHAPES = 48
#: A new snapshot is published only when the distribution moved this much (L1 distance of
#: the shape frequencies, or relative change of a CPU/memory ratio): every new snapshot makes
#: the placer rescore all nodes.
DRIFT = 0.05


@dataclass(frozen=True, slots=True)
class DemandSnapshot:
    """An immutable view of the learned distribution used by one scoring pass.

    Shapes are sorted by (GPUs, milli); ``shape_key`` changes only when the set of shapes does.
    """

    version: int
    shape_key: tuple[tuple[int, int], ...]
    gpus: IntArray  # per shape: GPUs per workload
    milli: IntArray  # per shape: milli per GPU (1000 = whole GPUs)
    weight: FloatArray  # arrival frequency, sums to 1
    cpu_per_milli: FloatArray  # CPU milli asked per GPU milli
    mem_per_milli: FloatArray  # memory MiB asked per GPU milli
    mean_cpu_per_milli: float  # demand-weighted over all GPU workloads
    mean_mem_per_milli: float

    @property
    def is_share(self) -> npt.NDArray[np.bool_]:
        share: npt.NDArray[np.bool_] = (self.gpus == 1) & (self.milli < WHOLE_GPU_MILLI)
        return share


class DemandModel:
    """Running statistics of workload shapes; the snapshot is rebuilt every few requests."""

    def __init__(self, refresh_every: int = 4096) -> None:
        self.refresh_every = refresh_every
        self._count: dict[tuple[int, int], float] = {}
        self._cpu: dict[tuple[int, int], float] = {}
        self._mem: dict[tuple[int, int], float] = {}
        self._seen = 0
        self._since_refresh = 0
        self._version = 1
        self._snapshot = self._build(self._version)

    def observe(self, spec: WorkloadSpec) -> None:
        """Count one GPU request (placed or not: both are demand). CPU-only ones are ignored."""
        if spec.num_gpu <= 0:
            return
        key = (spec.num_gpu, spec.gpu_milli)
        self._count[key] = self._count.get(key, 0.0) + 1.0
        self._cpu[key] = self._cpu.get(key, 0.0) + spec.cpu_milli
        self._mem[key] = self._mem.get(key, 0.0) + spec.memory_mib
        self._seen += 1
        if self._seen % DECAY_EVERY == 0:
            for table in (self._count, self._cpu, self._mem):
                for k in table:
                    table[k] *= DECAY_FACTOR
        self._since_refresh += 1
        # Early on the picture changes fast: refresh at 1, 2, 4, ... requests, then regularly.
        early = self._seen < self.refresh_every and (self._seen & (self._seen - 1)) == 0
        if early or self._since_refresh >= self.refresh_every:
            self._since_refresh = 0
            proposed = self._build(self._version + 1)
            if early or _drifted(self._snapshot, proposed):
                self._version += 1
                self._snapshot = proposed

    def snapshot(self) -> DemandSnapshot:
        return self._snapshot

    def _build(self, version: int) -> DemandSnapshot:
        keys = sorted(sorted(self._count, key=lambda k: -self._count[k])[:MAX_SHAPES])
        if not keys:
            default = (1, WHOLE_GPU_MILLI)
            return DemandSnapshot(
                version, (default,), np.array([1]), np.array([WHOLE_GPU_MILLI]),
                np.array([1.0]), np.array([DEFAULT_CPU_PER_GPU_MILLI]),
                np.array([DEFAULT_MEM_PER_GPU_MILLI]), DEFAULT_CPU_PER_GPU_MILLI,
                DEFAULT_MEM_PER_GPU_MILLI)
        count = np.array([self._count[k] for k in keys])
        gpus = np.array([k[0] for k in keys], dtype=np.int64)
        milli = np.array([k[1] for k in keys], dtype=np.int64)
        demand = count * gpus * milli
        cpu = np.array([self._cpu[k] for k in keys])
        mem = np.array([self._mem[k] for k in keys])
        all_demand = sum(c * k[0] * k[1] for k, c in self._count.items())
        floor = 1e-6
        return DemandSnapshot(
            version=version, shape_key=tuple(keys), gpus=gpus, milli=milli,
            weight=count / count.sum(),
            cpu_per_milli=np.maximum(cpu / demand, floor),
            mem_per_milli=np.maximum(mem / demand, floor),
            mean_cpu_per_milli=max(sum(self._cpu.values()) / all_demand, floor),
            mean_mem_per_milli=max(sum(self._mem.values()) / all_demand, floor),
        )


def _drifted(current: DemandSnapshot, proposed: DemandSnapshot) -> bool:
    """True when ``proposed`` differs enough from ``current`` to be worth a rescore: shape
    frequencies moved by more than DRIFT (L1, new shapes count with their full weight) or a
    CPU/memory ratio of a shape moved by more than DRIFT (relative)."""
    old = dict(zip(current.shape_key, current.weight.tolist(), strict=True))
    new = dict(zip(proposed.shape_key, proposed.weight.tolist(), strict=True))
    moved = sum(abs(new.get(k, 0.0) - old.get(k, 0.0)) for k in old.keys() | new.keys())
    if moved > DRIFT:
        return True
    if current.shape_key != proposed.shape_key:
        return False
    for before, after in ((current.cpu_per_milli, proposed.cpu_per_milli),
                          (current.mem_per_milli, proposed.mem_per_milli)):
        if float(np.max(np.abs(after / before - 1.0))) > DRIFT:
            return True
    return False
