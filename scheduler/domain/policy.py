"""Online placement policy: pick a node and GPUs for one workload."""

from __future__ import annotations

from scheduler.domain.cluster import Choice, Cluster, infeasible
from scheduler.domain.model import WHOLE_GPU_MILLI, SharingMode, WorkloadSpec


def choose(cluster: Cluster, spec: WorkloadSpec) -> Choice:
    """The best feasible placement of ``spec``; raises Infeasible when there is none."""
    best: Choice | None = None
    best_key: tuple[int, int, int] | None = None
    for node, slot in enumerate(cluster.slots):
        if not cluster.fits_host(spec, node):
            continue
        options: list[Choice]
        if spec.num_gpu == 0:
            options = [Choice(node, (), None, 0, 0, reason="cpu_only")]
        elif spec.is_whole:
            free = cluster.whole_free(spec, node)
            if len(free) < spec.num_gpu:
                continue
            options = [Choice(node, tuple(free[:spec.num_gpu]), SharingMode.EXCLUSIVE,
                              WHOLE_GPU_MILLI, 0, reason="whole_gpu")]
        else:
            options = cluster.share_choices(spec, node)
        node_free = sum(g.free_milli for g in slot.gpus)
        for opt in options:
            used = opt.gpu_milli * len(opt.gpus)
            gpu_left = min(slot.gpus[p].free_milli - opt.gpu_milli for p in opt.gpus) \
                if opt.gpus else 0
            key = (node_free - used, gpu_left, slot.cpu_free - spec.cpu_milli)
            if best_key is None or key < best_key:
                best, best_key = opt, key
    if best is None:
        raise infeasible(spec)
    return best
