"""Routing hint: rank a model's replicas for the next request (pure functions of values).

Serving layers in the field pick a replica by GPU-memory headroom x 1/queue depth x model-version
affinity (DESIGN.md). The serving layer knows each replica's queue and KV cache; Headroom knows
where each replica runs: whether its node still takes work (cordoned, not ready, gone from the
inventory), how much of its GPU's memory co-located replicas hold under MPS or time-slicing, and
how much memory a MIG instance or a whole GPU gives it. ``rank_replicas`` multiplies the three
factors; a replica that cannot serve now (node draining, asleep) scores 0 and ranks last, so a
router that has nothing else still has an answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.domain.model import SharingMode

#: Version factor of a replica serving another version than the one asked for (it would have to
#: load it, or answer from another version), unless the request sets its own.
DEFAULT_VERSION_MISMATCH_FACTOR = 0.25


@dataclass(frozen=True, slots=True)
class ReplicaLoad:
    """What the serving layer reports about one replica (a validated request entry)."""

    workload_id: str
    queue_depth: int = 0  # requests waiting (vllm:num_requests_waiting, nv_inference_pending_…)
    kv_cache_usage: float | None = None  # 0..1 (vllm:kv_cache_usage_perc); None: not known
    gpu_memory_used_mib: int | None = None  # per GPU; None: not known
    model_version: str = ""  # "" = not known
    sleeping: bool = False  # vLLM sleep mode, Triton loaded but not routed
    adapters: tuple[str, ...] = ()  # LoRA adapters (other versions) it has loaded and serves

    def serves(self, version: str) -> bool:
        """Whether it serves ``version`` as it is: its model version or a loaded adapter;
        True when no version is asked or it says nothing of what it serves (not known)."""
        said = (self.model_version, *self.adapters) if self.model_version else self.adapters
        return not version or not said or version in said


@dataclass(frozen=True, slots=True)
class ReplicaSite:
    """Where Headroom has a replica bound: its node and the GPU memory it may use."""

    node: str
    mode: SharingMode | None
    node_open: bool  # the node takes work (in the inventory, not cordoned, ready)
    memory_mib: int  # per GPU the replica may use (a MIG instance's, a whole GPU's); 0: unknown
    gpu_free_fraction: float  # the least share of its GPUs' memory others do not hold
    closed_because: str = ""  # why its node takes no work ("is cordoned or not ready", ...)


@dataclass(frozen=True, slots=True)
class RankedReplica:
    workload_id: str
    score: float
    node: str
    memory_headroom: float  # 0..1
    queue_factor: float  # 1 / (1 + queue depth)
    version_factor: float
    reason: str
    mode: SharingMode | None = None  # how it shares its GPU (None: not known / no GPU)
    memory_mib: int = 0  # per GPU it may use (ReplicaSite.memory_mib); 0: not known
    can_serve: bool = True  # False: its node takes no work, or it is asleep


def memory_headroom(load: ReplicaLoad, site: ReplicaSite) -> tuple[float, str]:
    """The replica's free share of the GPU memory it may use, and where the number comes from:
    the KV cache usage it reports, else the memory it reports against what its slice gives it,
    else Headroom's own accounting (what co-located replicas hold on a shared GPU, its own
    charge not counted; a MIG instance or an exclusive GPU is the replica's alone)."""
    if load.kv_cache_usage is not None:
        return 1.0 - load.kv_cache_usage, "kv cache"
    if load.gpu_memory_used_mib is not None and site.memory_mib > 0:
        return _clamp(1.0 - load.gpu_memory_used_mib / site.memory_mib), "reported memory"
    if site.mode in (SharingMode.MPS, SharingMode.TIME_SLICING):
        return _clamp(site.gpu_free_fraction), "shared GPU"
    return 1.0, "own slice"


def rank_replicas(candidates: Sequence[tuple[ReplicaLoad, ReplicaSite]], model_version: str = "",
                  version_mismatch_factor: float = DEFAULT_VERSION_MISMATCH_FACTOR
                  ) -> list[RankedReplica]:
    """The candidates best first: by score (headroom x queue factor x version factor, 0 for a
    replica that cannot serve now); those at 0 that can serve first (a full KV cache), then
    those on a node that takes no work, then those asleep, each by what they would score (a
    router whose every replica is on a draining node still gets the idle one first); ties by
    workload id, so the same loads give the same order."""
    keyed = []
    for load, site in candidates:
        would_score, r = _ranked(load, site, model_version, version_mismatch_factor)
        keyed.append(((-r.score, 2 if load.sleeping else 0 if site.node_open else 1,
                       -would_score, r.workload_id), r))
    keyed.sort(key=lambda pair: pair[0])
    return [r for _, r in keyed]


def _ranked(load: ReplicaLoad, site: ReplicaSite, model_version: str,
            mismatch_factor: float) -> tuple[float, RankedReplica]:
    """What the replica would score if it could serve, and its ranking entry."""
    headroom, source = memory_headroom(load, site)
    queue_factor = 1.0 / (1 + load.queue_depth)
    matches = load.serves(model_version)
    version_factor = 1.0 if matches else mismatch_factor
    would_score = score = headroom * queue_factor * version_factor
    serving = ", ".join(v for v in (load.model_version, *load.adapters) if v)
    parts = [f"memory {headroom:.2f} ({source})", f"queue 1/{1 + load.queue_depth}",
             "version " + ("match" if matches else f"{model_version} not loaded (serves "
                                                   f"{serving})")]
    if not site.node_open:
        why = site.closed_because or "takes no work (cordoned, not ready or not in the inventory)"
        score, parts = 0.0, [f"node_unavailable: {site.node} {why}", *parts]
    elif load.sleeping:
        score, parts = 0.0, ["sleeping: wake it before routing to it", *parts]
    return would_score, RankedReplica(
        load.workload_id, score, site.node, headroom, queue_factor, version_factor,
        "; ".join(parts), site.mode, site.memory_mib, site.node_open and not load.sleeping)


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))

