"""Value types of the batch fleet plan (PlanFleet)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.domain.model import Isolation, SharingMode

#: DESIGN.md: a segment may serve a model only if its profiled latency <= 0.45 x the SLO.
SLO_LATENCY_FRACTION = 0.45


@dataclass(frozen=True, slots=True)
class ProfilePoint:
    """Measured behaviour of one segment shape: a MIG size (0 = whole GPU) x batch x MPS, or a
    replica of ``gpus`` whole GPUs on one node (tensor parallel)."""

    product: str
    compute_slices: int
    batch_size: int
    mps_processes: int
    throughput_rps: float  # what one segment of this shape serves (all its GPUs together)
    latency_ms: float
    memory_mib: int = 0  # of each of its GPUs; 0 = not stated
    gpus: int = 1  # GPUs one replica spans on one node (whole GPUs, no MPS when > 1)


@dataclass(frozen=True, slots=True)
class ModelDemand:
    model: str
    tenant: str
    isolation: Isolation
    rate_rps: float
    latency_slo_ms: float
    profile: tuple[ProfilePoint, ...]
    cold_start_s: float = 0.0


@dataclass(frozen=True, slots=True)
class GpuPool:
    product: str
    max_gpus: int
    price_per_gpu_hour: float
    gpus_per_node: int = 1  # 0 = not given (1); > 1: time-sliced kinds priced by node


@dataclass(frozen=True, slots=True)
class FleetRequest:
    models: tuple[ModelDemand, ...]
    pools: tuple[GpuPool, ...]
    #: the warm GPUs the caller decided (the control plane's ladder), kept as they are; None:
    #: PlanFleet sizes its own (``warm_pool.size_warm_pools``)
    warm: tuple[WarmPool, ...] | None = None


@dataclass(frozen=True, slots=True)
class Segment:
    """One model replica on a GPU: a MIG instance (or the whole GPU) with its MPS processes; or
    one GPU of a replica of ``gpus`` whole GPUs (its ``gpu_index``-th: the replica counts once,
    on index 0, and each of its segments has 1/``gpus`` of its throughput)."""

    model: str
    mode: SharingMode
    mig_profile: str
    mig_start: int
    compute_slices: int
    batch_size: int
    mps_processes: int
    throughput_rps: float
    latency_ms: float
    gpus: int = 1
    gpu_index: int = 0


@dataclass(frozen=True, slots=True)
class GpuAssignment:
    gpu_id: str
    product: str
    segments: tuple[Segment, ...]


@dataclass(frozen=True, slots=True)
class WarmPool:
    product: str
    gpus: int
    reason: str


@dataclass(frozen=True, slots=True)
class FleetPlan:
    revision: int
    gpus: tuple[GpuAssignment, ...]
    warm_pools: tuple[WarmPool, ...]
    cost_per_hour: float
    unplaced: tuple[str, ...]  # "model: reason_code (detail)"
