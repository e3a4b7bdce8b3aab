"""Whether a request fits: the request's shape, which GPUs can take it (whole or shared), a
STRICT share's MIG instance, and the dominant reason when nothing fits. Pure functions of the
cluster arrays; the scoring of the feasible candidates is ``policy``'s."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.domain.cluster import MODE_CODE, BoolArray, Choice, Cluster, IntArray
from scheduler.domain.errors import Infeasible
from scheduler.domain.mig import free_start
from scheduler.domain.model import WHOLE_GPU_MILLI, SharingMode, WorkloadSpec
from scheduler.domain.sharing import mig_memory_mib, mig_profile_for


@dataclass(frozen=True, slots=True)
class Shape:
    """Everything about a request that the choice of node depends on."""

    num_gpu: int
    gpu_milli: int
    cpu_milli: int
    memory_mib: int
    gpu_memory_mib: int
    gpu_products: frozenset[str]
    mode: SharingMode | None  # None for CPU-only



def idle_fits(cluster: Cluster, nodes: IntArray, shape: Shape) -> BoolArray:
    """Idle GPUs of ``nodes`` that the (exclusive) shape may take."""
    ok = cluster.free[nodes] == WHOLE_GPU_MILLI
    if shape.gpu_products:
        ok &= cluster.product_mask(shape.gpu_products)[nodes]
    if shape.gpu_memory_mib > 0:
        ok &= cluster.gmem_known[nodes] & (cluster.gmem_total[nodes] >= shape.gpu_memory_mib)
    result: BoolArray = ok
    return result


def share_fits(cluster: Cluster, nodes: IntArray, shape: Shape) -> BoolArray:
    """GPUs of ``nodes`` that can take the share (mode, client limit, compute, memory)."""
    assert shape.mode is not None
    milli = shape.gpu_milli
    if shape.gpu_memory_mib > 0:  # stated memory: checked against the GPU's free memory
        ok = (_share_room(cluster, nodes, shape) & cluster.gmem_known[nodes]
              & (cluster.gmem_free[nodes] >= shape.gpu_memory_mib))
    else:  # compute share and its proportional memory (Cluster.share_cap)
        ok = cluster.share_cap[MODE_CODE[shape.mode]][nodes] >= milli
    if shape.gpu_products:
        ok &= cluster.product_mask(shape.gpu_products)[nodes]
    result: BoolArray = ok
    return result


def _share_room(cluster: Cluster, nodes: IntArray, shape: Shape) -> BoolArray:
    """GPUs of ``nodes`` whose free compute, sharing mode and clients take the share (its
    memory aside)."""
    assert shape.mode is not None
    mode = cluster.mode[nodes]
    room: BoolArray = ((cluster.free[nodes] >= shape.gpu_milli)
                       & ((mode == 0) | (mode == MODE_CODE[shape.mode]))
                       & (cluster.clients[nodes] < cluster.client_limits(shape.mode)[nodes]))
    return room


def share_memory_charge(cluster: Cluster, node: int, col: int, spec: WorkloadSpec) -> int:
    """GPU memory a share is charged on a GPU: the stated amount, else its compute share of
    the GPU's memory (0 when the GPU's memory is unknown)."""
    if spec.gpu_memory_mib > 0:
        return spec.gpu_memory_mib
    if not cluster.gmem_known[node, col]:
        return 0
    return int(cluster.gmem_total[node, col]) * spec.gpu_milli // WHOLE_GPU_MILLI


def why_not(cluster: Cluster, spec: WorkloadSpec, shape: Shape) -> Infeasible:
    """The dominant reason why no node fits ``spec``."""
    if not cluster.open.any():
        return Infeasible("no_schedulable_node",
                          "every node of the inventory is unschedulable (cordoned or not ready)")
    host = cluster.hosts(spec.cpu_milli, spec.memory_mib)
    if not host.any():
        over = int((cluster.open & ((cluster.cpu_free < 0) | (cluster.mem_free < 0))).sum())
        note = (f" ({over} node(s) overcommitted by the bindings a SyncInventory kept)"
                if over else "")
        return Infeasible("insufficient_cpu_or_memory",
                          f"no node has {spec.cpu_milli} CPU milli and {spec.memory_mib} MiB "
                          f"memory free{note}")
    if spec.num_gpu and not cluster.product_mask(spec.gpu_products)[host].any():
        return Infeasible("no_allowed_gpu_product",
                          f"no node with enough CPU and memory has a GPU of "
                          f"{_product_list(spec)}")
    if spec.num_gpu and spec.gpu_memory_mib > 0:
        allowed = cluster.product_mask(spec.gpu_products)[host]
        big = ~cluster.gmem_known[host] | (cluster.gmem_total[host] >= spec.gpu_memory_mib)
        if not (allowed & big).any():
            return Infeasible("insufficient_gpu_memory",
                              f"no GPU of the allowed products has {spec.gpu_memory_mib} MiB "
                              "of memory")
    where = _host_clause(spec)
    unknown = _unknown_memory_in_the_way(cluster, host, shape)
    if unknown:
        return Infeasible("gpu_memory_unknown",
                          f"{unknown} GPU(s) of the allowed products have room for it{where} "
                          "but report memory_mib 0 (not known) in the inventory snapshot, so "
                          f"gpu_memory_mib {spec.gpu_memory_mib} cannot be checked against "
                          "them; sync their memory_mib, or state gpu_memory_mib 0")
    if shape.mode is SharingMode.EXCLUSIVE:
        count = spec.num_gpu if spec.is_whole else 1
        return Infeasible("no_idle_gpus",
                          f"no {count} idle GPU(s) of the allowed products{where}")
    assert shape.mode is not None
    return Infeasible("no_gpu_share_fits",
                      f"no GPU of the allowed products has {spec.gpu_milli} milli free in "
                      f"{shape.mode.value} mode{where}")


def _host_clause(spec: WorkloadSpec) -> str:
    """What the request needs of the node besides its GPUs, as the tail of a reason's detail:
    " on a node with at least X CPU milli and Y MiB memory free", "" when it needs neither (the
    numbers are the request's, not any node's)."""
    if spec.cpu_milli == 0 and spec.memory_mib == 0:
        return ""
    return (f" on a node with at least {spec.cpu_milli} CPU milli and {spec.memory_mib} MiB "
            "memory free")


def _unknown_memory_in_the_way(cluster: Cluster, host: BoolArray, shape: Shape) -> int:
    """How many GPUs of unknown memory (memory_mib 0 in the snapshot) have room for a request
    stating its GPU memory, when only their unknown memory keeps it from fitting: no node of
    ``host`` fits it on GPUs of known, big enough memory, but one would if those GPUs' memory
    were big enough (``idle_fits`` and ``share_fits`` require the memory known). 0 otherwise."""
    if shape.mode is None or shape.gpu_memory_mib <= 0:
        return 0
    rows = np.flatnonzero(host)
    known = cluster.gmem_known[rows]
    if shape.mode is SharingMode.EXCLUSIVE:
        room = cluster.free[rows] == WHOLE_GPU_MILLI
        enough = known & (cluster.gmem_total[rows] >= shape.gpu_memory_mib)
        count = shape.num_gpu
    else:
        room = _share_room(cluster, rows, shape)
        enough = known & (cluster.gmem_free[rows] >= shape.gpu_memory_mib)
        count = 1
    room &= cluster.product_mask(shape.gpu_products)[rows]
    if ((room & enough).sum(axis=1) >= count).any():
        return 0
    if not ((room & (enough | ~known)).sum(axis=1) >= count).any():
        return 0
    return int((room & ~known).sum())


def _product_list(spec: WorkloadSpec) -> str:
    """The allowed products as the caller named them (canonical keys when it named none)."""
    names = spec.gpu_product_names or tuple(sorted(spec.gpu_products))
    return " or ".join(names) if names else "any product"


def mig_choice(cluster: Cluster, spec: WorkloadSpec) -> Choice | None:
    """A MIG instance for a STRICT share on a MIG-capable GPU: pack GPUs already in MIG mode
    first, then the one with the least free compute left; None when no MIG GPU fits. The
    instances on a GPU never add up to more memory (their profiles') than the GPU reports."""
    host = cluster.hosts(spec.cpu_milli, spec.memory_mib)
    cand = (cluster.product_mask(spec.gpu_products) & cluster.mig_capable & host[:, None]
            & ((cluster.mode == 0) | (cluster.mode == MODE_CODE[SharingMode.MIG])))
    best: tuple[tuple[int, int, int, int], Choice] | None = None
    for node, col in zip(*(a.tolist() for a in np.nonzero(cand)), strict=True):
        product = cluster.product_of(node, col)
        if product is None:
            continue
        total = int(cluster.gmem_total[node, col]) if cluster.gmem_known[node, col] else 0
        prof = mig_profile_for(product, spec.gpu_milli, spec.gpu_memory_mib, total)
        if prof is None:
            continue
        milli = product.mig_milli(prof.compute_slices)
        if cluster.free[node, col] < milli:
            continue
        charge = mig_memory_mib(product, prof, total)
        if cluster.gmem_free.item(node, col) < charge:  # the memory the GPU reports
            continue
        start = free_start(product, cluster.mig_layout(node, col), prof)
        if start is None:
            continue
        in_mig = int(cluster.mode[node, col] == MODE_CODE[SharingMode.MIG])
        key = (-in_mig, int(cluster.free[node, col]) - milli, node, col)
        if best is None or key < best[0]:
            best = (key, Choice(node, (col,), SharingMode.MIG, milli, charge,
                                prof.name, start, "strict_isolation_mig"))
    return best[1] if best is not None else None
