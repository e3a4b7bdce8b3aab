"""Read the store into cost-model values: fleet snapshots sampled at a fixed step, and requests
served per model. Read-only; used by the dashboard and by ``headroom cost export``.

A snapshot pairs a reconcile tick's observed pools (GPUs billed: of the ready and provisioning
nodes, as the nodes report them, else GPUs per node) with that tick's plan (placed segments,
warm-pool GPUs). Plans are immutable once written, so callers may cache per plan.
"""

from __future__ import annotations

import bisect
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Engine,
    String,
    Table,
    Text,
    and_,
    cast,
    func,
    select,
    type_coerce,
)
from sqlalchemy.pool import NullPool, QueuePool
from sqlmodel import SQLModel

import controlplane.store.tables  # noqa: F401  (registers the tables in the metadata)
from controlplane.cost_layouts import chunks
from controlplane.cost_layouts import placed_usage as placed_usage  # re-exported
from controlplane.cost_requests import ServedRequests as ServedRequests  # re-exported
from controlplane.cost_requests import requests_served as requests_served
from controlplane.cost_requests import served_requests as served_requests
from controlplane.cost_requests import shortfalls as shortfalls
from controlplane.domain.cost import (
    FleetSnapshot,
    GpuPrice,
    KeptUse,
    PriceTable,
    attribute_warm,
)
from controlplane.domain.observed import ObservedPool
from controlplane.domain.plan import KeptReplicas
from controlplane.domain.price_history import PriceChange, PriceHistory
from controlplane.store import codec
from controlplane.store.stored_columns import columns_or_null


def table(name: str) -> Table:
    return SQLModel.metadata.tables[name]


def as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_at(value: datetime | str) -> datetime:
    return as_utc(value if isinstance(value, datetime) else datetime.fromisoformat(value))


@dataclass(frozen=True, slots=True)
class PlannedTick:
    tick_id: int
    plan_id: int
    at: datetime
    dry_run: bool
    warm_gpus: int  # the fleet total
    warm_gpus_by_product: dict[str, int] | None  # None: a plan saved before they were (0020)
    # replicas running beyond the placement, each with its stored tenant (None: not listed);
    # none on a plan saved before they were recorded (0024)
    kept: tuple[tuple[KeptReplicas, str | None], ...] = ()
    gpus_placed: int = 0  # GPUs the plan places on: about the placement rows a read of it takes


def warm_by_product(warm_gpus_json: str | None) -> dict[str, int] | None:
    return None if warm_gpus_json is None else {
        str(p): int(n) for p, n in json.loads(warm_gpus_json).items()}


def planned_ticks(engine: Engine, since_at: datetime, until_at: datetime) -> list[PlannedTick]:
    """Ticks that produced a plan in [since_at, until_at], plus the last one before since_at."""
    ticks, plans = table("ticks"), table("plans")
    # a store not upgraded to 0024 yet reads as one whose plans recorded no kept replicas
    (kept,) = columns_or_null(engine, plans, ["kept_json"])
    # type_coerce: SQLite hands back the stored text, parsed below much faster than by the
    # DateTime result processor; other drivers hand back datetimes.
    cols = (ticks.c.id, plans.c.id, type_coerce(ticks.c.started_at, String), plans.c.dry_run,
            plans.c.warm_gpus, plans.c.warm_gpus_json, kept, plans.c.gpus_placed)
    joined = ticks.join(plans, plans.c.tick_id == ticks.c.id)
    inside = (select(*cols).select_from(joined)
              .where(and_(ticks.c.started_at >= since_at, ticks.c.started_at <= until_at))
              .order_by(ticks.c.started_at))
    before = (select(*cols).select_from(joined).where(ticks.c.started_at < since_at)
              .order_by(ticks.c.started_at.desc()).limit(1))
    with engine.connect() as connection:
        rows = list(connection.execute(before)) + list(connection.execute(inside))
    # parsed once per distinct text: a fleet kept tick after tick stores the same one each time
    warm_of, kept_of = cache(warm_by_product), cache(codec.kept_from_json)
    return [PlannedTick(int(r[0]), int(r[1]), parse_at(r[2]), bool(r[3]), int(r[4]),
                        warm_of(r[5]), kept_of(r[6]), int(r[7])) for r in rows]


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


