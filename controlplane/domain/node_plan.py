"""Match the fleet plan's GPU configs to nodes and plan the node actions (pure; see
``node_configs`` for the rules)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from controlplane.domain.actions import ApplySharing, NodeAction, RelayoutMig, SkippedAction
from controlplane.domain.desired import PoolSpec
from controlplane.domain.guards import GuardMemory, Recommendation
from controlplane.domain.mig_layout import NodeMigLayout
from controlplane.domain.node_configs import (
    EXCLUSIVE,
    GpuConfig,
    NodeKind,
    gpu_config,
    layout_digest,
    mig_layout_of,
    node_kind,
    planned_configs,
)
from controlplane.domain.observed import ObservedNode, ObservedState
from controlplane.domain.placement import FleetPlacement
from controlplane.domain.sharing_config import SharingLayout

RELAYOUT_SETTLING = "relayout_settling"  # the plan has not asked for the layout long enough
RELAYOUT_BUDGET = "relayout_budget"  # as many re-layouts run as the drain budget allows
# the node's pool has a re-layout in flight (or started by this plan): one per pool at a time,
# as the MIG re-layout adapters run them; the reason names it: pool_relayout_in_flight:<pool>/<node>
POOL_RELAYOUT_IN_FLIGHT = "pool_relayout_in_flight"
# a node the plan would re-lay out but pods a drain leaves hold its GPUs (ObservedNode.
# undrained_gpu_pods): passed over for another node, or none; the reason names it and them:
# relayout_skipped:<node>:gpu_daemon_pods:<namespace>/<pod>,...
RELAYOUT_SKIPPED = "relayout_skipped"
# a busy node's sharing down to fewer clients per GPU: the plan has not asked long enough
SHARING_SETTLING = "sharing_settling"
MEMORY_PREFIX = "node-config/"
SHARING_PREFIX = MEMORY_PREFIX + "sharing/"
# reasons of node actions: what the plan needs that the node lacks
NEEDS_INSTANCES = "plan_needs_mig_instances"  # MIG instances no node holds
NEEDS_MIG = "plan_needs_mig"  # a node with MIG off becomes a MIG node
NEEDS_WHOLE_GPUS = "plan_needs_whole_gpus"  # a MIG node becomes whole GPUs
# a node's sharing set exclusive before MIG goes on: the device plugin runs MPS on no MIG-enabled
# GPU, and Headroom does not time-slice MIG devices (the plugin could, mixed strategy: §2.1)
EXCLUSIVE_FOR_MIG = "exclusive_before_mig"


def _sharing_reason(layout: SharingLayout) -> str:
    return f"plan_needs_{layout.mode.value}" + (f"_{layout.replicas}" if layout.replicas > 1
                                                 else "")


@dataclass(frozen=True, slots=True)
class NodeConfigLimits:
    max_in_flight: int = 1  # re-layouts at once; an empty node's does not wait for room
    settle_s: float = 120.0  # a busy node is re-laid out once the plan asked this long
    #: a pool's nodes are re-laid out one at a time, empty or busy (the Kubernetes and simulated
    #: MIG re-layouts refuse a second one in a pool); False only for layouts applied at once
    #: (a fleet taken over idle)
    one_per_pool: bool = True

    def __post_init__(self) -> None:
        if self.max_in_flight < 0 or self.settle_s < 0:
            raise ValueError("max_in_flight and settle_s must be >= 0")


@dataclass(frozen=True, slots=True)
class NodeConfigPlan:
    actions: tuple[NodeAction, ...]
    skipped: tuple[SkippedAction, ...]
    memory: GuardMemory


@dataclass(slots=True)
class _Node:
    node: ObservedNode
    kind: NodeKind  # now (for a node re-laying out: its target)
    current: list[GpuConfig]
    locked: bool  # re-laying out: counted as its target, never acted on
    assigned: list[GpuConfig | None] = field(default_factory=list)
    target_kind: NodeKind | None = None
    changing: bool = False
    pinned: bool = False  # its MIG layout may not change (pods a drain leaves hold its GPUs)

    @property
    def busy(self) -> bool:
        return self.node.gpu_pods > 0

    def free(self) -> list[int]:
        return [i for i, a in enumerate(self.assigned) if a is None]

    def take(self, index: int, config: GpuConfig) -> None:
        self.assigned[index] = config
        self.target_kind = config.kind
        self.changing = self.changing or config != self.current[index]


def _slots(node: ObservedNode, in_flight: Mapping[str, NodeMigLayout], pinned: bool) -> _Node:
    empty: list[GpuConfig | None] = [None] * len(node.gpus)
    target = in_flight.get(node.name)
    if target is None:
        return _Node(node, node_kind(node), [gpu_config(g) for g in node.gpus], False, empty,
                     pinned=pinned)
    if target.is_mig_enabled():
        return _Node(node, NodeKind(True), [GpuConfig(tuple(sorted(target.profiles_of(
            g.index))), mig_on=target.mig_enabled_on(g.index)) for g in node.gpus], True, empty)
    kind = NodeKind(False, node_kind(node).sharing)
    return _Node(node, kind, [GpuConfig((), kind.sharing) for _ in node.gpus], True, empty)


def _leftover_slot(nodes: Sequence[_Node], kind: NodeKind) -> tuple[_Node, int] | None:
    """Where a planned GPU no node holds yet goes: a node changing to its kind anyway, then a
    free GPU of an empty node of its kind, an empty node of another kind, a busy node of its
    kind, a busy node of another kind."""
    def ok(n: _Node) -> bool:
        # a pinned node takes only a whole GPU on a node with MIG off: a sharing change drains
        # nothing, a MIG change would
        return (not n.locked and bool(n.free()) and n.target_kind in (None, kind)
                and not (n.pinned and (kind.mig or n.kind.mig)))
    tiers: tuple[Callable[[_Node], bool], ...] = (
        lambda n: n.target_kind == kind and n.changing,
        lambda n: n.kind == kind and not n.busy,
        lambda n: n.target_kind is None and not n.busy,
        lambda n: n.kind == kind,
        lambda n: n.target_kind is None,
    )
    for tier in tiers:
        node = next((n for n in nodes if ok(n) and tier(n)), None)
        if node is not None:
            return node, node.free()[0]
    return None


def _keep_mig(configs: Sequence[GpuConfig], nodes: Sequence[_Node]) -> list[GpuConfig]:
    """Keep every MIG GPU that holds an instance the plan needs (busy nodes first: their
    instances serve); the planned GPUs that cover what the kept instances lack, greedily."""
    wanted = Counter(p for c in configs for p in c.profiles)
    for n in sorted(nodes, key=lambda n: (not n.busy, n.node.name)):
        for i, config in enumerate(n.current):
            if n.kind.mig and config.profiles and any(wanted[p] > 0 for p in config.profiles):
                n.assigned[i], n.target_kind = config, n.kind
                wanted.subtract(config.profiles)
    wanted = +wanted
    pool = [c for c in configs if c.profiles]
    leftovers: list[GpuConfig] = []
    while wanted and pool:
        best = max(pool, key=lambda c: (sum((Counter(c.profiles) & wanted).values()),
                                        -len(c.profiles), c.profiles))
        if not Counter(best.profiles) & wanted:
            break
        pool.remove(best)
        leftovers.append(best)
        wanted = +(wanted - Counter(best.profiles))
    return leftovers


def assign(configs: Sequence[GpuConfig], nodes: Sequence[_Node]) -> None:
    """Fill ``assigned`` of ``nodes`` (one pool, by name) with the planned ``configs``.

    MIG is matched by instance: a GPU whose instances the plan can use keeps its layout even
    when the scheduler packed the instances differently, and only what no kept GPU holds is
    laid out anew. Whole GPUs are matched by sharing layout."""
    leftovers = _keep_mig(configs, nodes)
    remaining = Counter(c for c in configs if not c.profiles)
    for n in sorted(nodes, key=lambda n: (not n.busy, n.node.name)):
        for i, config in enumerate(n.current):
            if remaining[config] > 0 and config.kind == n.kind:
                n.assigned[i], n.target_kind = config, n.kind
                remaining[config] -= 1
    leftovers.extend(remaining.elements())
    for config in sorted(leftovers, key=lambda c: (c.kind.sort_key(), c.profiles)):
        slot = _leftover_slot(nodes, config.kind)
        if slot is not None:
            slot[0].take(slot[1], config)


def _target_profiles(n: _Node, mix: Sequence[tuple[str, ...]]
                     ) -> list[tuple[tuple[str, ...], bool]]:
    """Each GPU's instances and MIG mode: the planned ones; a spare GPU (warm capacity) keeps
    its own, or, when it has no instances and the node is re-laid out anyway, takes the next set
    of the pool's planned ``mix``, so spare GPUs hold instances in the proportions the plan
    uses them."""
    spares = itertools.cycle(mix) if n.changing and mix else iter(())
    out = []
    for a, now in zip(n.assigned, n.current, strict=True):
        if a is not None or now.profiles:
            out.append(((a or now).profiles, (a or now).mig_on))
        else:
            spare = next(spares, ())
            out.append((spare, bool(spare) or now.mig_on))
    return out


def _mix(configs: Sequence[GpuConfig]) -> list[tuple[str, ...]]:
    """The pool's planned MIG sets, most used first."""
    return [p for p, _ in Counter(c.profiles for c in configs if c.profiles).most_common()]


