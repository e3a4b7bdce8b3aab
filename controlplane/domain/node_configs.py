"""The node configs a fleet plan implies, and the node actions that reach them (pure).

PlanFleet places replicas on the scheduler's own GPU ids ("A100-80GB/3"), not on nodes; what ties
a plan to the cluster is each planned GPU's *config*: its MIG instances, or a whole GPU shared
through the device plugin (MPS by n clients) or held exclusively. A node carries one mig-parted
config and one device-plugin config, so a node is of one kind: MIG on (each GPU its own
instances, under a device-plugin config that shares nothing: the plugin runs MPS on no
MIG-enabled GPU, and Headroom does not ask it to time-slice the `nvidia.com/mig-*` devices,
which it could under the mixed strategy, REFERENCE.md §2.1; a replica's MPS processes on a slice
run under its own daemon) or whole GPUs under one sharing layout (REFERENCE.md §1.7, §2).

``node_plan.node_config_plan`` matches the planned GPUs to the observed nodes of each pool and
returns ``RelayoutMig`` and ``ApplySharing`` actions for the nodes that must change:

1. MIG is matched by instance: every GPU holding an instance the plan needs keeps its layout,
   however the scheduler packed the instances, and the planned GPUs that cover the instances no
   kept GPU holds are the leftovers; a whole GPU whose sharing a planned GPU needs keeps it;
2. the leftovers go, in this order, to free GPUs of empty nodes of their kind, empty
   nodes of another kind, free GPUs of busy nodes of their kind, busy nodes of another kind. A
   node that keeps a planned GPU never changes kind; a node the plan does not need is left as
   it is (scale-down or warm capacity);
3. a re-layout drains the node (surge, cordon, evict, relabel, uncordon), so a node that runs GPU
   workloads is re-laid out only after the plan has asked for the same layout for ``settle_s``
   (a plan that flips back costs nothing) and only while fewer than ``max_in_flight`` re-layouts
   run (any in flight counts: the port does not say which had a node to drain); an empty node
   has nothing to evict and is not held by that budget. Either way a pool re-lays out one node
   at a time, as the MIG re-layout adapters do (Kubernetes and simulated): a node whose pool has
   one in flight, or one this plan starts (an empty node's first), is skipped with
   ``pool_relayout_in_flight:<pool>/<node>``;
4. nodes not ready, cordoned or already re-laying out (``in_flight``, counted as their target)
   get no action; device-plugin sharing changes once the node's MIG layout is the target: at
   once to more clients per GPU, but on a node that runs GPU workloads to fewer clients only
   after the plan has asked for it for ``settle_s`` (it shrinks what the device plugin
   advertises under running pods, and a plan that flips back restarts nothing);
5. a node whose GPUs pods a drain leaves hold (``ObservedNode.undrained_gpu_pods``: a user's
   DaemonSet or static pod requesting GPUs, which the MIG manager does not stop) cannot be
   re-laid out: the GPUs the plan would have laid out there go to the pool's other nodes, or
   none, and the re-layout passed over is skipped with
   ``relayout_skipped:<node>:gpu_daemon_pods:<namespace>/<pod>,...``. (The Kubernetes MIG
   re-layout still refuses such a node, for a pod that arrives after the observation.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from controlplane.domain.mig_layout import DeviceGroupLayout, NodeMigLayout
from controlplane.domain.models import SharingMode
from controlplane.domain.observed import ObservedGpu, ObservedNode
from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.domain.sharing_config import SharingLayout

EXCLUSIVE = SharingLayout(SharingMode.EXCLUSIVE)


@dataclass(frozen=True, slots=True)
class NodeKind:
    """What a node's configs hold for all its GPUs: MIG on, or whole GPUs under one sharing."""

    mig: bool
    sharing: SharingLayout = EXCLUSIVE

    def sort_key(self) -> tuple[bool, str]:
        return (not self.mig, self.sharing.describe())


#: the kind of node whose GPUs are whole and held exclusively: the only kind a replica of
#: several GPUs (tensor parallel) runs on
EXCLUSIVE_GPUS = NodeKind(False)


