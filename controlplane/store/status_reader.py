"""Read the store's picture of the fleet and the loop for ``headroom status`` (read-only).

One connection, in one read-only transaction on PostgreSQL (REPEATABLE READ: every query sees
the same snapshot); on SQLite the plan read is bounded by the last tick read first, so a tick
recorded meanwhile never pairs with an older picture. Tables of later migrations (leases,
MIG re-layouts) are read when the store has them."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    Engine,
    Table,
    Text,
    cast,
    func,
    inspect,
    null,
    select,
)
from sqlmodel import SQLModel

from controlplane.domain.fleet_status import (
    FleetStatus,
    ForecastPoint,
    HeldChange,
    LeaseStatus,
    ModelStatus,
    PlannedAction,
    PlanStatus,
    PoolStatus,
    RelayoutStatus,
    TickSummary,
    forecast_point,
)
from controlplane.domain.forecast_accuracy import ACCURACY_WINDOW_S
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.domain.planner import wanted_replicas
from controlplane.domain.store_clock import store_now
from controlplane.domain.tick_writers import (
    WRITER_LOOKBACK_TICKS,
    LeadershipChange,
    WrittenTick,
    leadership_change,
)
from controlplane.store import codec, tick_fence
from controlplane.store.action_failures import failing_now
from controlplane.store.fleet_pause import fleet_pause
from controlplane.store.guard_intent import unrecorded_tick
from controlplane.store.hints import hints_ending_after
from controlplane.store.ledger import recent_accuracy
from controlplane.store.pauses import paused_models
from controlplane.store.placement_journal import placement_status
from controlplane.store.profiles import newest_profiles
from controlplane.store.relayout import MigRelayoutRecord
from controlplane.store.tables import (
    ActionRecord,
    ForecastRecord,
    GpuPriceRecord,
    LeaseRowRecord,
    ModelRecord,
    OutcomeRecord,
    PlanRecord,
    TickRecord,
)
from controlplane.store.utc import as_utc

#: how many ticks before an unsynced last tick are searched for the fleet last seen
SYNCED_LOOKBACK_TICKS = 240


def read_fleet_status(engine: Engine, store: str, lease_name: str,
                      wall_now: datetime | None = None) -> FleetStatus:
    """Everything ``headroom status`` shows; ``store`` is the redacted URL to name it by. The
    demand hints are those not ended at the store's now (``store_now``: a simulated fleet's
    last tick, else ``wall_now``; without it, the last tick)."""
    tables = set(inspect(engine).get_table_names())
    tick_columns = {c["name"] for c in inspect(engine).get_columns("ticks")}
    has_pauses = "paused_at" in {c["name"] for c in inspect(engine).get_columns("models")}
    has_notes = "notes_json" in {c["name"] for c in inspect(engine).get_columns("forecasts")}
    has_kept = "kept_json" in {c["name"] for c in inspect(engine).get_columns("plans")}
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            connection = connection.execution_options(isolation_level="REPEATABLE READ",
                                                      postgresql_readonly=True)
        with connection.begin():
            tick = _last_tick(connection, "writer" in tick_columns)
            seen = None if tick is None else fleet_seen(connection, tick.tick_id)
            observed = None if seen is None else seen[1]
            lease = _lease(connection, lease_name) if "leases" in tables else None
            return FleetStatus(
                store=store, last_tick=tick,
                fleet_tick_id=None if seen is None else seen[0],
                fleet_at=None if observed is None else as_utc(observed.synced_at),
                lease=lease,
                models=_models(connection, observed, has_pauses, has_notes,
                               {} if seen is None else _wanted(connection, seen[0])),
                pools=_pools(connection, observed),
                plan=None if tick is None else _plan(connection, tick.tick_id, has_kept),
                relayouts=_relayouts(connection) if "mig_relayouts" in tables else (),
                profiles=newest_profiles(connection) if "profiles_json" in tick_columns else (),
                hints=(hints_ending_after(connection, _hints_now(tick, lease, wall_now))
                       if "demand_hints" in tables else ()),
                placement=(placement_status(connection) if "placement_journal" in tables
                           else None),
                accuracy=(() if tick is None or "issued_forecasts" not in tables
                          else recent_accuracy(connection, tick.started_at
                                               - timedelta(seconds=ACCURACY_WINDOW_S))),
                leadership=(None if tick is None or "writer" not in tick_columns
                            else tick_leadership(connection, tick.tick_id)),
                unrecorded=(unrecorded_tick(connection) if "guard_intents" in tables
                            else None),
                fence=tick_fence.newest(connection) if "tick_fences" in tables else None,
                failing=() if tick is None else failing_now(connection, tick.tick_id),
                fleet_pause=fleet_pause(connection) if "fleet_pause" in tables else None)


def _table(record: type[SQLModel]) -> Table:
    return SQLModel.metadata.tables[str(record.__tablename__)]


def _hints_now(tick: TickSummary | None, lease: LeaseStatus | None,
               wall_now: datetime | None) -> datetime | None:
    """When the hints status lists must not have ended: the store's now (``wall_now`` given;
    a simulated fleet's, its lease in the store, is its last tick), else the last tick; None
    (every stored hint: one announced before the loop starts) when there is neither."""
    last_at = None if tick is None else tick.started_at
    if wall_now is not None:
        return store_now(lease is not None, last_at, wall_now).at
    return last_at


def _last_tick(connection: Connection, has_writer: bool) -> TickSummary | None:
    """The newest tick; its writer read when the store has the column (migration 0016)."""
    t = _table(TickRecord).c
    writer = t.writer if has_writer else null().label("writer")
    row = connection.execute(select(t.id, t.started_at, t.finished_at, t.status, t.reason,
                                    t.gpus_ready, t.demand_rps, t.capacity_rps, t.observed_json,
                                    writer)
                             .order_by(t.id.desc()).limit(1)).first()
    if row is None:
        return None
    count = connection.execute(select(func.count()).select_from(t.id.table)).scalar_one()
    observed = codec.observed_from_json(row.observed_json)
    return TickSummary(
        tick_id=int(row.id), started_at=as_utc(row.started_at),
        finished_at=as_utc(row.finished_at), status=str(row.status), reason=str(row.reason),
        gpus_ready=int(row.gpus_ready), demand_rps=float(row.demand_rps),
        capacity_rps=float(row.capacity_rps), synced=observed.synced, notes=observed.notes,
        ticks=int(count), writer=None if row.writer is None else str(row.writer))


def tick_leadership(connection: Connection, last_tick_id: int) -> LeadershipChange | None:
    """The newest change of writer within the ``WRITER_LOOKBACK_TICKS`` before the last tick
    read (one bounded read of three small columns, newest first by id); ``headroom status``'s
    and the dashboard's Overview's. The store has the column (migration 0016)."""
    t = _table(TickRecord).c
    rows = connection.execute(select(t.id, t.started_at, t.writer).where(t.id <= last_tick_id)
                              .order_by(t.id.desc()).limit(WRITER_LOOKBACK_TICKS + 1)).all()
    return leadership_change(
        WrittenTick(int(r.id), as_utc(r.started_at), None if r.writer is None else str(r.writer))
        for r in rows)


def read_the_fleet(bind: Connection | Engine) -> ColumnElement[bool]:
    """Whether a tick read the fleet, as a condition on the ticks table in the store's SQL
    dialect: its ``synced`` column (migration 0026), else (a store not upgraded to it, a tick
    recorded by an older Headroom since) its stored snapshot's flag (``synced_in_snapshot``).
    A tick that could not read the fleet (the API unreachable or rejecting the read, a snapshot
    not synced, a store that failed before the read) records it False, and its totals (GPUs
    ready, demand, capacity) are then not the fleet's. ``headroom status`` and the dashboard
    pick the fleet they show by it."""
    t = _table(TickRecord).c
    flag = synced_in_snapshot(t.observed_json, bind.dialect.name)
    if "synced" not in {c["name"] for c in inspect(bind).get_columns("ticks")}:
        return flag
    return func.coalesce(t.synced, flag)


def synced_in_snapshot(observed_json: ColumnElement[str], dialect: str) -> ColumnElement[bool]:
    """A tick's stored snapshot's (``observed_json``) ``synced`` flag in SQL ``dialect``, absent
    (a store older than the flag) meaning read; migration 0026 fills the column by this rule."""
    if dialect == "postgresql":
        flag = cast(cast(observed_json, JSON)["synced"], Text)
        return func.coalesce(flag, "true") != "false"
    return func.coalesce(func.json_extract(observed_json, "$.synced"), 1) != 0


def fleet_seen(connection: Connection, tick_id: int) -> tuple[int, ObservedState] | None:
    """The fleet as the newest tick that could read it saw it: tick ``tick_id``'s, unless it
    could not read the fleet (``read_the_fleet``); then the newest that could of the
    ``SYNCED_LOOKBACK_TICKS`` before it (None when there is none)."""
    t = _table(TickRecord).c
    searched = (select(t.id).where(t.id <= tick_id).order_by(t.id.desc())
                .limit(SYNCED_LOOKBACK_TICKS + 1))
    row = connection.execute(
        select(t.id, t.observed_json)
        .where(t.id.in_(searched.scalar_subquery()),
               read_the_fleet(connection))
        .order_by(t.id.desc()).limit(1)).first()
    return None if row is None else (int(row.id), codec.observed_from_json(row.observed_json))


def _wanted(connection: Connection, tick_id: int) -> dict[str, int]:
    """Model -> the replica target tick ``tick_id`` wanted, from the guard memory it stored
    (``planner.wanted_replicas``)."""
    t = _table(TickRecord).c
    row = connection.execute(select(t.started_at, t.guard_memory_json)
                             .where(t.id == tick_id)).first()
    if row is None:
        return {}
    return wanted_replicas(codec.guard_memory_from_json(row.guard_memory_json),
                           as_utc(row.started_at))


def _models(connection: Connection, observed: ObservedState | None,
            has_pauses: bool, has_notes: bool, wanted: dict[str, int]) -> tuple[ModelStatus, ...]:
    """Every model the store lists (with its latency SLO), then any other the fleet's tick saw,
    by name; with the pause of each paused model (when the store has the columns: migration
    0022), the notes of its newest forecast (migration 0023) and the replica target the fleet's
    tick wanted (``wanted``: model -> replicas) of each model it sized."""
    m, f = _table(ModelRecord).c, _table(ForecastRecord).c
    listed = {str(r.name): (str(r.tenant), float(r.latency_slo_ms))
              for r in connection.execute(select(m.name, m.tenant, m.latency_slo_ms))}
    newest = select(func.max(f.id).label("id")).group_by(f.model).subquery()
    notes = f.notes_json if has_notes else null().label("notes_json")
    forecasts = {str(r.model): forecast_point(
        str(r.method), str(r.fallback_reason), as_utc(r.computed_at), as_utc(r.origin_at),
        int(r.step_s), json.loads(r.p50_json), json.loads(r.p90_json),
        codec.notes_from_json(r.notes_json))
        for r in connection.execute(select(f.model, f.method, f.fallback_reason, f.computed_at,
                                           f.origin_at, f.step_s, f.p50_json, f.p90_json, notes)
                                    .join(newest, newest.c.id == f.id))}
    seen = {o.name: o for o in (observed.models if observed is not None else ())}
    names = sorted(set(listed) | set(seen))
    pauses = {p.model: p for p in paused_models(connection)} if has_pauses else {}
    out = []
    for name in names:
        tenant, slo_ms = listed.get(name, ("", None))
        out.append(replace(_model(name, tenant, seen.get(name), forecasts.get(name)),
                           pause=pauses.get(name), listed=name in listed,
                           replicas_desired=wanted.get(name), latency_slo_ms=slo_ms))
    return tuple(out)


def _model(name: str, tenant: str, seen: ObservedModel | None,
           forecast: ForecastPoint | None) -> ModelStatus:
    if seen is None:
        return ModelStatus(name, tenant, False, False, None, None, None, None, None, forecast)
    return ModelStatus(name, tenant, True, seen.demand_measured,
                       seen.arrivals_rps if seen.demand_measured else None, seen.replicas_ready,
                       seen.replicas_pending, seen.replicas_target, seen.capacity_rps, forecast,
                       queued_requests=seen.queued_requests,
                       kv_cache_usage=seen.kv_cache_usage, latency_ms=seen.latency_ms,
                       replicas_unscheduled=seen.replicas_unscheduled)


def _pools(connection: Connection, observed: ObservedState | None) -> tuple[PoolStatus, ...]:
    if observed is None:
        return ()
    g = _table(GpuPriceRecord).c
    prices = {str(r.product): (float(r.price_per_gpu_hour), str(r.source))
              for r in connection.execute(select(g.product, g.price_per_gpu_hour, g.source))}
    return tuple(PoolStatus(p, *prices.get(p.product, (None, ""))) for p in observed.pools)


def _plan(connection: Connection, last_tick_id: int, has_kept: bool) -> PlanStatus | None:
    """The newest plan of a tick up to the last one read (a skipped or failed tick has none).
    Its $/h adds the replicas it keeps beyond its placement (migration 0024) at the store's
    prices, as the placement priced its own GPUs (a product without one: 0)."""
    p, a, o = _table(PlanRecord).c, _table(ActionRecord).c, _table(OutcomeRecord).c
    kept_json = p.kept_json if has_kept else null().label("kept_json")
    row = connection.execute(select(p.id, p.tick_id, p.created_at, p.revision, p.dry_run,
                                    p.cost_per_hour, p.gpus_placed, p.warm_gpus, p.unplaced_json,
                                    kept_json)
                             .where(p.tick_id <= last_tick_id)
                             .order_by(p.id.desc()).limit(1)).first()
    if row is None:
        return None
    rows = connection.execute(
        select(a.kind, a.target, a.from_value, a.to_value, a.reason, a.skipped, o.ok, o.message)
        .select_from(_table(ActionRecord).outerjoin(_table(OutcomeRecord), o.action_id == a.id))
        .where(a.plan_id == row.id).order_by(a.ordinal)).all()
    actions = tuple(PlannedAction(str(r.kind), str(r.target), int(r.from_value), int(r.to_value),
                                  str(r.reason), None if r.ok is None else bool(r.ok),
                                  str(r.message or "")) for r in rows if not r.skipped)
    held = tuple(HeldChange(str(r.target), int(r.from_value), int(r.to_value), str(r.reason))
                 for r in rows if r.skipped)
    kept = tuple(k for k, _ in codec.kept_from_json(row.kept_json))
    g = _table(GpuPriceRecord).c
    prices = {str(r.product): float(r.price_per_gpu_hour) for r in connection.execute(
        select(g.product, g.price_per_gpu_hour))} if kept else {}
    kept_usd = sum(k.gpus * prices.get(k.product, 0.0) for k in kept)
    return PlanStatus(int(row.id), int(row.tick_id), as_utc(row.created_at), int(row.revision),
                      bool(row.dry_run), float(row.cost_per_hour) + kept_usd,
                      int(row.gpus_placed), int(row.warm_gpus),
                      tuple(str(u) for u in json.loads(row.unplaced_json)), actions, held, kept)


def _lease(connection: Connection, name: str) -> LeaseStatus | None:
    c = _table(LeaseRowRecord).c
    row = connection.execute(select(c.name, c.holder, c.acquired_at, c.renewed_at, c.duration_s,
                                    c.transitions).where(c.name == name)).first()
    if row is None:
        return None
    return LeaseStatus(str(row.name), str(row.holder),
                       None if row.acquired_at is None else as_utc(row.acquired_at),
                       None if row.renewed_at is None else as_utc(row.renewed_at),
                       int(row.duration_s), int(row.transitions))


def _relayouts(connection: Connection) -> tuple[RelayoutStatus, ...]:
    c = _table(MigRelayoutRecord).c
    rows = connection.execute(select(c.relayout_id, c.node, c.pool, c.product, c.from_config,
                                     c.to_config, c.phase, c.started_at, c.updated_at,
                                     c.deadline_at, c.wait_reason, c.alert)
                              .where(c.active.is_(True)).order_by(c.started_at))
    return tuple(RelayoutStatus(
        str(r.relayout_id), str(r.node), str(r.pool), str(r.product), str(r.from_config),
        str(r.to_config), str(r.phase), as_utc(r.started_at), as_utc(r.updated_at),
        None if r.deadline_at is None else as_utc(r.deadline_at), str(r.wait_reason),
        str(r.alert)) for r in rows)
