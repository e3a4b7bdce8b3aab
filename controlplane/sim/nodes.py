"""The simulated cluster's values: nodes (with their MIG layout, sharing and re-layout), replicas,
and what a replica holds of a GPU."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime

from controlplane.domain.deletion_cost import ReplicaPod, deletion_costs
from controlplane.domain.mig_layout import NodeMigLayout
from controlplane.domain.mig_relayout import MigRelayout
from controlplane.domain.models import ModelSpec, ProfilePoint
from controlplane.domain.node_configs import EXCLUSIVE
from controlplane.domain.sharing_config import SharingLayout
from scheduler.domain.catalog import lookup
from scheduler.domain.usable_memory import profile_usable_mib

GPU_FACTS: dict[str, tuple[int, bool]] = {  # product -> (memory MiB, MIG-capable)
    "A100-80GB": (81920, True), "A100-40GB": (40960, True), "H100-80GB": (81559, True),
    "H200-141GB": (143771, True), "L4": (23034, False), "L40S": (46068, False),
    "T4": (15360, False),
}


@dataclass(slots=True)
class Relayout:
    """A node's re-layout: waiting for its surge node, then cordoned while its replicas move
    (``draining``), then laid out until ``done_at``. ``record`` is what the re-layout store
    holds of it (its phase, surge floor and wait reason), as the Kubernetes relayout's."""

    target: NodeMigLayout
    surge_node: str | None  # replacement capacity asked first (a busy node's)
    record: MigRelayout
    draining: bool = False  # cordoned: its replicas move, each once its successor is ready
    done_at: datetime | None = None  # set when the node is drained

    @property
    def cordoned(self) -> bool:
        return self.draining or self.done_at is not None


@dataclass(slots=True)
class SimNode:
    name: str
    pool: str
    created_at: datetime
    ready_at: datetime
    warm_models: set[str] = field(default_factory=set)
    mig: NodeMigLayout | None = None  # None: MIG off
    sharing: SharingLayout = EXCLUSIVE
    relayout: Relayout | None = None
    # leaving the pool (it shrank): takes no new replicas, each of its replicas moves once a
    # successor elsewhere is ready, and the node is deleted once empty
    leaving: bool = False

    def profiles(self, index: int) -> tuple[str, ...]:
        return self.mig.profiles_of(index) if self.mig is not None else ()

    def has_layout(self, layout: NodeMigLayout, gpus: int) -> bool:
        if self.mig is None or not layout.is_mig_enabled():
            return self.mig is None and not layout.is_mig_enabled()
        return all(sorted(self.profiles(i)) == sorted(layout.profiles_of(i)) for i in range(gpus))


@dataclass(slots=True)
class SimReplica:
    model: str
    node: str | None = None
    ready_at: datetime | None = None
    # its successor while a re-layout drains ``node``: it starts on ``next_node`` and takes the
    # replica's place once ready (the replica serves on ``node`` until then)
    next_node: str | None = None
    next_ready_at: datetime | None = None


def slices_of(profile: str) -> int:
    """Compute slices of a MIG profile name (``3g.40gb`` -> 3; 0 when not one)."""
    size = profile.split("g.", 1)[0]
    return int(size) if size.isdigit() else 0


def instance_free_for(product: str, held: Sequence[str], bound: Sequence[ProfilePoint],
                      point: ProfilePoint) -> bool:
    """Whether a replica of ``point`` finds a MIG instance of its compute size with room for
    its memory among ``held`` that the ``bound`` replicas leave free (a pod asks the device
    plugin for one exact profile, e.g. ``nvidia.com/mig-1g.20gb``). The replicas needing the
    most memory take an instance first: any instance one of them fits also fits every smaller
    need, so this finds a free one whenever there is any assignment."""
    catalog = lookup(product)

    def memory_of(profile: str) -> float:
        known = catalog.profile(profile) if catalog is not None else None
        return profile_usable_mib(catalog, known) if catalog and known else math.inf

    free = sorted(held, key=lambda p: (slices_of(p), memory_of(p)))
    for need in sorted([*bound, point], key=lambda p: -p.memory_mib):
        taken = next((p for p in free if slices_of(p) == need.compute_slices
                      and memory_of(p) >= need.memory_mib), None)
        if taken is None:
            return False
        free.remove(taken)
    return True


def replica_share(spec: ModelSpec) -> float:
    """Fraction of one GPU a replica holds (``ProfilePoint.replica_gpu_share``): a MIG slice is
    g/7, an MPS process on a whole GPU 1/processes; a replica of N GPUs N."""
    return spec.best_point().replica_gpu_share


def whole_gpus_held(points: Iterable[ProfilePoint]) -> int:
    """GPUs of one node that replicas of ``points`` hold, whole or in part: a replica of N GPUs
    its N whole GPUs, the others their shares packed onto as few GPUs as the shares fill (the
    simulator packs a node's shared GPUs as one pool of capacity). A replica of N GPUs binds
    where N GPUs are left that none of them touches."""
    held = list(points)
    spanning = sum(p.gpus for p in held if p.gpus > 1)
    shares = sum(p.replica_gpu_share for p in held if p.gpus == 1)
    return spanning + math.ceil(shares - 1e-9)


def bound_to(replicas: Mapping[str, Sequence[SimReplica]],
             node: str) -> list[tuple[str, SimReplica]]:
    """(model, replica) of every replica bound to ``node``, or whose successor is."""
    return [(m, r) for m, rs in replicas.items() for r in rs if node in (r.node, r.next_node)]


def stop_order(replica: SimReplica, now: datetime, leaving: Set[str],
               deletion_cost: int) -> tuple[int, int, float]:
    """Sort key for the replicas a scale-down stops, as a ReplicaSet picks its pods: unbound
    first, then still starting (newest first), then ready ones on a node leaving its pool,
    then the ready ones by the pod-deletion-cost the Kubernetes backend annotates them with
    (``deletion_costs``: the emptiest nodes first), the newest first on a tie."""
    if replica.node is None or replica.ready_at is None:
        return (0, 0, 0.0)
    if replica.ready_at > now:
        return (1, 0, -replica.ready_at.timestamp())
    if replica.node in leaving:
        return (2, 0, 0.0)
    return (3, deletion_cost, -replica.ready_at.timestamp())


def deletion_costs_of(replicas: Mapping[str, Sequence[SimReplica]], model: str,
                      leaving: Set[str]) -> dict[int, int]:
    """id(replica) -> the pod-deletion-cost the Kubernetes backend gives each of ``model``'s
    replicas before a scale-down (``domain.deletion_cost``); every replica or successor bound
    to a node is a pod a drain of it would move."""
    movable_on = Counter(node for rs in replicas.values() for r in rs
                         for node in {r.node, r.next_node} if node is not None)
    own = replicas[model]
    costs = deletion_costs([ReplicaPod(str(i), r.node or "", None) for i, r in enumerate(own)],
                           movable_on, leaving)
    return {id(r): costs[str(i)] for i, r in enumerate(own)}