def window_sample_ticks(ticks: Sequence[PlannedTick], since_at: datetime, until_at: datetime,
                        step_s: float) -> list[tuple[datetime, PlannedTick]]:
    """``sample_ticks`` over the window [since_at, until_at): an instant at until_at would
    accrue nothing, and counting it made the dashboard's samples one more than the export's."""
    return sample_ticks(ticks, since_at, until_at - timedelta(microseconds=1), step_s)


def held_ticks(ticks: Sequence[PlannedTick], since_at: datetime,
               until_at: datetime) -> list[tuple[datetime, PlannedTick]]:
    """Every plan in force in [since_at, until_at), from its tick's time (the one in force at
    since_at from since_at): each held until the next tick is the exact integral of the
    recorded plans, what ``sample_ticks`` tends to as its step shrinks, and it misses no plan,
    however short-lived, that a coarser step can fall either side of."""
    out: list[tuple[datetime, PlannedTick]] = []
    for tick in ticks:  # in time order (planned_ticks)
        at = max(tick.at, since_at)
        if at >= until_at:
            break
        if out and out[-1][0] == at:  # a newer tick at the same instant supersedes it
            out[-1] = (at, tick)
        else:
            out.append((at, tick))
    return out


def bounded_step_s(ticks: Sequence[PlannedTick], since_at: datetime, until_at: datetime,
                   placed_budget: int) -> float | None:
    """None (hold every plan: ``held_ticks``) when the plans in force in [since_at, until_at)
    place at most ``placed_budget`` GPUs in all, else the step, in whole seconds, that samples
    about that many: a read of placements takes time in proportion to them, and a large fleet
    ticking for days holds millions. Sampled, a plan between two samples is missed."""
    held = held_ticks(ticks, since_at, until_at)
    placed = sum(t.gpus_placed for _, t in held)
    if placed <= placed_budget:
        return None
    span_s = (until_at - since_at).total_seconds()
    return float(max(1, math.ceil(span_s * placed / (len(held) * placed_budget))))


def readable_from_threads(engine: Engine) -> bool:
    """Whether reads through ``engine`` may run in another thread at the same time: its pool
    hands each thread a connection of its own to the same database. Not so for an in-memory
    SQLite store (SingletonThreadPool: a new, empty database per thread) or a shared single
    connection (StaticPool)."""
    return isinstance(engine.pool, QueuePool | NullPool)


def tenants(engine: Engine) -> dict[str, str]:
    models = table("models")
    with engine.connect() as connection:
        return {str(r[0]): str(r[1]) for r in connection.execute(
            select(models.c.name, models.c.tenant))}


@dataclass(frozen=True, slots=True)
class TickFacts:
    """From one tick's observed snapshot: GPUs billed per product (``ObservedPool.gpus_billed``:
    of the ready and provisioning nodes, as they report them) and each model's demand and ready
    capacity (requests/s). A model whose load the tick could not measure (a missed scrape:
    ``demand_measured`` false, its stored demand a placeholder 0) has demand None: unknown, not
    zero."""

    billed_gpus: dict[str, int]
    demand_rps: dict[str, float | None]
    capacity_rps: dict[str, float]


def tick_facts(engine: Engine, tick_ids: Iterable[int],
               loads: bool = True) -> dict[int, TickFacts]:
    """Facts of the given ticks (without ``loads``: the GPUs billed only, no model's demand or
    capacity). Only the pools and models parts of the (large) observed document are extracted,
    in the database where it can (SQLite json_extract, PostgreSQL ->)."""
    ticks = table("ticks")
    document = ticks.c.observed_json
    dialect = engine.dialect.name
    parts: tuple[ColumnElement[Any], ColumnElement[Any]] = (document, document)
    if dialect == "sqlite":
        parts = (func.json_extract(document, "$.pools"), func.json_extract(document, "$.models"))
    elif dialect == "postgresql":
        as_json = cast(document, JSON)
        parts = (cast(as_json["pools"], Text), cast(as_json["models"], Text))
    out: dict[int, TickFacts] = {}
    parsed = cache(facts_from_parts)  # the pools of a fleet kept tick after tick read alike
    with engine.connect() as connection:
        for chunk in chunks(sorted(set(tick_ids)), 500):
            query = select(ticks.c.id, *(parts if loads else parts[:1])).where(
                ticks.c.id.in_(chunk))
            for row in connection.execute(query):
                out[int(row[0])] = parsed(row[1], row[2] if loads else None)
    return out


