"""Model specifications: what a model needs and how fast it serves on a slice (pure values)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum

from controlplane.domain.cost import DEFAULT_COMPUTE_SLICES
from scheduler.domain.cluster import product_key
from scheduler.domain.validate import tensor_parallel_problem


class Isolation(StrEnum):
    """Sharing allowed: STRICT -> MIG or exclusive, TRUSTED -> MPS, NONE -> time-slicing."""

    STRICT = "strict"
    TRUSTED = "trusted"
    NONE = "none"


class Engine(StrEnum):
    TRITON = "triton"
    VLLM = "vllm"
    SGLANG = "sglang"


class SharingMode(StrEnum):
    EXCLUSIVE = "exclusive"
    MIG = "mig"
    MPS = "mps"
    TIME_SLICING = "time_sliced"


def replicas_per_segment(compute_slices: int, mps_processes: int) -> int:
    """Replicas (pods) that run one segment: a whole GPU shared by MPS runs one per MPS process
    (the device plugin hands each pod one of ``mps_processes`` shares of the GPU); a MIG
    instance runs one, its MPS processes under its own daemon, and a GPU alone runs one."""
    return mps_processes if not compute_slices and mps_processes > 1 else 1


@dataclass(frozen=True, slots=True)
class ProfilePoint:
    """How a model serves on one segment shape (a MIG instance of ``compute_slices`` g, 0 = a
    whole GPU, running ``mps_processes`` MPS processes at ``batch_size``), within its latency SLO.

    ``throughput_rps`` is what the whole segment serves, all its MPS processes together (as
    PlanFleet and ParvaGPU count it). A segment runs ``replicas_per_segment`` replicas, so one
    replica serves ``replica_rps`` and holds ``replica_gpu_share`` of a GPU: every consumer that
    sizes or counts replicas (the live sizing, KEDA, Prometheus capacity, the simulator) reads
    these, never ``throughput_rps`` as a replica's."""

    product: str
    compute_slices: int  # MIG size in g; 0 = whole GPU
    batch_size: int
    mps_processes: int
    throughput_rps: float  # of one segment: all its MPS processes (or GPUs) together
    latency_ms: float
    memory_mib: int  # of each of its GPUs
    #: GPUs one replica spans, all on one node (tensor parallel): whole GPUs without MPS
    gpus: int = 1

    def __post_init__(self) -> None:
        problem = tensor_parallel_problem(self.gpus, self.compute_slices, self.mps_processes)
        if problem is not None:
            raise ValueError(f"profile point on {self.product}: gpus: {problem}")

    @property
    def replicas_per_segment(self) -> int:
        return replicas_per_segment(self.compute_slices, self.mps_processes)

    @property
    def replica_rps(self) -> float:
        """What one replica serves within the SLO: the segment's throughput over its replicas."""
        return self.throughput_rps / self.replicas_per_segment

    @property
    def replica_gpu_share(self) -> float:
        """Fraction of one GPU a replica holds: a MIG instance of g slices is g/7, a whole GPU
        shared by MPS 1/processes (one process), a GPU alone all of it; a replica of several
        GPUs their number (whole GPUs on one node)."""
        if self.gpus > 1:
            return float(self.gpus)
        segment = self.compute_slices / DEFAULT_COMPUTE_SLICES if self.compute_slices else 1.0
        return segment / self.replicas_per_segment


@dataclass(frozen=True, slots=True)
class ColdStart:
    """Model load + warm-up on a node that is already up, as p50/p90 seconds."""

    p50_s: float
    p90_s: float


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    tenant: str
    isolation: Isolation
    engine: Engine
    latency_slo_ms: float
    profile: tuple[ProfilePoint, ...]
    cold_start: ColdStart
    #: replica bounds of its hot target (KEDA's minReplicaCount / maxReplicaCount); None: none
    min_replicas: int | None = None
    max_replicas: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("model name must not be empty")
        if self.min_replicas is not None and self.min_replicas < 0:
            raise ValueError(f"model {self.name!r}: min_replicas must be >= 0")
        if self.max_replicas is not None and self.max_replicas < max(1, self.min_replicas or 0):
            raise ValueError(f"model {self.name!r}: max_replicas must be >= 1 and >= "
                             "min_replicas")
        if self.latency_slo_ms <= 0:
            raise ValueError(f"model {self.name!r}: latency_slo_ms must be > 0")
        if not self.profile:
            raise ValueError(f"model {self.name!r}: profile must list at least one point")
        for point in self.profile:
            if point.throughput_rps <= 0:
                raise ValueError(f"model {self.name!r}: profile throughput_rps must be > 0")

    def allowed_points(self) -> tuple[ProfilePoint, ...]:
        """The profile points its isolation may run: STRICT runs on a MIG instance or a whole
        GPU alone, so not its MPS points (``mps_processes`` > 1), as PlanFleet holds."""
        return allowed_points(self.profile, self.isolation)

    def best_point(self, products: Collection[str] | None = None) -> ProfilePoint:
        """The profile point with the highest throughput that meets 0.45 x the latency SLO
        among the points its isolation may run (a STRICT model with nothing but MPS points,
        which PlanFleet leaves unplaced, is sized by those). With ``products`` (the GPU
        products the node pools offer), among the points on one of them when there are any:
        a point no pool offers is never placed, so sizing by it would size for GPUs the
        fleet cannot have (and trim nothing to the pools that can serve the model)."""
        return best_point(self.profile, self.isolation, self.latency_slo_ms, products)

    def profiled_on(self, products: Collection[str]) -> bool:
        """Whether any point of its profile is on one of ``products`` (a pool's GPU product):
        else no pool can run it, and PlanFleet leaves it unplaced (``no_pool_for_profile``)."""
        offered = {product_key(p) for p in products}
        return any(product_key(p.product) in offered for p in self.profile)


def allowed_points(profile: tuple[ProfilePoint, ...], isolation: Isolation
                   ) -> tuple[ProfilePoint, ...]:
    """``ModelSpec.allowed_points`` of a model with this profile and isolation."""
    if isolation is not Isolation.STRICT:
        return profile
    return tuple(p for p in profile if p.mps_processes <= 1)


def best_point(profile: tuple[ProfilePoint, ...], isolation: Isolation, latency_slo_ms: float,
               products: Collection[str] | None = None) -> ProfilePoint:
    """``ModelSpec.best_point`` of a model with this profile, isolation and SLO (``headroom
    simulate`` sizes a models file's profile by it, as the live loop does)."""
    allowed = allowed_points(profile, isolation) or profile
    if products is not None:
        offered = {product_key(p) for p in products}
        allowed = tuple(p for p in allowed if product_key(p.product) in offered) or allowed
    eligible = [p for p in allowed if p.latency_ms <= 0.45 * latency_slo_ms]
    candidates = eligible or list(allowed)
    # a replica of several GPUs by what each of its GPUs serves (fewer GPUs on a tie): by its
    # whole throughput, the most GPUs a model was profiled on would always win
    return max(candidates, key=lambda p: (p.throughput_rps / p.gpus, -p.compute_slices,
                                          -p.gpus))


#: each model's requests per second per replica, or what gives the current ones at each call
#: (``serve``'s models in use, reloaded without a restart)
RpsByModel = Mapping[str, float] | Callable[[], Mapping[str, float]]


def live_rps(given: RpsByModel) -> Callable[[], Mapping[str, float]]:
    """``given`` as what gives it at each call: itself when callable, else a copy, fixed."""
    if callable(given):
        return given
    fixed = dict(given)
    return lambda: fixed
