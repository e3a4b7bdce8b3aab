"""The fleet placement the scheduler chose, as the control plane sees it (pure values)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from controlplane.domain.models import replicas_per_segment


@dataclass(frozen=True, slots=True)
class PlacedSegment:
    """One segment of a model on one GPU: a MIG instance or a whole GPU, alone or shared by its
    ``mps_processes`` MPS processes; ``throughput_rps`` is what the whole segment serves."""

    model: str
    gpu_id: str
    product: str
    mode: str
    mig_profile: str
    mig_start: int
    compute_slices: int
    throughput_rps: float
    mps_processes: int = 1  # MPS processes of the segment (device-plugin MPS on a whole GPU)
    #: a replica of several whole GPUs (tensor parallel) is a segment on each: ``gpus`` of
    #: them, this one its ``gpu_index``-th, with 1/``gpus`` of the replica's throughput
    gpus: int = 1
    gpu_index: int = 0

    @property
    def replicas(self) -> int:
        """Replicas (pods) the segment runs: one per MPS process on a whole GPU shared by MPS
        (each holds one device-plugin share), none on a GPU of a replica of several but its
        first, else one."""
        if self.gpu_index:
            return 0
        if self.mode != "mps":
            return 1
        return replicas_per_segment(self.compute_slices, self.mps_processes)


@dataclass(frozen=True, slots=True)
class PlannedSlice:
    """The slice ``replicas`` of a model's replicas are placed on: a MIG instance of
    ``mig_profile`` of a ``product`` GPU, else a whole ``product`` GPU shared as ``mode``
    (exclusive, mps, time_sliced; "sized": the simulator's sizing, no slice named), or
    ``gpus`` whole GPUs of one node per replica (tensor parallel): its pods ask for that many,
    so replicas of 4 GPUs and of 1 GPU are different slices though both are exclusive."""

    product: str
    mode: str
    mig_profile: str
    replicas: int = 1
    gpus: int = 1


@dataclass(frozen=True, slots=True)
class WarmGpus:
    product: str
    gpus: int
    reason: str


@dataclass(frozen=True, slots=True)
class FleetPlacement:
    """GPUs holding the placed segments (``gpu_ids_by_product``) and whole warm GPUs;
    ``cost_per_hour`` prices exactly those two (PlanFleet's price of the plan it stored, the
    live loop's warm GPUs included: ``controlplane.autoscaling.live``)."""

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

    def unplaced_why(self, model: str) -> str:
        """Why the model is unplaced, as its entry says it (``pool_max_gpus (not enough ...)``:
        the entries read "model: reason_code (detail)", and a model's name may hold a colon
        itself); "" when it is not."""
        return next((u.removeprefix(f"{model}: ") for u in self.unplaced
                     if u.startswith(f"{model}: ")), "")

    def replicas_for(self, model: str) -> int:
        """The model's replicas: one per segment, one per MPS process of an MPS-shared GPU."""
        return sum(s.replicas for s in self.segments if s.model == model)

    def slices_for(self, model: str) -> tuple[PlannedSlice, ...]:
        """The slices the model's replicas are placed on, with how many on each (sorted); a
        replica of several GPUs counts once (its first GPU's segment)."""
        placed: Counter[tuple[str, str, str, int]] = Counter()
        for s in self.segments:
            if s.model == model and s.replicas:
                placed[(s.product, s.mode, s.mig_profile, s.gpus)] += s.replicas
        return tuple(PlannedSlice(product, mode, mig, replicas, gpus)
                     for (product, mode, mig, gpus), replicas in sorted(placed.items()))

    def capacity_rps_for(self, model: str) -> float:
        """What the model's segments serve together (a segment's throughput is all of its
        replicas')."""
        return sum(s.throughput_rps for s in self.segments if s.model == model)

