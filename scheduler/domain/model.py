"""Value types of the online placement domain (frozen, hashable, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

WHOLE_GPU_MILLI = 1000


class SharingMode(StrEnum):
    """How a binding shares its GPU(s)."""

    EXCLUSIVE = "exclusive"
    MIG = "mig"
    MPS = "mps"
    TIME_SLICING = "time_slicing"


class Isolation(StrEnum):
    """What a workload demands from its neighbours on a GPU."""

    UNSPECIFIED = "unspecified"
    STRICT = "strict"  # multi-tenant with SLA: MIG or a whole GPU
    TRUSTED = "trusted"  # may share through MPS
    NONE = "none"  # dev/batch: time-slicing allowed


@dataclass(frozen=True, slots=True)
class HeldInstance:
    """A MIG instance a GPU of the inventory holds now."""

    profile: str  # e.g. "3g.40gb"
    start: int | None  # memory-slice start; None = not known
    model: str = ""  # the model it serves; "" = not known


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One physical GPU of a node as reported by the inventory, with what it holds now when
    the inventory knows it (PlanFleet's prior when the engine has no plan of its own)."""

    index: int
    product: str
    memory_mib: int  # 0 = unknown (the catalog may know it)
    mig_capable: bool
    mig_instances: tuple[HeldInstance, ...] = ()  # MIG on: its instances
    whole_in_use: bool = False  # MIG off, serving as a whole GPU


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node of the inventory."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: tuple[GpuSpec, ...]
    labels: tuple[tuple[str, str], ...] = ()
    pool: str = ""
    unschedulable: bool = False  # cordoned or not ready: bindings kept, nothing new placed


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """A validated Place request.

    ``gpu_milli`` is the per-GPU compute share: 1000 for whole-GPU and multi-GPU workloads (a
    request with ``gpu_milli`` 0 and ``num_gpu`` >= 1 wants whole GPUs), 0 for CPU-only ones.
    """

    workload_id: str
    model: str
    tenant: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_memory_mib: int  # per GPU; 0 = not stated
    gpu_products: frozenset[str]  # empty = any product (canonical keys)
    isolation: Isolation
    #: The products as the caller spelled them, for messages (the keys are lowercased).
    gpu_product_names: tuple[str, ...] = field(default=(), compare=False)
    lease_s: float = 0.0  # > 0: the binding expires this long after its Place or renewal

    @property
    def is_share(self) -> bool:
        """True for a fraction of one GPU."""
        return self.num_gpu == 1 and 0 < self.gpu_milli < WHOLE_GPU_MILLI

    @property
    def is_whole(self) -> bool:
        """True for one or more whole GPUs."""
        return self.num_gpu >= 1 and self.gpu_milli == WHOLE_GPU_MILLI


@dataclass(frozen=True, slots=True)
class Binding:
    """Where a workload runs (node, GPU indices, sharing mode and granted share), what it
    serves (the model and tenant its Place named) and what its Place asked of each GPU (the
    products it allowed, the memory it stated): a re-SyncInventory keeps it only on GPUs that
    still meet that (``Cluster.readopt``)."""

    workload_id: str
    node: str
    gpu_indices: tuple[int, ...]
    mode: SharingMode | None  # None for CPU-only workloads
    mig_profile: str
    gpu_milli: int  # granted per-GPU share (1000 = whole GPU; 0 for CPU-only)
    reason: str
    gpu_memory_mib: int = 0  # per-GPU memory charged
    mig_start: int = -1  # memory-slice start of the MIG instance, -1 when not MIG
    cpu_milli: int = 0
    memory_mib: int = 0
    lease_s: float = 0.0  # 0: bound until released
    lease_expires_at_s: float = 0.0  # Unix seconds the lease runs out (0: never)
    model: str = ""  # the Place request's model and tenant ("" = not known)
    tenant: str = ""
    gpu_products: tuple[str, ...] = ()  # the Place's allowed products (canonical keys; () any)
    gpu_memory_request_mib: int = 0  # per-GPU memory the Place stated (0: not stated)

    @property
    def leased(self) -> bool:
        return self.lease_expires_at_s > 0

    def expired(self, now_s: float) -> bool:
        """True once its lease has run out (never without a lease)."""
        return 0 < self.lease_expires_at_s <= now_s


@dataclass(frozen=True, slots=True)
class ReleasedBinding:
    """A binding a new inventory snapshot released, with why: ``reason`` is one of
    ``RELEASE_REASONS`` (``readoption``), ``detail`` says it in a sentence."""

    binding: Binding
    reason: str
    detail: str
