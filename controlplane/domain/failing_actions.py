"""Actions that keep failing: the same change (kind and target) failed on every deciding tick
for ``FAILING_FOR_S`` or longer, at least ``FAILING_TICKS`` of them (pure).

Each tick re-plans from the fleet it sees and applies the same absolute target again, so an
action that fails with a retryable error (an API answering 500, a webhook refusing) is retried
every tick and fails every tick, while the tick itself is ``applied``. One failure is nothing to
report: a conflict is re-read next tick, and a sharing change waits for the device plugin
(``pending``, a failed outcome) up to ``k8s.config_propagation_s`` (120 s). Failing on every
tick for 5 minutes is: ``headroom status`` names the action (problem ``failing_actions``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controlplane.domain.fleet_status import PlannedAction

#: how long an action must have failed on every deciding tick to be a problem
FAILING_FOR_S = 300
#: and on how many deciding ticks at least (a slow loop's ticks are minutes apart)
FAILING_TICKS = 3


@dataclass(frozen=True, slots=True)
class RecentPlan:
    """A deciding tick's plan: when it was made and its actions with their outcomes."""

    plan_id: int
    tick_id: int
    created_at: datetime
    actions: tuple[PlannedAction, ...]


@dataclass(frozen=True, slots=True)
class FailingAction:
    kind: str
    target: str
    ticks: int  # the consecutive deciding ticks, newest back, it failed on
    since: datetime  # the plan of the first of them
    since_tick_id: int
    message: str  # the newest failure's

    def describe(self, now_at: datetime) -> str:
        span_s = (now_at - self.since).total_seconds()
        return (f"{self.kind} {self.target} has failed on each of the last {self.ticks} "
                f"deciding ticks ({span_s:.0f} s, since tick #{self.since_tick_id}): "
                f"{self.message}")


def _failed(plan: RecentPlan) -> dict[tuple[str, str], PlannedAction]:
    return {(a.kind, a.target): a for a in plan.actions if a.ok is False}


def failing_actions(plans: Sequence[RecentPlan]) -> tuple[FailingAction, ...]:
    """The newest plan's failed actions that also failed on every plan before it back to
    ``FAILING_FOR_S`` before it, at least ``FAILING_TICKS`` in all; ``plans`` newest first. A
    plan without the action, where it succeeded or was not applied (a dry run), ends the run."""
    if not plans:
        return ()
    newest = plans[0]
    found = []
    for key, action in _failed(newest).items():
        run = 0
        for plan in plans:
            if key not in _failed(plan):
                break
            run += 1
        first = plans[run - 1]
        if run >= FAILING_TICKS and (
                newest.created_at - first.created_at).total_seconds() >= FAILING_FOR_S:
            found.append(FailingAction(action.kind, action.target, run, first.created_at,
                                       first.tick_id, action.message))
    return tuple(found)