def _split(configs: Sequence[tuple[tuple[str, ...], bool]]
           ) -> tuple[list[tuple[str, ...]], list[bool]]:
    return [p for p, _ in configs], [on for _, on in configs]


@dataclass(frozen=True, slots=True)
class _NodeChange:
    node: _Node
    before: tuple[ApplySharing, ...]  # sharing the re-layout needs first (MIG is exclusive)
    relayout: RelayoutMig | None
    after: tuple[ApplySharing, ...]  # sharing once the layout is the target


def _node_change(n: _Node, mix: Sequence[tuple[str, ...]]) -> _NodeChange:
    """The actions that bring one assigned node to its target."""
    assert n.target_kind is not None
    product = n.node.product
    now = [(c.profiles, c.mig_on) for c in n.current]
    # whole GPUs: MIG off everywhere (all-enabled, on without instances, serves nothing)
    wanted = (_target_profiles(n, mix) if n.target_kind.mig else
              [((), False)] * len(n.current))
    relayout = None
    if wanted != now:
        reason = (NEEDS_WHOLE_GPUS if not n.target_kind.mig else
                  NEEDS_INSTANCES if n.kind.mig else NEEDS_MIG)
        relayout = RelayoutMig(n.node.name, mig_layout_of(product, *_split(now)),
                               mig_layout_of(product, *_split(wanted)), reason)
    now_sharing = EXCLUSIVE if n.kind.mig else n.kind.sharing
    to_sharing = n.target_kind.sharing
    if now_sharing == to_sharing:
        return _NodeChange(n, (), relayout, ())
    if relayout is None:
        return _NodeChange(n, (), None, (ApplySharing(n.node.name, now_sharing, to_sharing,
                                                      _sharing_reason(to_sharing)),))
    first = (ApplySharing(n.node.name, now_sharing, to_sharing, EXCLUSIVE_FOR_MIG),)
    return _NodeChange(n, first if to_sharing == EXCLUSIVE else (), relayout, ())