@dataclass(frozen=True, slots=True)
class GpuConfig:
    profiles: tuple[str, ...] = ()  # MIG instances, sorted
    sharing: SharingLayout = EXCLUSIVE  # device-plugin sharing of a whole GPU
    mig_on: bool = False  # MIG mode (instances imply it; on without any: serves nothing)

    def __post_init__(self) -> None:
        if self.profiles and not self.mig_on:
            object.__setattr__(self, "mig_on", True)

    @property
    def kind(self) -> NodeKind:
        return NodeKind(True) if self.mig_on else NodeKind(False, self.sharing)


def _segment_config(segments: Sequence[PlacedSegment]) -> GpuConfig | None:
    """The config one planned GPU needs; None when its segments carry no layout (a sizing
    placeholder, not a PlanFleet placement)."""
    if any(s.mode not in ("mig", "mps", "exclusive", "time_sliced") for s in segments):
        return None
    profiles = tuple(sorted(s.mig_profile for s in segments if s.mig_profile))
    if profiles:
        return GpuConfig(profiles)
    if any(s.mode == "time_sliced" for s in segments) and len(segments) > 1:
        return GpuConfig((), SharingLayout(SharingMode.TIME_SLICING, len(segments)))
    clients = max((s.mps_processes for s in segments if s.mode == "mps"), default=1)
    return GpuConfig((), SharingLayout(SharingMode.MPS, clients) if clients > 1 else EXCLUSIVE)


def planned_configs(placement: FleetPlacement) -> dict[str, list[GpuConfig]]:
    """The config of every planned GPU, by product (deterministic order)."""
    by_gpu: dict[tuple[str, str], list[PlacedSegment]] = {}
    for segment in placement.segments:
        by_gpu.setdefault((segment.product, segment.gpu_id), []).append(segment)
    out: dict[str, list[GpuConfig]] = {}
    for (product, _), segments in sorted(by_gpu.items()):
        config = _segment_config(segments)
        if config is not None:
            out.setdefault(product, []).append(config)
    return out


def gpu_config(gpu: ObservedGpu) -> GpuConfig:
    if gpu.mig_enabled:
        return GpuConfig(tuple(sorted(gpu.mig_layout)), mig_on=True)
    shared = {SharingMode.MPS.value: SharingMode.MPS,
              SharingMode.TIME_SLICING.value: SharingMode.TIME_SLICING}.get(gpu.sharing)
    if shared is not None and gpu.sharing_replicas >= 2:
        return GpuConfig((), SharingLayout(shared, gpu.sharing_replicas))
    return GpuConfig()


def node_kind(node: ObservedNode) -> NodeKind:
    configs = [gpu_config(g) for g in node.gpus]
    if any(c.mig_on for c in configs):
        return NodeKind(True)
    return configs[0].kind if configs else NodeKind(False)


def mig_layout_of(product: str, profiles_by_gpu: Sequence[tuple[str, ...]],
                  mig_on_by_gpu: Sequence[bool] | None = None) -> NodeMigLayout:
    """A node layout from each GPU's instances: one device group when all GPUs agree, else
    one group per distinct set (mig-parted applies each group to its listed GPUs). A GPU
    without instances has MIG off, unless ``mig_on_by_gpu`` says on (all-enabled)."""
    on = [bool(p) for p in profiles_by_gpu] if mig_on_by_gpu is None else mig_on_by_gpu
    keys = [(p, o or bool(p)) for p, o in zip(profiles_by_gpu, on, strict=True)]
    distinct = sorted(set(keys))
    if len(distinct) <= 1:
        profiles, enabled = distinct[0] if distinct else ((), False)
        return NodeMigLayout(product, (DeviceGroupLayout((), profiles, enabled),))
    groups = tuple(DeviceGroupLayout(tuple(i for i, k in enumerate(keys) if k == d), *d)
                   for d in distinct)
    return NodeMigLayout(product, groups)


def layout_digest(layout: NodeMigLayout | SharingLayout) -> int:
    """A stable number for a layout (guard memory holds integers)."""
    return int(hashlib.sha1(repr(layout).encode()).hexdigest()[:12], 16)
