"""Store retention: delete what is older than the retention window, in one transaction.

Every reconcile tick adds a tick with its plan, actions, outcomes and placements (tens of rows at
a 30 s interval), every forecast refresh a forecast per model, every tick an observation per
model; without pruning a store grows without bound. ``prune_store`` deletes the rows from before
``before_at``: observations, forecasts (each model's newest stays, so KEDA and the dashboard
still see why a model has none fresher), and ticks with everything hanging off them (the newest
tick stays: a restarted loop resumes from its guard memory and observed fleet), demand hints that
ended before it (``headroom hint list --all`` shows the rest) and finished MIG re-layouts last
changed before it (an active one stays however old: a restarted process resumes it; the refusal
backoff reads only the last ``relayout_retry_after_s``). Children go before their parents (SQLite
enforces the foreign keys), all or nothing. The ``leases`` table is never pruned: its row says who
runs the store's simulated fleet, however long ago it renewed; nor are the placement tables, which
prune their own tombstones (``controlplane.store.placement_journal``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, func
from sqlmodel import Session, col, delete, select

from controlplane.store.hints import DemandHintRecord
from controlplane.store.relayout import MigRelayoutRecord
from controlplane.store.tables import (
    ActionRecord,
    ForecastRecord,
    ObservationRecord,
    OutcomeRecord,
    PlacementRecord,
    PlanRecord,
    TickRecord,
)


@dataclass(frozen=True, slots=True)
class Pruned:
    """Rows deleted per table."""

    ticks: int = 0
    plans: int = 0
    actions: int = 0
    outcomes: int = 0
    placements: int = 0
    forecasts: int = 0
    observations: int = 0
    hints: int = 0
    relayouts: int = 0

    @property
    def total(self) -> int:
        return (self.ticks + self.plans + self.actions + self.outcomes + self.placements
                + self.forecasts + self.observations + self.hints + self.relayouts)


def retention_cutoff(now: datetime, retention_s: float) -> datetime | None:
    """The instant before which rows go; None when ``retention_s`` is 0 (keep everything)."""
    return now - timedelta(seconds=retention_s) if retention_s > 0 else None


def prune_store(engine: Engine, before_at: datetime) -> Pruned:
    with Session(engine) as session:
        # read once: on PostgreSQL each statement sees the ticks committed before it, so a
        # subquery would name a tick saved meanwhile as the newest, and the tick before it,
        # whose plans the statements before kept, would go without them
        newest_tick = session.exec(select(func.max(TickRecord.id))).one()
        ticks = select(TickRecord.id).where(col(TickRecord.started_at) < before_at,
                                            col(TickRecord.id) != newest_tick)
        plans = select(PlanRecord.id).where(col(PlanRecord.tick_id).in_(ticks))
        actions = select(ActionRecord.id).where(col(ActionRecord.plan_id).in_(plans))
        newest_forecasts = select(func.max(ForecastRecord.id)).group_by(
            col(ForecastRecord.model))
        counts = [cast(CursorResult[Any], session.execute(statement)).rowcount for statement in (
            delete(OutcomeRecord).where(col(OutcomeRecord.action_id).in_(actions)),
            delete(ActionRecord).where(col(ActionRecord.plan_id).in_(plans)),
            delete(PlacementRecord).where(col(PlacementRecord.plan_id).in_(plans)),
            delete(PlanRecord).where(col(PlanRecord.tick_id).in_(ticks)),
            delete(TickRecord).where(col(TickRecord.id).in_(ticks)),
            delete(ForecastRecord).where(col(ForecastRecord.computed_at) < before_at,
                                         col(ForecastRecord.id).not_in(newest_forecasts)),
            delete(ObservationRecord).where(col(ObservationRecord.at) < before_at),
            delete(DemandHintRecord).where(col(DemandHintRecord.end_at) < before_at),
            delete(MigRelayoutRecord).where(col(MigRelayoutRecord.active).is_(False),
                                            col(MigRelayoutRecord.updated_at) < before_at),
        )]
        session.commit()
    (outcomes, actions_n, placements, plans_n, ticks_n, forecasts, observations, hints,
     relayouts) = counts
    return Pruned(ticks_n, plans_n, actions_n, outcomes, placements, forecasts, observations,
                  hints, relayouts)