def _re_laying_out(observed: ObservedState, in_flight: Mapping[str, NodeMigLayout]
                   ) -> dict[str, str]:
    """Per pool, a node of it re-laying out (the first by name); an in-flight node no longer
    observed has no pool to hold."""
    pool_of = {n.name: n.pool for n in observed.nodes}
    active: dict[str, str] = {}
    for name in sorted(in_flight):
        if name in pool_of:
            active.setdefault(pool_of[name], name)
    return active


def _pool_changes(nodes: Sequence[ObservedNode], in_flight: Mapping[str, NodeMigLayout],
                  planned: Sequence[GpuConfig]) -> tuple[list[_NodeChange], list[RelayoutMig]]:
    """The changes that lay out one pool's ``nodes`` for its ``planned`` GPUs, and the
    re-layouts passed over: a node whose GPUs pods a drain leaves hold keeps its MIG layout and
    the GPUs it would have taken go to the pool's other nodes, or none."""
    pinned: set[str] = set()
    passed: list[RelayoutMig] = []
    while True:
        slots = [_slots(n, in_flight, n.name in pinned) for n in nodes]
        assign(planned, slots)
        changes = [_node_change(n, _mix(planned)) for n in slots
                   if n.target_kind is not None and not n.locked]
        held = [c.relayout for c in changes if c.relayout is not None
                and c.node.node.undrained_gpu_pods and not c.node.pinned]
        if not held:
            return changes, passed
        passed.extend(held)
        pinned.update(r.node for r in held)


