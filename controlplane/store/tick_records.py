"""A tick report's rows: the tick, and its plan with actions, outcomes, skipped changes and
placements, added to the caller's session (``Store.save_tick`` commits them in one
transaction, after its fencing check)."""

from __future__ import annotations

import json

from sqlmodel import Session, col, select

from controlplane.domain.actions import ActionOutcome
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.store import codec
from controlplane.store.tables import (
    ActionRecord,
    ModelRecord,
    OutcomeRecord,
    PlacementRecord,
    PlanRecord,
    TickRecord,
)


def add_tick(session: Session, report: TickReport) -> int:
    """Add ``report``'s rows to ``session`` (flushed, not committed); the tick's id."""
    # both totals over the same models, those whose load was measured (ObservedState)
    demand_rps, capacity_rps = report.observed.measured_load_rps()
    tick = TickRecord(
        started_at=report.started_at, finished_at=report.finished_at,
        status=report.status.value, reason=report.reason,
        gpus_ready=report.observed.gpus_ready(), demand_rps=demand_rps,
        capacity_rps=capacity_rps,
        observed_json=codec.observed_to_json(report.observed),
        guard_memory_json=codec.guard_memory_to_json(report.guard_memory),
        profiles_json=codec.profiles_to_json(report.profiles) if report.profiles
        else None, writer=report.writer, synced=report.observed.synced)
    session.add(tick)
    session.flush()
    assert tick.id is not None
    if report.plan is not None and report.placement is not None:
        _add_plan(session, tick.id, report)
    return tick.id


def _add_plan(session: Session, tick_id: int, report: TickReport) -> None:
    assert report.plan is not None and report.placement is not None
    placement = report.placement
    # each segment's and kept replica's tenant as the models table has it now: showback of
    # this plan keeps it when the model is later renamed, removed or moved to another tenant
    names = sorted({s.model for s in placement.segments} | {k.model for k in report.plan.kept})
    tenant_of = dict(session.exec(
        select(ModelRecord.name, ModelRecord.tenant)
        .where(col(ModelRecord.name).in_(names))).all()) if names else {}
    plan_row = PlanRecord(
        tick_id=tick_id, created_at=report.plan.created_at, revision=placement.revision,
        dry_run=report.status is TickStatus.DRY_RUN, cost_per_hour=placement.cost_per_hour,
        gpus_placed=sum(len(ids) for _, ids in placement.gpu_ids_by_product),
        warm_gpus=sum(w.gpus for w in placement.warm_pools),
        warm_gpus_json=json.dumps({p: placement.warm_gpus_for(p) for p in sorted(
            {w.product for w in placement.warm_pools})}),
        unplaced_json=json.dumps(list(placement.unplaced)), rendered=report.plan.render(),
        kept_json=codec.kept_to_json(report.plan.kept, tenant_of))
    session.add(plan_row)
    session.flush()
    assert plan_row.id is not None
    # outcomes follow the plan's actions in order (none in a dry run); a node may have two
    # actions (sharing, then its re-layout), so they are paired by position, not by target
    # (one flush for all the actions: their ids come back in one batched insert, not one
    # round trip per action)
    outcomes: list[ActionOutcome | None] = list(report.outcomes)
    outcomes += [None] * (len(report.plan.actions) - len(outcomes))
    rows = [ActionRecord(
        plan_id=plan_row.id, ordinal=ordinal, kind=action.kind, target=action.target,
        from_value=action.from_value, to_value=action.to_value, reason=action.reason)
        for ordinal, action in enumerate(report.plan.actions)]
    session.add_all(rows)
    session.flush()
    session.add_all([OutcomeRecord(action_id=row.id, ok=outcome.ok,
                                   retryable=outcome.retryable, message=outcome.message,
                                   applied_at=report.finished_at)
                     for row, outcome in zip(rows, outcomes, strict=False)
                     if outcome is not None and row.id is not None])
    for ordinal, skip in enumerate(report.plan.skipped, start=len(report.plan.actions)):
        session.add(ActionRecord(plan_id=plan_row.id, ordinal=ordinal, kind="skipped",
                                 target=skip.target, from_value=skip.kept,
                                 to_value=skip.wanted, reason=skip.reason, skipped=True))
    session.add_all([PlacementRecord(
        plan_id=plan_row.id, model=s.model, gpu_id=s.gpu_id, product=s.product, mode=s.mode,
        mig_profile=s.mig_profile, mig_start=s.mig_start, compute_slices=s.compute_slices,
        throughput_rps=s.throughput_rps, tenant=tenant_of.get(s.model), gpus=s.gpus,
        gpu_index=s.gpu_index)
        for s in placement.segments])