def _listed(text_or_document: str | None, key: str) -> list[dict[str, Any]]:
    if not text_or_document:
        return []
    value = json.loads(text_or_document)
    listed: list[dict[str, Any]] = value.get(key, []) if isinstance(value, dict) else value
    return listed


def facts_from_parts(pools_json: str | None, models_json: str | None) -> TickFacts:
    billed: dict[str, int] = defaultdict(int)
    for pool in _listed(pools_json, "pools"):
        billed[str(pool["product"])] += ObservedPool(
            str(pool.get("name", "")), str(pool["product"]), int(pool.get("gpus_per_node", 0)),
            int(pool.get("nodes_ready", 0)), int(pool.get("nodes_pending", 0)), 0,
            gpus_ready_reported=pool.get("gpus_ready_reported"),
            gpus_pending_reported=pool.get("gpus_pending_reported")).gpus_billed
    models = _listed(models_json, "models")
    return TickFacts(dict(billed),
                     {str(m["name"]): float(m["demand_rps"]) if m.get("demand_measured", True)
                      else None for m in models},
                     {str(m["name"]): float(m["capacity_rps"]) for m in models})


def facts_from_observed(observed_json: str) -> TickFacts:
    return facts_from_parts(observed_json, observed_json)


def snapshots(engine: Engine, picks: Sequence[tuple[datetime, PlannedTick]],
              tenant_of: Mapping[str, str]) -> list[FleetSnapshot]:
    """Fleet snapshots (billed GPUs, warm pool, placed layouts, replicas kept beyond them) at
    the picked instants. A kept replica's tenant is the one stored with the plan, as for
    placements (``placed_usage``)."""
    facts = tick_facts(engine, (t.tick_id for _, t in picks), loads=False)
    placed = placed_usage(engine, (t.plan_id for _, t in picks), tenant_of)
    out = []
    for at, tick in picks:
        usage = placed.get(tick.plan_id, ())
        billed = facts.get(tick.tick_id, TickFacts({}, {}, {})).billed_gpus
        placed_count: dict[str, int] = defaultdict(int)
        for u in usage:
            placed_count[u.product] += u.gpus
        unplaced = {p: max(0, n - placed_count[p]) for p, n in billed.items()}
        warm = tick.warm_gpus_by_product
        kept = tuple(KeptUse(k.model, tenant_of.get(k.model, "unknown") if tenant is None
                             else tenant, k.product, k.gpus) for k, tenant in tick.kept)
        out.append(FleetSnapshot(at, billed, attribute_warm(tick.warm_gpus, unplaced)
                                 if warm is None else warm, usage, kept))
    return out


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


def price_history(engine: Engine) -> PriceHistory:
    """The prices in force at each instant: ``price_table`` (today's) for a product without a
    recorded change, else its recorded changes (``controlplane.domain.price_history``)."""
    history = table("gpu_price_history")
    with engine.connect() as connection:
        rows = list(connection.execute(select(
            history.c.product, history.c.price_per_gpu_hour, history.c.source, history.c.as_of,
            history.c.effective_at).order_by(history.c.id)))
    return PriceHistory(price_table(engine), (
        PriceChange(None if at is None else as_utc(at), GpuPrice(str(p), float(usd), str(src),
                                                                 str(as_of)))
        for p, usd, src, as_of, at in rows))


def time_span(engine: Engine) -> tuple[datetime, datetime] | None:
    """The earliest reconcile tick's time and the newest tick's (store time: virtual in the
    simulator). The newest is the last written, as the dashboard's store clock reads it: a tick
    stamped under a clock that ran ahead does not move the end into the future."""
    ticks = table("ticks")
    with engine.connect() as connection:
        first = connection.execute(select(func.min(ticks.c.started_at))).scalar()
        last = connection.execute(select(ticks.c.started_at)
                                  .order_by(ticks.c.id.desc()).limit(1)).scalar()
    return (as_utc(first), as_utc(last)) if first is not None and last is not None else None
