"""Planner: diff observed against desired through the guards -> an ordered Plan (pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from controlplane.domain.actions import (
    Action,
    ActionOutcome,
    ScaleNodePool,
    SetReplicas,
    SkippedAction,
)
from controlplane.domain.desired import DesiredState, DesiredTarget
from controlplane.domain.guards import (
    Change,
    GuardDecision,
    GuardLimits,
    GuardMemory,
    guard,
    with_changes,
    with_history,
)
from controlplane.domain.node_fill import nodes_to_hold
from controlplane.domain.observed import ObservedState
from controlplane.domain.plan import KeptReplicas, Plan

POOL_OBJECTS_CHANGED = "pool_objects_changed"  # written again at the same size
# a pool scale-down held (in full or in part) while replicas the guards keep over their target
# still run on its nodes
REPLICAS_SCALING_DOWN = "replicas_scaling_down"
# a pool grown over its target: replicas the guards keep over their target take GPUs the target
# counted for other replicas, which would otherwise wait for a GPU until the kept ones go
REPLICAS_KEPT_NEED_ROOM = "replicas_kept_need_room"
# a pool scale-down held (in full or in part) at the size a running MIG re-layout's surge holds:
# the replicas it drains move to its surge nodes (the node-pool actuators hold it there anyway)
RELAYOUT_SURGE = "relayout_surge"
MODEL_KEY = "model/"  # the guard memory's key of a model's replicas: model/<name>

#: A limit across models the guards cannot see (a tenant's GPU budget): given each model's
#: (replicas it has, replicas the guards allow), the models it holds back, each with the most
#: replicas it may have and the limit's reason.
ReplicaLimit = Callable[[Mapping[str, tuple[int, int]]], Mapping[str, tuple[int, str]]]


def wanted_replicas(memory: GuardMemory, tick_at: datetime) -> dict[str, int]:
    """Model -> the replica target the tick that started at ``tick_at`` wanted (its desired
    target, before the guards pace the way there), from the guard memory it left: the
    recommendation it made at ``tick_at``. A tick that sized no model (skipped, its fleet
    unread) made none, and a model it did not size has none."""
    return {key.removeprefix(MODEL_KEY): r.value for key, history in memory.history
            if key.startswith(MODEL_KEY) for r in history if r.at == tick_at}


def guard_key(action: Action) -> str | None:
    """The guard memory's key of the target a planned action changes (None: node actions,
    which the guards do not count)."""
    if isinstance(action, SetReplicas):
        return f"{MODEL_KEY}{action.model}"
    if isinstance(action, ScaleNodePool):
        return f"pool/{action.pool}"
    return None


def made(memory: GuardMemory, planned: Plan, outcomes: Sequence[ActionOutcome]) -> GuardMemory:
    """The memory a tick leaves once its plan was applied (``outcomes`` in plan order) or not
    (none: a dry run): each change ``plan`` counted for this tick stays only if its action
    succeeded, so a change never made (dry run, 409, 403, 500) holds no later cooldown or
    disruption budget. The recommendations (what was wanted) stay as they are."""
    done = {guard_key(a) for a, o in zip(planned.actions, outcomes, strict=False) if o.ok}
    now = planned.created_at
    for key, changes in memory.changes:
        if key not in done and any(c.at == now for c in changes):
            memory = with_changes(memory, key, tuple(c for c in changes if c.at != now))
    return memory


def _guarded(key: str, current: int, target: DesiredTarget, memory: GuardMemory,
             limits: GuardLimits, now: datetime, fresh: bool
             ) -> tuple[GuardDecision, GuardMemory, SkippedAction | None]:
    decision, history, changes = guard(key, current, target.value, memory.for_target(key),
                                       memory.changes_for(key), limits, now, fresh)
    memory = with_changes(with_history(memory, key, history), key, changes)
    skipped = (SkippedAction(target.target, target.value, decision.allowed, decision.reason)
               if decision.reason else None)
    return decision, memory, skipped


@dataclass(frozen=True, slots=True)
class KeptGpus:
    """What the replicas kept over their targets take in one pool: whole GPUs, and the GPUs of
    each kept replica of several GPUs (on one node each)."""

    single_gpus: int = 0
    groups: tuple[int, ...] = ()


def _kept_gpus(desired: DesiredState, kept: dict[str, int]) -> tuple[dict[str, KeptGpus], bool]:
    """GPUs per pool that the replicas kept over their targets take, and whether some kept
    model's pool is unknown (it has no footprint)."""
    gpus: dict[str, KeptGpus] = {}
    unknown = False
    for model, extra in kept.items():
        footprint = desired.footprint(model)
        if footprint is None:
            unknown = True
            continue
        known = gpus.get(footprint.pool, KeptGpus())
        if footprint.whole_gpus > 1:
            known = replace(known, groups=(*known.groups, *[footprint.whole_gpus] * extra))
        else:
            known = replace(known, single_gpus=known.single_gpus + footprint.gpus_for(extra))
        gpus[footprint.pool] = known
    return gpus, unknown


