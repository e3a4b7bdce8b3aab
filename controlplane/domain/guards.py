"""Stabilizers as pure functions with explicit memory in and out.

Scale-up is immediate but limited to ``max_step`` per tick; scale-down takes the highest
recommendation seen during the stabilization window (Kubernetes HPA's scale-down behaviour) and is
limited to ``max_step`` too. Budgets clamp the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

MAX_STEP = "max_step"
STABILIZATION_WINDOW = "scale_down_stabilization"
BUDGET = "budget_exhausted"


@dataclass(frozen=True, slots=True)
class Recommendation:
    at: datetime
    value: int


@dataclass(frozen=True, slots=True)
class GuardMemory:
    """Recent recommendations per target (pool or model), oldest first."""

    history: tuple[tuple[str, tuple[Recommendation, ...]], ...] = ()

    def for_target(self, target: str) -> tuple[Recommendation, ...]:
        return next((h for t, h in self.history if t == target), ())


@dataclass(frozen=True, slots=True)
class GuardLimits:
    max_step: int
    stabilization_s: float
    budget: int | None = None


@dataclass(frozen=True, slots=True)
class GuardDecision:
    target: str
    current: int
    wanted: int
    allowed: int
    reason: str  # empty when the wanted value passes unchanged


def stabilize(
    target: str,
    current: int,
    wanted: int,
    memory: tuple[Recommendation, ...],
    limits: GuardLimits,
    now: datetime,
) -> tuple[GuardDecision, tuple[Recommendation, ...]]:
    """Decide the value to apply for one target, returning the decision and the new memory."""
    horizon = now - timedelta(seconds=limits.stabilization_s)
    kept = tuple(r for r in memory if r.at >= horizon) + (Recommendation(now, wanted),)
    allowed, reason = wanted, ""
    if wanted < current:
        floor = max(r.value for r in kept)
        if floor > wanted:
            allowed, reason = min(current, floor), STABILIZATION_WINDOW
    if allowed > current + limits.max_step:
        allowed, reason = current + limits.max_step, MAX_STEP
    elif allowed < current - limits.max_step:
        allowed, reason = current - limits.max_step, MAX_STEP
    if limits.budget is not None and allowed > limits.budget:
        allowed, reason = max(limits.budget, min(current, limits.budget)), BUDGET
    return GuardDecision(target, current, wanted, allowed, reason), kept


def with_history(
    memory: GuardMemory, target: str, history: tuple[Recommendation, ...]
) -> GuardMemory:
    others = tuple((t, h) for t, h in memory.history if t != target)
    return GuardMemory(history=(*others, (target, history)))
