"""Planner: diff observed against desired through the guards -> an ordered Plan (pure)."""

from __future__ import annotations

from datetime import datetime

from controlplane.domain.actions import Action, ScaleNodePool, SetReplicas, SkippedAction
from controlplane.domain.desired import DesiredState, DesiredTarget
from controlplane.domain.guards import (
    DISRUPTION_BUDGET,
    MAX_STEP,
    GuardDecision,
    GuardLimits,
    GuardMemory,
    guard,
    with_changes,
    with_history,
)
from controlplane.domain.observed import ObservedState
from controlplane.domain.plan import Plan

POOL_OBJECTS_CHANGED = "pool_objects_changed"  # written again at the same size
# a pool scale-down held while replicas still wait to scale down (their pods need the nodes)
REPLICAS_SCALING_DOWN = "replicas_scaling_down"


def _guarded(key: str, current: int, target: DesiredTarget, memory: GuardMemory,
             limits: GuardLimits, now: datetime, fresh: bool
             ) -> tuple[GuardDecision, GuardMemory, SkippedAction | None]:
    decision, history, changes = guard(key, current, target.value, memory.for_target(key),
                                       memory.changes_for(key), limits, now, fresh)
    memory = with_changes(with_history(memory, key, history), key, changes)
    skipped = (SkippedAction(target.target, target.value, decision.allowed, decision.reason)
               if decision.reason else None)
    return decision, memory, skipped


def plan(
    observed: ObservedState,
    desired: DesiredState,
    memory: GuardMemory,
    pool_limits: GuardLimits,
    replica_limits: GuardLimits,
    now: datetime,
) -> tuple[Plan, GuardMemory]:
    """Pool scale-ups first, then replica changes, then pool scale-downs; absolute targets only.
    A pool whose target is no longer held intact is written again at the size allowed (with the
    scale-ups, reason ``pool_objects_changed`` when that size is its current one).

    The desired pools hold the desired replicas; while a replica scale-down is cut short by
    ``max_step`` or the disruption budget, the replicas kept over their target still need
    their nodes, so no pool scales down in that plan (skipped, ``replicas_scaling_down``)."""
    ups: list[Action] = []
    downs: list[Action] = []
    replicas: list[Action] = []
    skipped: list[SkippedAction] = []
    still_down = False
    for target in desired.replicas:
        seen_model = observed.model(target.target)
        current = seen_model.replicas_target if seen_model else 0
        decision, memory, skip = _guarded(f"model/{target.target}", current, target, memory,
                                          replica_limits, now, desired.is_fresh(target.target))
        if skip:
            skipped.append(skip)
        if decision.allowed != current:
            replicas.append(SetReplicas(target.target, current, decision.allowed, target.reason))
        still_down |= (target.value < decision.allowed < current
                       and decision.reason in (MAX_STEP, DISRUPTION_BUDGET))
    pool_skipped: list[SkippedAction] = []
    for target in desired.pools:
        seen = observed.pool(target.target)
        current = seen.target_nodes if seen else 0
        decision, memory, skip = _guarded(f"pool/{target.target}", current, target, memory,
                                          pool_limits, now, desired.is_fresh(target.target))
        allowed = decision.allowed
        if allowed < current and still_down:  # held: its removal is not a change made
            key = f"pool/{target.target}"
            memory = with_changes(memory, key, tuple(c for c in memory.changes_for(key)
                                                     if c.at != now))
            allowed, skip = current, SkippedAction(target.target, target.value, current,
                                                   REPLICAS_SCALING_DOWN)
        if skip:
            pool_skipped.append(skip)
        if allowed != current:
            action = ScaleNodePool(target.target, current, allowed, target.reason)
            (ups if allowed > current else downs).append(action)
        elif seen is not None and not seen.target_intact:
            ups.append(ScaleNodePool(target.target, current, current, POOL_OBJECTS_CHANGED))
    return Plan(now, (*ups, *replicas, *downs), (*pool_skipped, *skipped)), memory
