"""Readoption: whether a binding from an earlier inventory (or another engine) still holds on a
new inventory snapshot (``Cluster.readopt``), and else why it is released: one of
``RELEASE_REASONS``, with a sentence naming the node or GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.domain.mig import MigInstance, is_valid_layout
from scheduler.domain.model import Binding, SharingMode

if TYPE_CHECKING:
    from scheduler.domain.cluster import Cluster

#: Why a new inventory snapshot released a binding (``Cluster.readopt``): its node or one of its
#: GPUs is not in the snapshot, the GPU is of a product its Place did not allow, has less memory
#: than it stated, cannot hold its MIG instance, or is held by bindings it cannot share it with.
NODE_GONE = "node_gone"
GPU_GONE = "gpu_gone"
GPU_PRODUCT = "gpu_product_not_allowed"
GPU_MEMORY = "insufficient_gpu_memory"
MIG_PROFILE = "mig_profile_unavailable"
CONFLICT = "gpu_held_by_other_bindings"
RELEASE_REASONS = (NODE_GONE, GPU_GONE, GPU_PRODUCT, GPU_MEMORY, MIG_PROFILE, CONFLICT)


def gpu_release_reason(cluster: Cluster, binding: Binding, node: int, cols: tuple[int, ...],
                       mode_code: int) -> tuple[str, str] | None:
    """None when each of the binding's GPUs (columns ``cols`` of row ``node``, all present)
    still meets its own request (an allowed product, the per-GPU memory it stated, its MIG
    profile) and can take it beside the bindings kept there before it (compute, sharing mode
    ``mode_code``, clients, MIG layout); else (reason, detail) of the first GPU that cannot."""
    for g, index in zip(cols, binding.gpu_indices, strict=True):
        where = f"GPU {index} of node {binding.node}"
        pid = cluster.product_id.item(node, g)
        if binding.gpu_products and cluster.products[pid] not in binding.gpu_products:
            known = cluster.known[pid]
            return GPU_PRODUCT, (f"{where} is now a "
                                 f"{known.name if known else cluster.products[pid]}, not one "
                                 f"of {', '.join(binding.gpu_products)} that the binding "
                                 "allowed")
        asked = binding.gpu_memory_request_mib
        if asked > 0 and not (cluster.gmem_known.item(node, g)
                              and cluster.gmem_total.item(node, g) >= asked):
            has = (f"{cluster.gmem_total.item(node, g)} MiB usable"
                   if cluster.gmem_known.item(node, g)
                   else "memory not known")
            return GPU_MEMORY, f"{where} has {has}, the binding asked for {asked} MiB"
        if binding.mode is SharingMode.MIG and not _mig_profile_on(cluster, node, g, binding):
            return MIG_PROFILE, (f"{where} cannot hold a {binding.mig_profile} MIG "
                                 "instance now")
        if (cluster.free.item(node, g) < binding.gpu_milli
                or cluster.mode.item(node, g) not in (0, mode_code)
                or cluster.clients.item(node, g) >= cluster.client_limits(binding.mode).item(
                    node, g)
                or (binding.mode is SharingMode.MIG and not _mig_fits(cluster, node, g, binding))):
            return CONFLICT, f"{where} is held by other bindings it cannot share it with"
    return None


def _mig_profile_on(cluster: Cluster, node: int, gpu: int, binding: Binding) -> bool:
    """Whether the GPU (MIG-capable) is of a product that has the binding's MIG profile."""
    product = cluster.product_of(node, gpu)
    return (product is not None and cluster.mig_capable.item(node, gpu)
            and product.profile(binding.mig_profile) is not None)


def _mig_fits(cluster: Cluster, node: int, gpu: int, binding: Binding) -> bool:
    """Whether the GPU (MIG-capable, its product having the binding's profile) can hold the
    binding's MIG instance beside the instances it already holds."""
    product = cluster.product_of(node, gpu)
    prof = product.profile(binding.mig_profile) if product is not None else None
    if product is None or prof is None or not cluster.mig_capable.item(node, gpu):
        return False
    return is_valid_layout(product, [*cluster.mig_layout(node, gpu),
                                     MigInstance(prof, binding.mig_start)])
