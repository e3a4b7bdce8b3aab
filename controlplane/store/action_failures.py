"""Read the recent plans' failed actions for ``headroom status`` (read-only): the actions of
the newest plan that failed on every deciding tick for ``FAILING_FOR_S`` (judged by
``domain.failing_actions``)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Connection, select
from sqlmodel import SQLModel

from controlplane.domain.failing_actions import (
    FAILING_FOR_S,
    FailingAction,
    RecentPlan,
    failing_actions,
)
from controlplane.domain.fleet_status import PlannedAction
from controlplane.store.utc import as_utc

#: the most plans read back (a tick every second over the window, with room to spare)
RECENT_PLANS_READ = 1000


def failing_now(connection: Connection, last_tick_id: int) -> tuple[FailingAction, ...]:
    """The newest plan (of a tick up to ``last_tick_id``) and those before it back to the first
    made ``FAILING_FOR_S`` or more before it, with their failed actions; nothing more is read
    when the newest plan has none."""
    tables = SQLModel.metadata.tables
    p, a, o = tables["plans"].c, tables["actions"].c, tables["outcomes"].c
    heads = connection.execute(select(p.id, p.tick_id, p.created_at)
                               .where(p.tick_id <= last_tick_id)
                               .order_by(p.id.desc()).limit(RECENT_PLANS_READ)).all()
    if not heads:
        return ()
    horizon = as_utc(heads[0].created_at) - timedelta(seconds=FAILING_FOR_S)
    read = []
    for head in heads:
        read.append(head)
        if as_utc(head.created_at) <= horizon:
            break
    failed = (select(a.plan_id, a.kind, a.target, o.message)
              .select_from(tables["actions"].join(tables["outcomes"], o.action_id == a.id))
              .where(a.skipped.is_(False), o.ok.is_(False)).order_by(a.ordinal))
    rows = connection.execute(failed.where(a.plan_id == heads[0].id)).all()
    if rows and len(read) > 1:
        rows = connection.execute(failed.where(a.plan_id >= read[-1].id,
                                               a.plan_id <= heads[0].id)).all()
    by_plan: dict[int, list[PlannedAction]] = {}
    for r in rows:
        by_plan.setdefault(int(r.plan_id), []).append(PlannedAction(
            str(r.kind), str(r.target), 0, 0, "", False, str(r.message or "")))
    return failing_actions([RecentPlan(int(h.id), int(h.tick_id), as_utc(h.created_at),
                                       tuple(by_plan.get(int(h.id), ()))) for h in read])
