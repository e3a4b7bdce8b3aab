"""``headroom status --json``: the status as one JSON document (stable keys, ISO 8601 UTC times,
numbers as numbers, no NaN). Pure functions of the status and its health; ``status_view`` renders
the same content as Rich tables."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from controlplane.domain.fleet_status import (
    FleetBill,
    FleetStatus,
    ForecastPoint,
    Health,
    ModelStatus,
    age_s,
    fleet_bill,
)
from controlplane.domain.forecast_accuracy import ACCURACY_WINDOW_S, ForecastAccuracy
from controlplane.domain.pause import ModelPause
from controlplane.domain.slo import slo_shortfalls, slo_status
from controlplane.domain.timestamps import utc_text


def listed_models(status: FleetStatus) -> frozenset[str]:
    """The models the store's models table lists (a hint of another is marked not listed)."""
    return frozenset(m.name for m in status.models if m.listed)


def utc_or_none(value: datetime | None) -> str | None:
    """``value`` in UTC with a Z (``utc_text``); None for None."""
    return None if value is None else utc_text(value)


def pause_json(pause: ModelPause | None) -> dict[str, Any] | None:
    """A model's pause in ``status --json`` and ``models list --json`` alike: its time in UTC
    with a Z, ``paused_by`` null when no login name was known."""
    if pause is None:
        return None
    return {"replicas": pause.replicas, "paused_at": utc_or_none(pause.paused_at),
            "paused_by": pause.paused_by or None}


def _forecast(point: ForecastPoint | None) -> dict[str, Any] | None:
    if point is None:
        return None
    return {"method": point.method, "fallback_reason": point.fallback_reason,
            "computed_at": utc_or_none(point.computed_at),
            "origin_at": utc_or_none(point.origin_at),
            "target_at": utc_or_none(point.target_at), "ahead_s": point.ahead_s,
            "p50_rps": point.p50_rps, "p90_rps": point.p90_rps, "notes": list(point.notes)}


def slo_signals(model: ModelStatus) -> tuple[float, float, float, float, float, float]:
    """What ``controlplane.domain.slo`` judges a model by, as the newest tick read it: demand
    (NaN when not observed or not measured), capacity, queue, KV cache, latency and its SLO
    (NaN where not read or not listed)."""
    def number(value: float | None) -> float:
        return math.nan if value is None else value

    measured = model.observed and model.demand_measured
    return (number(model.observed_rps if measured else None), number(model.capacity_rps),
            number(model.queued_requests), number(model.kv_cache_usage),
            number(model.latency_ms), number(model.latency_slo_ms))


def slo_judgement(model: ModelStatus) -> dict[str, Any]:
    """``slo_status`` (short; ok; unknown: not observed or its load not measured, and no
    signal read short) and ``short_of_slo``, its reasons (capacity, queue, kv_cache, latency),
    as the dashboard's Overview reads them (the status text's ``slo`` column too)."""
    read = slo_signals(model)
    return {"slo_status": slo_status(*read), "short_of_slo": list(slo_shortfalls(*read))}


def _accuracy(found: ForecastAccuracy | None) -> dict[str, Any] | None:
    return None if found is None else {"window_s": ACCURACY_WINDOW_S, "scored": found.scored,
                                       "wape_ratio": found.wape, "p90_coverage": found.p90_coverage}