def node_config_plan(placement: FleetPlacement, observed: ObservedState,
                     pools: Sequence[PoolSpec], in_flight: Mapping[str, NodeMigLayout],
                     memory: GuardMemory, limits: NodeConfigLimits,
                     now: datetime) -> NodeConfigPlan:
    """The node actions that lay the observed nodes out as ``placement`` needs: sharing that a
    re-layout needs first, the re-layouts the drain budget allows, then sharing changes."""
    configs = planned_configs(placement)
    changes: list[_NodeChange] = []
    skipped: list[SkippedAction] = []
    held_by = {n.name: n.undrained_gpu_pods for n in observed.nodes}
    for pool in pools:
        nodes = [n for n in sorted(observed.nodes, key=lambda n: n.name)
                 if n.pool == pool.name and n.gpus
                 and (n.name in in_flight or (n.ready and not n.cordoned))]
        pool_changes, passed = _pool_changes(nodes, in_flight, configs.get(pool.product, []))
        changes.extend(pool_changes)
        skipped.extend(_skip(r, _held_reason(r.node, held_by[r.node])) for r in passed)
    seen = {k: h[-1] for k, h in memory.history if k.startswith(MEMORY_PREFIX) and h}
    kept: dict[str, Recommendation] = {}

    def settling(key: str, digest: int) -> bool:
        """Whether the plan has asked a busy node for ``digest`` under ``key`` for less than
        ``settle_s`` (a plan that flips back costs the node nothing)."""
        asked = seen.get(key)
        if asked is None or asked.value != digest:
            asked = Recommendation(now, digest)
        kept[key] = asked
        return (now - asked.at).total_seconds() < limits.settle_s

    room = limits.max_in_flight - len(in_flight)
    active = _re_laying_out(observed, in_flight)  # and, below, the ones started here
    before: list[NodeAction] = []
    relayouts: list[NodeAction] = []
    after: list[NodeAction] = []
    for change in sorted(changes, key=lambda c: c.node.busy):  # an empty node's goes first
        for sharing in change.after:  # fewer clients per GPU under running pods: settle first
            if (change.node.busy and sharing.to_value < sharing.from_value
                    and settling(SHARING_PREFIX + sharing.node, layout_digest(sharing.to_layout))):
                skipped.append(_skip(sharing, SHARING_SETTLING))
            else:
                after.append(sharing)
        relayout, busy, pool_name = change.relayout, change.node.busy, change.node.node.pool
        if relayout is None or change.node.pinned:  # a pinned node's is skipped above
            continue
        holder = active.get(pool_name) if limits.one_per_pool else None
        if busy and settling(MEMORY_PREFIX + relayout.node, layout_digest(relayout.to_layout)):
            skipped.append(_skip(relayout, RELAYOUT_SETTLING))
        elif holder is not None:
            skipped.append(_skip(relayout, f"{POOL_RELAYOUT_IN_FLIGHT}:{pool_name}/{holder}"))
        elif busy and room <= 0:
            skipped.append(_skip(relayout, RELAYOUT_BUDGET))
        else:
            room -= 1 if busy else 0
            active[pool_name] = relayout.node
            before.extend(change.before)
            relayouts.append(relayout)
    history = tuple((k, h) for k, h in memory.history if not k.startswith(MEMORY_PREFIX))
    history += tuple((k, (r,)) for k, r in sorted(kept.items()))
    return NodeConfigPlan((*before, *relayouts, *after), tuple(skipped),
                          replace(memory, history=history))


def _held_reason(node: str, pods: Sequence[str]) -> str:
    return f"{RELAYOUT_SKIPPED}:{node}:gpu_daemon_pods:{','.join(pods)}"


def _skip(action: RelayoutMig | ApplySharing, reason: str) -> SkippedAction:
    return SkippedAction(action.node, action.to_value, action.from_value, reason)
