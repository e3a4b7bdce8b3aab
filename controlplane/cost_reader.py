"""Read the store into cost-model values: fleet snapshots sampled at a fixed step, and requests
served per model. Read-only; used by the dashboard and by ``headroom cost export``.

A snapshot pairs a reconcile tick's observed pools (GPUs billed = ready + provisioning nodes x GPUs
per node) with that tick's plan (placed segments, warm-pool GPUs). Plans are immutable once
written, so callers may cache per plan.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, Table, and_, case, func, select
from sqlmodel import SQLModel

import controlplane.store.tables  # noqa: F401  (registers the tables in the metadata)
from controlplane.domain.cost import (
    FleetSnapshot,
    GpuPrice,
    GpuUsage,
    PriceTable,
    SliceUse,
    attribute_warm,
)


def table(name: str) -> Table:
    return SQLModel.metadata.tables[name]


def as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class PlannedTick:
    tick_id: int
    plan_id: int
    at: datetime
    dry_run: bool
    warm_gpus: int


def planned_ticks(engine: Engine, since_at: datetime, until_at: datetime) -> list[PlannedTick]:
    """Ticks that produced a plan in [since_at, until_at], plus the last one before since_at."""
    ticks, plans = table("ticks"), table("plans")
    cols = (ticks.c.id, plans.c.id, ticks.c.started_at, plans.c.dry_run, plans.c.warm_gpus)
    joined = ticks.join(plans, plans.c.tick_id == ticks.c.id)
    inside = (select(*cols).select_from(joined)
              .where(and_(ticks.c.started_at >= since_at, ticks.c.started_at <= until_at))
              .order_by(ticks.c.started_at))
    before = (select(*cols).select_from(joined).where(ticks.c.started_at < since_at)
              .order_by(ticks.c.started_at.desc()).limit(1))
    with engine.connect() as connection:
        rows = list(connection.execute(before)) + list(connection.execute(inside))
    return [PlannedTick(int(r[0]), int(r[1]), as_utc(r[2]), bool(r[3]), int(r[4])) for r in rows]


def sample_ticks(ticks: Sequence[PlannedTick], since_at: datetime, until_at: datetime,
                 step_s: float) -> list[tuple[datetime, PlannedTick]]:
    """The plan in force at since_at, since_at + step, ... (the newest tick at or before each
    instant); instants before the first tick are left out."""
    times = [t.at for t in ticks]
    out: list[tuple[datetime, PlannedTick]] = []
    at = since_at
    while at <= until_at:
        i = bisect.bisect_right(times, at) - 1
        if i >= 0:
            out.append((at, ticks[i]))
        at += timedelta(seconds=step_s)
    return out


def tenants(engine: Engine) -> dict[str, str]:
    models = table("models")
    with engine.connect() as connection:
        return {str(r[0]): str(r[1]) for r in connection.execute(
            select(models.c.name, models.c.tenant))}


def billed_gpus(engine: Engine, tick_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """GPUs billed per product at each tick, from the pools of its observed snapshot."""
    ticks = table("ticks")
    out: dict[int, dict[str, int]] = {}
    ids = sorted(set(tick_ids))
    with engine.connect() as connection:
        for chunk in _chunks(ids, 200):
            for tick_id, observed_json in connection.execute(
                    select(ticks.c.id, ticks.c.observed_json).where(ticks.c.id.in_(chunk))):
                out[int(tick_id)] = billed_from_observed(observed_json)
    return out


def billed_from_observed(observed_json: str) -> dict[str, int]:
    pools = json.loads(observed_json).get("pools", [])
    billed: dict[str, int] = defaultdict(int)
    for pool in pools:
        nodes = int(pool.get("nodes_ready", 0)) + int(pool.get("nodes_pending", 0))
        billed[str(pool["product"])] += nodes * int(pool.get("gpus_per_node", 0))
    return dict(billed)


def placed_usage(engine: Engine, plan_ids: Iterable[int],
                 tenant_of: Mapping[str, str]) -> dict[int, tuple[GpuUsage, ...]]:
    """Each plan's GPUs, grouped into identical layouts (product + segments) with counts."""
    placements = table("placements")
    layouts: dict[tuple[int, str], list[tuple[str, int, int]]] = defaultdict(list)
    product_of: dict[tuple[int, str], str] = {}
    ids = sorted(set(plan_ids))
    query_cols = (placements.c.plan_id, placements.c.gpu_id, placements.c.product,
                  placements.c.model, placements.c.compute_slices, func.count())
    with engine.connect() as connection:
        for chunk in _chunks(ids, 200):
            query = (select(*query_cols).where(placements.c.plan_id.in_(chunk))
                     .group_by(*query_cols[:5]))
            for plan_id, gpu_id, product, model, slices, count in connection.execute(query):
                key = (int(plan_id), str(gpu_id))
                layouts[key].append((str(model), int(slices), int(count)))
                product_of[key] = str(product)
    counted: dict[int, Counter[tuple[str, tuple[tuple[str, int, int], ...]]]] = defaultdict(
        Counter)
    for key, segments in layouts.items():
        counted[key[0]][(product_of[key], tuple(sorted(segments)))] += 1
    return {plan_id: tuple(
        GpuUsage(product, tuple(SliceUse(m, tenant_of.get(m, "unknown"), s)
                                for m, s, n in segments for _ in range(n)), gpus)
        for (product, segments), gpus in sorted(layouts_of.items()))
        for plan_id, layouts_of in counted.items()}