def _room(target: DesiredTarget, gpus_per_node: int, kept_gpus: dict[str, KeptGpus]) -> int:
    """Nodes for the GPUs the target holds before rounding plus those of the replicas kept over
    their targets in the pool (they fill the free room of the target's nodes first, a kept
    replica of several GPUs only room on one node for all of it; without the target's GPUs,
    whole nodes over the target), never fewer than the target."""
    extra = kept_gpus.get(target.target, KeptGpus())
    if target.gpus is None:
        return target.value + nodes_to_hold(extra.groups, extra.single_gpus, gpus_per_node)
    groups = (*target.groups, *extra.groups)
    singles = target.gpus - sum(target.groups) + extra.single_gpus
    return max(target.value, nodes_to_hold(groups, singles, gpus_per_node))


def _pool_floor(target: DesiredTarget, current: int, gpus_per_node: int,
                kept_gpus: dict[str, KeptGpus], unknown: bool) -> int:
    """The fewest nodes the pool may keep: its ``_room``, never more than it has; all its nodes
    when a kept model's pool is unknown."""
    if unknown:
        return current
    return min(current, _room(target, gpus_per_node, kept_gpus))


def _pool_raise(target: DesiredTarget, current: int, gpus_per_node: int,
                kept_gpus: dict[str, KeptGpus], unknown: bool, max_step: int) -> int:
    """The nodes the pool grows to when its ``_room`` is more than it has (the target's own
    replicas would wait for GPUs the kept ones hold): within the target's ``max_value`` and
    one ``max_step``. No growth (``current``) when the target's GPUs, its ``max_value`` or a kept
    model's pool is unknown."""
    if unknown or target.gpus is None or target.max_value is None:
        return current
    return max(current, min(_room(target, gpus_per_node, kept_gpus), target.max_value,
                            current + max_step))


def _made_instead(memory: GuardMemory, key: str, now: datetime, delta: int) -> GuardMemory:
    """``memory`` with ``delta`` as the change made to ``key`` now instead of the guard's."""
    others = tuple(c for c in memory.changes_for(key) if c.at != now)
    return with_changes(memory, key, (*others, *((Change(now, delta),) if delta else ())))


def _limited(decided: dict[str, tuple[DesiredTarget, int, int]],
             held: dict[str, SkippedAction], memory: GuardMemory, limit: ReplicaLimit,
             now: datetime) -> GuardMemory:
    """``decided`` (model -> target, replicas it has, replicas allowed) and ``held`` (amended
    in place) with the scale-ups ``limit`` holds back, and the memory counting the change made
    instead of the guards'."""
    found = limit({model: (current, value) for model, (_, current, value) in decided.items()})
    for model, (most, reason) in found.items():
        target, current, value = decided[model]
        fewer = max(current, most)
        if fewer < value:
            decided[model] = (target, current, fewer)
            held[model] = SkippedAction(model, target.value, fewer, reason)
            memory = _made_instead(memory, f"{MODEL_KEY}{model}", now, fewer - current)
    return memory


