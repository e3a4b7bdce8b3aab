"""Sharing-mode choice per workload (DESIGN.md "Sharing mode choice").

isolation STRICT -> a MIG instance (on a MIG-capable GPU) or a whole GPU (EXCLUSIVE);
TRUSTED -> MPS on a whole GPU (or on a MIG slice in fleet plans, under the replica's own MPS
daemon, within ``mps_client_limit``); NONE -> time-slicing.
UNSPECIFIED is treated as NONE for shares. PlanFleet time-slices a whole GPU among up to
``MAX_TIME_SLICES`` replicas of NONE models (``fleet_options.time_sliced``). Whole-GPU and
multi-GPU workloads are EXCLUSIVE.
GPU memory is never oversubscribed in any mode: the packer charges memory per GPU.
"""

from __future__ import annotations

from scheduler.domain.catalog import MAX_MPS_CLIENTS, GpuProduct, MigProfile
from scheduler.domain.model import Isolation, SharingMode, WorkloadSpec
from scheduler.domain.usable_memory import profile_usable_mib

#: CUDA MPS serves at most 48 clients per GPU; we cap time-sliced replicas the same way.
MAX_CLIENTS_PER_GPU = MAX_MPS_CLIENTS
#: Time-slices PlanFleet lays out on one GPU at most (the device plugin's ``replicas``): each
#: slice gets 1/k of the GPU's time, so latency grows k-fold and the SLO bounds k long before.
MAX_TIME_SLICES = 8
#: The context-switch cost of time-slicing (DESIGN.md: 8-12 %), charged on throughput.
TIME_SLICE_OVERHEAD = 0.10


def mps_client_limit(product: GpuProduct | None, compute_slices: int) -> int:
    """MPS clients a segment of ``compute_slices`` (0 = a whole GPU) of ``product`` can run:
    the product's ``mps_clients`` on a whole GPU (48; 16 before Volta); on a MIG instance, where
    MPS runs under the replica's own daemon (the device plugin runs MPS only on whole GPUs),
    "the 48-client limit shrinks in proportion to the CI size" (REFERENCE.md §1.1): 48 x its
    compute slices / the GPU's, at least 1."""
    clients = product.mps_clients if product is not None else MAX_MPS_CLIENTS
    if compute_slices <= 0 or product is None or product.compute_slices <= 0:
        return clients
    return max(1, clients * compute_slices // product.compute_slices)


def share_mode(isolation: Isolation) -> SharingMode:
    """The sharing mode of a fractional-GPU workload on a GPU without MIG."""
    if isolation is Isolation.STRICT:
        return SharingMode.EXCLUSIVE
    if isolation is Isolation.TRUSTED:
        return SharingMode.MPS
    return SharingMode.TIME_SLICING


def allows_mps(isolation: Isolation) -> bool:
    """Whether a workload of ``isolation`` may share its GPU or MIG instance through MPS (a
    profile point with ``mps_processes`` > 1): STRICT runs alone on its MIG instance or GPU;
    TRUSTED may, and so may NONE and UNSPECIFIED, which ask less of their neighbours."""
    return isolation is not Isolation.STRICT


def allows_time_slicing(isolation: Isolation) -> bool:
    """Whether a workload of ``isolation`` may share a whole GPU with other models by
    time-slicing (no memory or fault isolation): NONE (dev/batch), and UNSPECIFIED as NONE."""
    return isolation in (Isolation.NONE, Isolation.UNSPECIFIED)


def mig_memory_mib(product: GpuProduct, prof: MigProfile, gpu_total_mib: int = 0) -> int:
    """Memory of an instance of ``prof``: what CUDA can use of it (``usable_memory``, the figure
    PlanFleet plans with), never more than its memory slices' share of ``gpu_total_mib``, the
    memory Place counts on for the GPU (0 = not known). Profile names overstate memory
    (REFERENCE.md §1.3, §11.5), so charging the names would place models that cannot fit."""
    usable = profile_usable_mib(product, prof)
    if gpu_total_mib <= 0 or product.memory_slices <= 0:
        return usable
    return min(usable, gpu_total_mib * prof.memory_slices // product.memory_slices)


def mig_profile_for(product: GpuProduct, gpu_milli: int, gpu_memory_mib: int,
                    gpu_total_mib: int = 0) -> MigProfile | None:
    """The smallest basic MIG profile of ``product`` whose compute share covers ``gpu_milli``
    and whose memory (``mig_memory_mib`` on a GPU reporting ``gpu_total_mib``) covers
    ``gpu_memory_mib``; None when not MIG-capable or nothing fits."""
    best: MigProfile | None = None
    for prof in product.mig_profiles:
        if prof.media_extension:
            continue
        if product.mig_milli(prof.compute_slices) < gpu_milli:
            continue
        if gpu_memory_mib > mig_memory_mib(product, prof, gpu_total_mib):
            continue
        key = (prof.compute_slices, prof.memory_slices)
        if best is None or key < (best.compute_slices, best.memory_slices):
            best = prof
    return best


def wants_mig(spec: WorkloadSpec) -> bool:
    """STRICT fractional workloads prefer a MIG instance where the GPU supports it."""
    return spec.isolation is Isolation.STRICT and spec.is_share