def snapshots(engine: Engine, samples: Sequence[tuple[datetime, PlannedTick]],
              tenant_of: Mapping[str, str]) -> list[FleetSnapshot]:
    """Fleet snapshots at the sampled instants (billed GPUs, warm pool, placed layouts)."""
    billed = billed_gpus(engine, (t.tick_id for _, t in samples))
    placed = placed_usage(engine, (t.plan_id for _, t in samples), tenant_of)
    out = []
    for at, tick in samples:
        usage = placed.get(tick.plan_id, ())
        billed_now = billed.get(tick.tick_id, {})
        placed_count: dict[str, int] = defaultdict(int)
        for u in usage:
            placed_count[u.product] += u.gpus
        unplaced = {p: max(0, n - placed_count[p]) for p, n in billed_now.items()}
        out.append(FleetSnapshot(at, billed_now, attribute_warm(tick.warm_gpus, unplaced), usage))
    return out


@dataclass(frozen=True, slots=True)
class ServedRequests:
    """Requests of one model over a window, estimated from its load observations."""

    model: str
    demand_requests: float
    served_requests: float
    observations: int
    short_observations: int


def served_requests(engine: Engine, models: Sequence[str], since_at: datetime,
                    until_at: datetime) -> dict[str, ServedRequests]:
    """Mean demand and served rate (min(demand, capacity)) x covered seconds per model.

    Only observations at or after the first reconcile tick count: rows before it are backfilled
    demand history with no capacity."""
    obs, ticks = table("observations"), table("ticks")
    with engine.connect() as connection:
        first_tick = connection.execute(select(func.min(ticks.c.started_at))).scalar()
        if first_tick is None or not models:
            return {}
        start_at = max(since_at, as_utc(first_tick))
        served = case((obs.c.capacity_rps < obs.c.demand_rps, obs.c.capacity_rps),
                      else_=obs.c.demand_rps)
        short = case((obs.c.capacity_rps < obs.c.demand_rps, 1), else_=0)
        query = (select(obs.c.model, func.avg(obs.c.demand_rps), func.avg(served), func.count(),
                        func.sum(short), func.min(obs.c.at), func.max(obs.c.at))
                 .where(and_(obs.c.model.in_(list(models)), obs.c.at >= start_at,
                             obs.c.at < until_at))
                 .group_by(obs.c.model))
        rows = list(connection.execute(query))
    out = {}
    for model, demand, served_rps, count, shorts, first_at, last_at in rows:
        n = int(count)
        span_s = (as_utc(last_at) - as_utc(first_at)).total_seconds()
        covered_s = span_s * n / (n - 1) if n > 1 else 0.0
        out[str(model)] = ServedRequests(str(model), float(demand) * covered_s,
                                         float(served_rps) * covered_s, n, int(shorts or 0))
    return out


def _chunks(values: Sequence[int], size: int) -> Iterable[Sequence[int]]:
    for i in range(0, len(values), size):
        yield values[i:i + size]


def configured_prices(engine: Engine) -> tuple[GpuPrice, ...]:
    """The store's price table (written from the pools' configured prices), with source and date."""
    prices = table("gpu_prices")
    with engine.connect() as connection:
        rows = list(connection.execute(select(prices.c.product, prices.c.price_per_gpu_hour,
                                              prices.c.source, prices.c.as_of)))
    return tuple(GpuPrice(str(p), float(usd), str(source), str(as_of))
                 for p, usd, source, as_of in rows)


def price_table(engine: Engine) -> PriceTable:
    """Defaults from REFERENCE.md §10.1, overridden by the store's configured prices."""
    return PriceTable().with_overrides(configured_prices(engine))


def time_span(engine: Engine) -> tuple[datetime, datetime] | None:
    """First and last reconcile tick in the store (store time: virtual in the simulator)."""
    ticks = table("ticks")
    with engine.connect() as connection:
        first, last = connection.execute(select(func.min(ticks.c.started_at),
                                                func.max(ticks.c.started_at))).one()
    return (as_utc(first), as_utc(last)) if first is not None else None