def plan(
    observed: ObservedState,
    desired: DesiredState,
    memory: GuardMemory,
    pool_limits: GuardLimits,
    replica_limits: GuardLimits,
    now: datetime,
    limit: ReplicaLimit | None = None,
) -> tuple[Plan, GuardMemory]:
    """Pool scale-ups first, then replica changes, then pool scale-downs; absolute targets only.
    A pool whose target is no longer held intact is written again at the size allowed (with the
    scale-ups, reason ``pool_objects_changed`` when that size is its current one).

    The desired pools hold the desired replicas. Replicas the guards keep over their target
    (hysteresis, the stabilization window, cooldown, stale data, ``max_step``, the disruption
    budget) still need their nodes: a pool scales down no further than the nodes its target's
    GPUs plus the GPUs its kept replicas take (the desired state's footprints) fill, and not at
    all while a kept model has no footprint (skipped, ``replicas_scaling_down``); when those
    are more nodes than it has, it grows to them (reason ``replicas_kept_need_room``, within
    the target's ``max_value`` and the pool guard's ``max_step``), else the target's own new
    replicas would wait for GPUs until the kept ones go. The replicas of a model held while
    unplaced (``DesiredState.held_unplaced``) are all kept so. The plan lists the kept replicas
    (``Plan.kept``, on the product and at the GPU share of their footprint) so showback bills
    their GPUs to the model, not as idle.

    ``limit`` (e.g. the tenants' GPU budgets) sees the replicas the guards allow every model,
    the ones they keep included, and may hold a scale-up back (never below the replicas the
    model has): skipped with the limit's reason, counted as the change made."""
    ups: list[Action] = []
    downs: list[Action] = []
    replicas: list[Action] = []
    held: dict[str, SkippedAction] = {}  # model -> the change a guard (or ``limit``) held back
    decided: dict[str, tuple[DesiredTarget, int, int]] = {}  # model -> (target, has, allowed)
    for target in desired.replicas:
        seen_model = observed.model(target.target)
        current = seen_model.replicas_target if seen_model else 0
        decision, memory, skip = _guarded(f"{MODEL_KEY}{target.target}", current, target, memory,
                                          replica_limits, now, desired.is_fresh(target.target))
        if skip:
            held[target.target] = skip
        decided[target.target] = (target, current, decision.allowed)
    if limit is not None:
        memory = _limited(decided, held, memory, limit, now)
    kept: dict[str, int] = {}  # model -> replicas kept over its target
    for target, current, value in decided.values():
        if value != current:
            replicas.append(SetReplicas(target.target, current, value, target.reason))
        # a model held while unplaced: the placement counts none of its replicas
        placed = 0 if target.target in desired.held_unplaced else target.value
        if value > placed:
            kept[target.target] = value - placed
    skipped = list(held.values())
    kept_gpus, unknown = _kept_gpus(desired, kept)
    pool_skipped: list[SkippedAction] = []
    for target in desired.pools:
        seen = observed.pool(target.target)
        current = seen.target_nodes if seen else 0
        key = f"pool/{target.target}"
        decision, memory, skip = _guarded(key, current, target, memory, pool_limits, now,
                                          desired.is_fresh(target.target))
        allowed, reason = decision.allowed, target.reason
        floor = (_pool_floor(target, current, seen.gpus_per_node, kept_gpus, unknown)
                 if seen else 0)
        raised = (_pool_raise(target, current, seen.gpus_per_node, kept_gpus, unknown,
                              pool_limits.max_step) if seen else 0)
        if allowed < raised and raised > current:  # grown for the kept replicas
            memory = _made_instead(memory, key, now, raised - current)
            allowed, reason = raised, REPLICAS_KEPT_NEED_ROOM
        elif allowed < floor:  # held: the removal it would have made is not the change made
            memory = _made_instead(memory, key, now, floor - current)
            allowed, skip = floor, SkippedAction(target.target, target.value, floor,
                                                 REPLICAS_SCALING_DOWN)
        if skip:
            pool_skipped.append(skip)
        if allowed != current:
            action = ScaleNodePool(target.target, current, allowed, reason)
            (ups if allowed > current else downs).append(action)
        elif seen is not None and not seen.target_intact:
            ups.append(ScaleNodePool(target.target, current, current, POOL_OBJECTS_CHANGED))
    return Plan(now, (*ups, *replicas, *downs), (*pool_skipped, *skipped),
                _kept_replicas(desired, kept)), memory


def _kept_replicas(desired: DesiredState, kept: Mapping[str, int]) -> tuple[KeptReplicas, ...]:
    """The replicas kept over their targets, on the product and at the GPU share their
    footprint says (a model whose footprint names no product: left out, nothing known)."""
    out = []
    for model, replicas in sorted(kept.items()):
        footprint = desired.footprint(model)
        if footprint is not None and footprint.product and footprint.gpu_share > 0:
            out.append(KeptReplicas(model, replicas, footprint.product, footprint.gpu_share))
    return tuple(out)


def held_for_surges(planned: Plan, memory: GuardMemory, floors: Mapping[str, int]
                    ) -> tuple[Plan, GuardMemory]:
    """``planned`` with each pool scale-down below its ``floors`` size (the surge nodes of its
    running MIG re-layout, ``MigRelayoutActuator.surge_floors``) held at that size, skipped
    with reason ``relayout_surge``, and ``memory`` counting the change made instead: the plan
    says what is applied, not a removal the actuator would refuse."""
    actions: list[Action] = []
    skipped: list[SkippedAction] = []
    for action in planned.actions:
        floor = floors.get(action.pool, 0) if isinstance(action, ScaleNodePool) else 0
        if not isinstance(action, ScaleNodePool) or action.to_nodes >= min(
                floor, action.from_nodes):
            actions.append(action)
            continue
        kept = min(floor, action.from_nodes)
        skipped.append(SkippedAction(action.pool, action.to_nodes, kept, RELAYOUT_SURGE))
        memory = _made_instead(memory, f"pool/{action.pool}", planned.created_at,
                               kept - action.from_nodes)
        if kept != action.from_nodes:
            actions.append(replace(action, to_nodes=kept))
    held = replace(planned, actions=tuple(actions), skipped=(*planned.skipped, *skipped))
    return held, memory
