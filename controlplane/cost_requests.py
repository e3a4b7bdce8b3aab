"""Read the requests each model served over a window from its load observations: the mean served
rate (min(finished, capacity)) x the seconds its observations cover, beside those that arrived;
and those of its observations short of its SLO (``shortfalls``, the Overview's short %). Part
of ``controlplane.cost_reader``, which re-exports them.

Only observations at or after the first reconcile tick count: rows before it are backfilled
demand history with no capacity. A model's rows are read from the observations' (model, at,
finished, capacity, arrived) index alone (migrations 0025, 0030), grouped in its order; its
first and last observation by two lookups in that index, not by a min() and a max() over every
row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Select,
    String,
    and_,
    case,
    func,
    literal,
    or_,
    select,
    true,
    union_all,
)
from sqlmodel import SQLModel

import controlplane.store.tables  # noqa: F401  (registers the tables in the metadata)
from controlplane.cost_layouts import chunks
from controlplane.domain.slo import KV_CACHE_FULL, QUEUE_BACKLOG_S
from controlplane.store.arrivals import arrived_in, arrived_rps
from controlplane.store.stored_columns import stored_names
from controlplane.store.utc import as_utc


@dataclass(frozen=True, slots=True)
class ServedRequests:
    """Requests of one model over a window, estimated from its load observations."""

    model: str
    demand_requests: float
    served_requests: float
    observations: int


@dataclass(frozen=True, slots=True)
class Shortfalls:
    """One model's observations over a window and those short of its SLO."""

    model: str
    observations: int
    short_observations: int


def served_requests(engine: Engine, models: Sequence[str] | None, since_at: datetime,
                    until_at: datetime) -> dict[str, ServedRequests]:
    """Mean demand (the requests that arrived: ``store.arrivals``) and served rate
    (min(finished, capacity)) x covered seconds per model (every model observed in the window
    when ``models`` is None: listed in the models table or not), with the model's
    observations."""
    rows, ends = _grouped(engine, models, since_at, until_at,
                          (func.avg(arrived_in(engine)), func.avg(_served_rps()),
                           func.count()))
    out = {}
    for model, demand, served_rps, count in rows:
        covered_s = _covered_s(ends[str(model)], int(count))
        out[str(model)] = ServedRequests(str(model), float(demand) * covered_s,
                                         float(served_rps) * covered_s, int(count))
    return out


def shortfalls(engine: Engine, since_at: datetime, through_at: datetime
               ) -> dict[str, Shortfalls]:
    """Each model observed from ``since_at`` through ``through_at`` (the newest reading included):
    its observations and those short of its SLO as ``controlplane.domain.slo`` reads it, in
    SQL: capacity below demand (the requests that arrived), more than ``QUEUE_BACKLOG_S`` of
    its capacity queued, its KV cache fuller than ``KV_CACHE_FULL``, or its latency above
    the models table's SLO. A signal not measured (NULL; a store older than migration 0027
    has no queue or KV cache) is not short, nor the latency of a model no longer listed (no
    SLO)."""
    obs, models = _observations(), SQLModel.metadata.tables["models"]
    slo_ms = select(models.c.latency_slo_ms).where(models.c.name == obs.c.model)
    stored = stored_names(engine, "observations")
    short = [obs.c.capacity_rps < arrived_rps(stored),
             obs.c.latency_ms > slo_ms.scalar_subquery()]
    if {"queued_requests", "kv_cache_usage"} <= stored:
        short += [obs.c.queued_requests > QUEUE_BACKLOG_S * obs.c.capacity_rps,
                  obs.c.kv_cache_usage > KV_CACHE_FULL]
    with engine.connect() as connection:
        rows, _ = _sums(connection, None, since_at, through_at,
                        (func.count(), func.sum(case((or_(*short), 1), else_=0))), through=True)
    return {str(model): Shortfalls(str(model), int(count), int(shorts or 0))
            for model, count, shorts in rows}


def requests_served(engine: Engine, models: Sequence[str], since_at: datetime,
                    until_at: datetime) -> dict[str, float]:
    """Each model's ``served_requests`` alone, as showback bills them (one read a day of its
    window): the same figure, without the demand and shortfall it does not use, whose sums
    over every row of a week take a third of the read."""
    rows, ends = _grouped(engine, models, since_at, until_at,
                          (func.avg(_served_rps()), func.count()))
    return {str(model): float(served_rps) * _covered_s(ends[str(model)], int(count))
            for model, served_rps, count in rows}


def _observations() -> Any:
    return SQLModel.metadata.tables["observations"]


def _served_rps() -> ColumnElement[Any]:
    obs = _observations()
    return case((obs.c.capacity_rps < obs.c.demand_rps, obs.c.capacity_rps),
                else_=obs.c.demand_rps)


def _covered_s(ends: tuple[datetime, datetime], observations: int) -> float:
    """The seconds ``observations`` rows from ``ends[0]`` to ``ends[1]`` cover, one step each."""
    span_s = (ends[1] - ends[0]).total_seconds()
    return span_s * observations / (observations - 1) if observations > 1 else 0.0


def _grouped(engine: Engine, models: Sequence[str] | None, since_at: datetime,
             until_at: datetime, sums: Sequence[ColumnElement[Any]]
             ) -> tuple[list[Any], dict[str, tuple[datetime, datetime]]]:
    """Per model: ``sums`` over its observations in the window, and its first and last one."""
    with engine.connect() as connection:
        rows, start_at = _sums(connection, models, since_at, until_at, sums)
        ends = observed_ends(connection, [str(r[0]) for r in rows], start_at, until_at)
    return rows, ends


def _sums(connection: Connection, models: Sequence[str] | None, since_at: datetime,
          until_at: datetime, sums: Sequence[ColumnElement[Any]], through: bool = False
          ) -> tuple[list[Any], datetime]:
    """Per model: ``sums`` over its observations in the window from the first tick on (until
    ``until_at``, or through it), and where that start is (none before the first tick)."""
    obs, ticks = _observations(), SQLModel.metadata.tables["ticks"]
    first_tick = connection.execute(select(func.min(ticks.c.started_at))).scalar()
    if first_tick is None or (models is not None and not models):
        return [], since_at
    start_at = max(since_at, as_utc(first_tick))
    query: Select[Any] = (
        select(obs.c.model, *sums)
        .where(and_(true() if models is None else obs.c.model.in_(list(models)),
                    obs.c.at >= start_at,
                    obs.c.at <= until_at if through else obs.c.at < until_at))
        .group_by(obs.c.model))
    return list(connection.execute(query)), start_at


def observed_ends(connection: Connection, models: Sequence[str], since_at: datetime,
                  until_at: datetime) -> dict[str, tuple[datetime, datetime]]:
    """Each model's first and last observation in [since_at, until_at): two lookups a model in
    the (model, at) index, where a min() and max() of a grouped read compare every row."""
    obs = _observations()
    out: dict[str, tuple[datetime, datetime]] = {}
    for chunk in chunks(models, 400):  # SQLite: at most 500 terms a compound select
        listed = union_all(*(select(literal(m, String).label("model")) for m in chunk)
                           ).subquery("listed")
        inside = and_(obs.c.model == listed.c.model, obs.c.at >= since_at, obs.c.at < until_at)
        query = select(listed.c.model, select(func.min(obs.c.at)).where(inside).scalar_subquery(),
                       select(func.max(obs.c.at)).where(inside).scalar_subquery())
        for model, first_at, last_at in connection.execute(query):
            if first_at is not None:
                out[str(model)] = (as_utc(first_at), as_utc(last_at))
    return out