def finite_numbers(value: Any) -> Any:
    """``value`` with each NaN or infinite float (a corrupt stored forecast, say) as None, so
    the document is JSON (``json.dumps`` would write NaN / Infinity, which JSON has not)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_numbers(v) for v in value]
    return value


def status_document(status: FleetStatus, health: Health) -> dict[str, Any]:
    """The status as one JSON-ready document (non-finite numbers as None)."""
    document: dict[str, Any] = finite_numbers(_document(status, health))
    return document


def _document(status: FleetStatus, health: Health) -> dict[str, Any]:
    now = health.checked_at
    accuracy = {a.model: a for a in status.accuracy}
    tick, lease, plan = status.last_tick, status.lease, status.plan
    change = status.leadership
    listed = listed_models(status)
    return {
        "store": status.store,
        "checked_at": utc_or_none(now),
        "healthy": health.healthy,
        "problems": [{"code": p.code, "message": p.message} for p in health.problems],
        "max_tick_age_s": health.max_tick_age_s,
        # what the loop's liveness was judged by: the last tick's age, or a running simulated
        # fleet's lease renewal (its ticks are on its own clock)
        "judged_by": "last_tick" if health.lease_age_s is None else "lease",
        "last_tick": None if tick is None else {
            "id": tick.tick_id, "started_at": utc_or_none(tick.started_at),
            "finished_at": utc_or_none(tick.finished_at), "age_s": health.tick_age_s,
            "status": tick.status, "reason": tick.reason, "gpus_ready": tick.gpus_ready,
            "demand_rps": tick.demand_rps, "capacity_rps": tick.capacity_rps,
            "synced": tick.synced, "notes": list(tick.notes), "ticks_stored": tick.ticks,
            "written_by": tick.writer},
        "leadership_change": None if change is None else {
            "from": change.previous_writer, "to": change.writer,
            "at": utc_or_none(change.changed_at),
            "first_tick_id": change.first_tick_id,
            "previous_tick_at": utc_or_none(change.previous_tick_at)},
        "unrecorded_tick": None if status.unrecorded is None else {
            "started_at": utc_or_none(status.unrecorded.started_at),
            "age_s": age_s(status.unrecorded.started_at, now),
            "written_by": status.unrecorded.writer},
        "fleet_pause": None if status.fleet_pause is None else {
            "paused_at": utc_or_none(status.fleet_pause.paused_at),
            "paused_by": status.fleet_pause.paused_by or None,
            "reason": status.fleet_pause.why or None},
        "fence": None if status.fence is None else {
            "token": status.fence.token, "holder": status.fence.holder or None,
            "claimed_at": utc_or_none(status.fence.claimed_at),
            "claimed_age_s": age_s(status.fence.claimed_at, now)},
        "fleet": None if status.fleet_tick_id is None else {
            "tick_id": status.fleet_tick_id, "observed_at": utc_or_none(status.fleet_at)},
        "lease": None if lease is None else {
            "name": lease.name, "holder": lease.holder or None,
            "acquired_at": utc_or_none(lease.acquired_at),
            "renewed_at": utc_or_none(lease.renewed_at),
            "renewed_age_s": age_s(lease.renewed_at, now), "duration_s": lease.duration_s,
            "transitions": lease.transitions},
        "models": [{
            "name": m.name, "tenant": m.tenant, "observed": m.observed,
            "demand_measured": m.demand_measured, "observed_rps": m.observed_rps,
            "replicas_ready": m.replicas_ready, "replicas_pending": m.replicas_pending,
            "replicas_unscheduled": m.replicas_unscheduled,
            "replicas_target": m.replicas_target, "replicas_desired": m.replicas_desired,
            "capacity_rps": m.capacity_rps, "queued_requests": m.queued_requests,
            "kv_cache_usage": m.kv_cache_usage, "latency_ms": m.latency_ms,
            "latency_slo_ms": m.latency_slo_ms, **slo_judgement(m),
            "forecast": _forecast(m.forecast), "hint_floor_rps": m.hint_floor_rps,
            "forecast_accuracy": _accuracy(accuracy.get(m.name)),
            "paused": pause_json(m.pause)} for m in status.models],
        "pools": [{
            "name": p.pool.name, "product": p.pool.product,
            "gpus_per_node": p.pool.gpus_per_node, "nodes_ready": p.pool.nodes_ready,
            "nodes_pending": p.pool.nodes_pending, "target_nodes": p.pool.target_nodes,
            "price_per_gpu_hour": p.price_per_gpu_hour,
            "price_source": p.price_source} for p in status.pools],
        "billed": None if not status.pools else _bill_json(fleet_bill(status.pools)),
        "plan": None if plan is None else {
            "id": plan.plan_id, "tick_id": plan.tick_id, "created_at": utc_or_none(plan.created_at),
            "revision": plan.revision, "dry_run": plan.dry_run,
            "cost_per_hour": plan.cost_per_hour, "gpus_placed": plan.gpus_placed,
            "warm_gpus": plan.warm_gpus, "unplaced": list(plan.unplaced),
            "kept": [{"model": k.model, "replicas": k.replicas, "product": k.product,
                      "gpus": k.gpus} for k in plan.kept],
            "actions": [{"kind": a.kind, "target": a.target, "from": a.from_value,
                         "to": a.to_value, "reason": a.reason, "ok": a.ok,
                         "message": a.message} for a in plan.actions],
            "held": [{"target": h.target, "kept": h.kept, "wanted": h.wanted,
                      "reason": h.reason} for h in plan.held]},
        "load_unmeasured": list(load_unmeasured(status)),
        "failing_actions": [{
            "kind": f.kind, "target": f.target, "ticks": f.ticks, "since": utc_or_none(f.since),
            "since_tick_id": f.since_tick_id, "message": f.message} for f in status.failing],
        "profiles": [{
            "model": c.model, "offline_rps": c.offline_rps, "corrected_rps": c.corrected_rps,
            "factor": c.factor, "samples_used": c.samples_used, "reason": c.reason}
            for c in status.profiles],
        "placement": None if status.placement is None else {
            "bindings": status.placement.bindings, "nodes": status.placement.nodes,
            "journal_version": status.placement.version,
            "plan_revision": status.placement.plan_revision,
            "changed_by": status.placement.changed_by or None,
            "changed_at": utc_or_none(status.placement.changed_at)},
        "hints": [{
            "id": h.hint_id, "model": h.model, "model_listed": h.model in listed,
            "rate_rps": h.rate_rps, "start_at": utc_or_none(h.start_at),
            "end_at": utc_or_none(h.end_at),
            "reason": h.reason} for h in status.hints],
        "relayouts": [{
            "id": r.relayout_id, "node": r.node, "pool": r.pool, "product": r.product,
            "from_config": r.from_config, "to_config": r.to_config, "phase": r.phase,
            "started_at": utc_or_none(r.started_at), "updated_at": utc_or_none(r.updated_at),
            "deadline_at": utc_or_none(r.deadline_at), "wait_reason": r.wait_reason,
            "alert": r.alert} for r in status.relayouts],
    }


def load_unmeasured(status: FleetStatus) -> tuple[str, ...]:
    """The models the fleet's tick saw whose load it could not measure."""
    return tuple(m.name for m in status.models if m.observed and not m.demand_measured)


def _bill_json(bill: FleetBill) -> dict[str, Any]:
    return {"gpus": bill.gpus, "cost_per_hour": bill.usd_per_hour,
            "unpriced_pools": list(bill.unpriced)}
