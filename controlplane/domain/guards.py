"""Stabilizers as pure functions with explicit memory in and out.

Scale-up is immediate but limited to ``max_step`` per tick; scale-down takes the highest
recommendation seen during the stabilization window (Kubernetes HPA's scale-down behaviour) and is
limited to ``max_step`` too. A scale-down also needs recommendations covering the whole window: a
target whose memory starts inside it (a new process or store, a new target) holds its scale-downs
until the window has passed, so the lower target has held for the window, not only since the
first tick. A recommendation dated after ``now`` (the clock stepped back) counts as made
``now``: it holds scale-downs one window, not for as long as the step. Budgets clamp the
result. Optional guards, all off by default:

* hysteresis (``tolerance``): a change within ``tolerance`` x current is ignored (HPA's 10 %);
* fresh data: a scale-down computed from stale inputs is held (``fresh=False``);
* cooldown (``cooldown_s``): no scale-down until this long after the last scale-up;
* disruption budget: at most ``disruption_budget`` units removed per ``disruption_window_s``.

Order: hysteresis, stabilization window, fresh data, cooldown, max step, disruption budget,
budget. Each decision carries the reason of the last guard that changed it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

MAX_STEP = "max_step"
STABILIZATION_WINDOW = "scale_down_stabilization"
BUDGET = "budget_exhausted"
TOLERANCE = "within_tolerance"
STALE_DATA = "stale_data_hold"
COOLDOWN = "cooldown_active"
DISRUPTION_BUDGET = "disruption_budget"


@dataclass(frozen=True, slots=True)
class Recommendation:
    at: datetime
    value: int


@dataclass(frozen=True, slots=True)
class Change:
    """A change that was allowed: ``delta`` units (signed) at ``at``."""

    at: datetime
    delta: int


@dataclass(frozen=True, slots=True)
class GuardMemory:
    """Recent recommendations per target (pool or model), oldest first, and recent changes."""

    history: tuple[tuple[str, tuple[Recommendation, ...]], ...] = ()
    changes: tuple[tuple[str, tuple[Change, ...]], ...] = ()
    # model -> the corrected throughput per replica in use (absent: its offline profile), the
    # hysteresis state of the online profile correction
    profile_rps: tuple[tuple[str, float], ...] = ()

    def for_target(self, target: str) -> tuple[Recommendation, ...]:
        return next((h for t, h in self.history if t == target), ())

    def changes_for(self, target: str) -> tuple[Change, ...]:
        return next((c for t, c in self.changes if t == target), ())

    @property
    def newest_at(self) -> datetime | None:
        """When its newest recommendation or change was made: the tick that wrote it (every
        guarded target gets a recommendation each tick); None when empty."""
        made = [r.at for _, history in self.history for r in history]
        made += [c.at for _, changes in self.changes for c in changes]
        return max(made, default=None)


def newer_memory(first: GuardMemory, second: GuardMemory) -> GuardMemory:
    """``second`` if a later tick wrote it (or ``first`` is empty), else ``first``."""
    first_at, second_at = first.newest_at, second.newest_at
    if second_at is not None and (first_at is None or second_at > first_at):
        return second
    return first


@dataclass(frozen=True, slots=True)
class GuardLimits:
    max_step: int
    stabilization_s: float
    budget: int | None = None
    tolerance: float = 0.0
    cooldown_s: float = 0.0
    disruption_budget: int | None = None
    disruption_window_s: float = 600.0

    def __post_init__(self) -> None:
        if self.max_step < 1:
            raise ValueError("max_step must be >= 1")
        if self.stabilization_s < 0 or self.cooldown_s < 0 or self.disruption_window_s < 0:
            raise ValueError("guard windows must be >= 0 s")
        if not 0 <= self.tolerance < 1:
            raise ValueError("tolerance must be in [0, 1)")


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
    decision, history, _ = guard(target, current, wanted, memory, (), limits, now)
    return decision, history


def _since(memory: tuple[Recommendation, ...], horizon: datetime
           ) -> tuple[Recommendation, ...]:
    """The recommendations made since ``horizon``, after the newest one made before it (the one
    in force when the window starts, which shows the memory covers the window), if any."""
    before = max((r for r in memory if r.at < horizon), key=lambda r: r.at, default=None)
    return (*(() if before is None else (before,)), *(r for r in memory if r.at >= horizon))


def _not_after(memory: tuple[Recommendation, ...], now: datetime
               ) -> tuple[Recommendation, ...]:
    """``memory`` with each recommendation dated after ``now`` dated ``now``. Only a clock that
    stepped back dates one so (a leader that ran ahead, or a new leader whose clock is behind):
    left as it is, it would stay in every window until ``now`` passed it, holding scale-downs
    for as long as the step. Dated ``now`` it holds them for one whole window from now, never
    less, since it may have been made just now; dropped, a scale-down could follow at once.
    Kept so, it ages out of the window as any other."""
    if all(r.at <= now for r in memory):
        return memory
    return tuple(r if r.at <= now else Recommendation(now, r.value) for r in memory)


def _held_down(wanted: int, current: int, kept: tuple[Recommendation, ...],
               changes: tuple[Change, ...], limits: GuardLimits, now: datetime,
               fresh: bool) -> tuple[int, str]:
    """The scale-down guards: stabilization window (``kept`` from the recommendation in force at
    its start, when one was made), fresh data, cooldown."""
    allowed, reason = wanted, ""
    horizon = now - timedelta(seconds=limits.stabilization_s)
    floor = max(r.value for r in kept if r.at >= horizon)
    if floor > wanted:
        allowed, reason = min(current, floor), STABILIZATION_WINDOW
    if min(r.at for r in kept) > horizon:  # no memory of the window's start: not held so long
        allowed, reason = current, STABILIZATION_WINDOW
    if allowed < current and not fresh:
        allowed, reason = current, STALE_DATA
    last_up = max((c.at for c in changes if c.delta > 0), default=None)
    if (allowed < current and last_up is not None
            and (now - last_up).total_seconds() < limits.cooldown_s):
        allowed, reason = current, COOLDOWN
    return allowed, reason


def guard(
    target: str,
    current: int,
    wanted: int,
    memory: tuple[Recommendation, ...],
    changes: tuple[Change, ...],
    limits: GuardLimits,
    now: datetime,
    fresh: bool = True,
) -> tuple[GuardDecision, tuple[Recommendation, ...], tuple[Change, ...]]:
    """All guards for one target: (decision, new recommendation memory, new change memory)."""
    kept = (*_since(_not_after(memory, now), now - timedelta(seconds=limits.stabilization_s)),
            Recommendation(now, wanted))
    # A change made at ``now`` itself is this tick's, planned before (a retry from the same
    # snapshot): it is replaced, not counted against the disruption budget a second time.
    changes = tuple(c for c in changes if c.at != now)
    allowed, reason = wanted, ""
    if wanted != current and abs(wanted - current) <= limits.tolerance * current:
        allowed, reason = current, TOLERANCE
    elif wanted < current:
        allowed, reason = _held_down(wanted, current, kept, changes, limits, now, fresh)
    if allowed > current + limits.max_step:
        allowed, reason = current + limits.max_step, MAX_STEP
    elif allowed < current - limits.max_step:
        allowed, reason = current - limits.max_step, MAX_STEP
    keep_s = max(limits.disruption_window_s, limits.cooldown_s)
    recent = tuple(c for c in changes if c.at >= now - timedelta(seconds=keep_s))
    if allowed < current and limits.disruption_budget is not None:
        window_start = now - timedelta(seconds=limits.disruption_window_s)
        removed = -sum(c.delta for c in recent if c.delta < 0 and c.at >= window_start)
        room = max(0, limits.disruption_budget - removed)
        if current - allowed > room:
            allowed, reason = current - room, DISRUPTION_BUDGET
    if limits.budget is not None and allowed > limits.budget:
        allowed, reason = max(limits.budget, min(current, limits.budget)), BUDGET
    if allowed != current:
        recent = (*recent, Change(now, allowed - current))
    return GuardDecision(target, current, wanted, allowed, reason), kept, recent


def with_history(
    memory: GuardMemory, target: str, history: tuple[Recommendation, ...]
) -> GuardMemory:
    others = tuple((t, h) for t, h in memory.history if t != target)
    return replace(memory, history=(*others, (target, history)))


def with_changes(memory: GuardMemory, target: str, changes: tuple[Change, ...]) -> GuardMemory:
    others = tuple((t, c) for t, c in memory.changes if t != target)
    kept = (*others, (target, changes)) if changes else others
    return replace(memory, changes=kept)
