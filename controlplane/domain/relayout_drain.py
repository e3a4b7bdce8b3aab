"""What a MIG re-layout's drain of a node moves, and what it must not (pure).

The pods a drain must see gone (``PodOnNode``: all but DaemonSet and static pods' mirrors) need
room on the pool's other nodes (``NodeCapacity``); what they lack is the surge the relayout
asks for first (``capacity_shortfall``, ``surge_nodes``).

Pods a drain never evicts (``held_pods``): a pod no controller would recreate
(``PodOnNode.managed``: an owner reference with ``controller: true``), since evicting a bare pod
would delete it for good, so ``kubectl drain`` refuses one without ``--force``; and a pod
annotated ``karpenter.sh/do-not-disrupt: "true"``, which asks every voluntary disruption to
leave it. A relayout is not started on a node that runs one (``held_pods_refusal``), and a drain
that finds one (a pod bound by ``nodeName`` ignores the cordon) evicts nothing and waits naming
it (``unmanaged_pods: ...`` / ``do_not_disrupt: ...``) until someone deletes, moves or
re-annotates it; past the drain deadline it ends aborted, its own cordon undone, with an alert
naming it. Such pods do not count towards the surge: Headroom does not move them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class PodOnNode:
    namespace: str
    name: str
    requests: tuple[tuple[str, int], ...] = ()  # GPU-like extended resources only
    managed: bool = False  # a controller would recreate it (an owner reference with
    # controller: true); a pod not known to have one is never evicted
    do_not_disrupt: bool = False  # annotated karpenter.sh/do-not-disrupt: "true": never evicted

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    name: str
    schedulable: bool  # ready and not cordoned
    free: tuple[tuple[str, int], ...]  # allocatable minus requested, per GPU-like resource


def _listed(keys: Sequence[str]) -> tuple[str, str]:
    return ", ".join(keys), "it" if len(keys) == 1 else "them"


def held_pods(pods: Sequence[PodOnNode]) -> str:
    """Why a drain may evict none of ``pods`` now ("" when it may evict them all): a pod no
    controller would recreate (evicting it would delete it for good), or one that asks not to be
    disrupted (``karpenter.sh/do-not-disrupt: "true"``, which a voluntary drain honours)."""
    reasons = []
    bare = [p.key for p in pods if not p.managed]
    if bare:
        listed, it = _listed(bare)
        reasons.append(f"unmanaged_pods: {listed} (no controller would recreate {it}; delete or "
                       f"move {it}, then the drain goes on)")
    kept = [p.key for p in pods if p.managed and p.do_not_disrupt]
    if kept:
        listed, it = _listed(kept)
        reasons.append(f"do_not_disrupt: {listed} (karpenter.sh/do-not-disrupt=true; remove "
                       f"the annotation or move {it}, then the drain goes on)")
    return "; ".join(reasons)


def held_pods_refusal(node: str, pods: Sequence[PodOnNode]) -> str:
    """Why a relayout of ``node`` must not start ("" when it may): a pod the drain would have
    to evict must not be evicted (``held_pods``). Refused before any surge or cordon, rather
    than cordoning the node and waiting out the drain."""
    held = held_pods(pods)
    return f"node {node}: {held}" if held else ""


def gpu_equivalent(resource: str, quantity: int) -> float:
    """GPUs a request occupies: whole GPUs, or compute slices / 7 for a MIG instance."""
    if resource.startswith(MIG_RESOURCE_PREFIX):
        size = resource[len(MIG_RESOURCE_PREFIX):].split("g.", 1)[0]
        return quantity * (int(size) / 7 if size.isdigit() else 1.0)
    return float(quantity)


def capacity_shortfall(pods: Sequence[PodOnNode], others: Sequence[NodeCapacity]
                       ) -> dict[str, int]:
    """GPU-like resources ``pods`` need that the pool's ``others`` nodes cannot take now
    (managed pods only: an unmanaged pod is not evicted, so it needs no room elsewhere)."""
    need: Counter[str] = Counter()
    for pod in pods:
        if not pod.managed or pod.do_not_disrupt:
            continue
        for resource, quantity in pod.requests:
            need[resource] += quantity
    spare: Counter[str] = Counter()
    for other in others:
        if other.schedulable:
            for resource, quantity in other.free:
                spare[resource] += max(0, quantity)
    return {r: n - spare[r] for r, n in sorted(need.items()) if n > spare[r]}


def surge_nodes(short: dict[str, int], pool_target_nodes: int, gpus_per_node: int) -> int:
    """The pool size that holds the ``short`` resources besides its target: at least one node
    more, and as many as their GPUs fill."""
    gpus = sum(gpu_equivalent(resource, n) for resource, n in short.items())
    return pool_target_nodes + max(1, math.ceil(gpus / max(1, gpus_per_node) - 1e-9))


def format_shortfall(short: dict[str, int]) -> str:
    return ", ".join(f"{r}={n}" for r, n in short.items())
