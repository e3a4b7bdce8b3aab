"""The fleet placement the scheduler chose, as the control plane sees it (pure values)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PlacedSegment:
    """One replica of a model on one GPU slice (a MIG instance, an MPS share or a whole GPU)."""

    model: str
    gpu_id: str
    product: str
    mode: str
    mig_profile: str
    mig_start: int
    compute_slices: int
    throughput_rps: float
    mps_processes: int = 1  # MPS clients of the replica (device-plugin MPS on a whole GPU)


@dataclass(frozen=True, slots=True)
class PlannedSlice:
    """The slice ``replicas`` of a model's replicas are placed on: a MIG instance of
    ``mig_profile`` of a ``product`` GPU, else a whole ``product`` GPU shared as ``mode``
    (exclusive, mps, time_sliced; "sized": the simulator's sizing, no slice named)."""

    product: str
    mode: str
    mig_profile: str
    replicas: int = 1


@dataclass(frozen=True, slots=True)
class WarmGpus:
    product: str
    gpus: int
    reason: str


@dataclass(frozen=True, slots=True)
class FleetPlacement:
    revision: int
    segments: tuple[PlacedSegment, ...]
    gpu_ids_by_product: tuple[tuple[str, tuple[str, ...]], ...]
    warm_pools: tuple[WarmGpus, ...]
    cost_per_hour: float
    unplaced: tuple[str, ...]

    def gpus_for(self, product: str) -> int:
        return sum(len(ids) for p, ids in self.gpu_ids_by_product if p == product)

    def warm_gpus_for(self, product: str) -> int:
        return sum(w.gpus for w in self.warm_pools if w.product == product)

    def replicas_for(self, model: str) -> int:
        return sum(1 for s in self.segments if s.model == model)

    def slices_for(self, model: str) -> tuple[PlannedSlice, ...]:
        """The slices the model's replicas are placed on, with how many on each (sorted)."""
        placed = Counter((s.product, s.mode, s.mig_profile) for s in self.segments
                         if s.model == model)
        return tuple(PlannedSlice(*key, replicas) for key, replicas in sorted(placed.items()))

    def capacity_rps_for(self, model: str) -> float:
        return sum(s.throughput_rps for s in self.segments if s.model == model)
