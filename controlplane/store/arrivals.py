"""The requests per second that arrived, as an observation records them (SQL).

An observation keeps what finished (``demand_rps``) and, where the tick measured how fast the
requests the replicas hold grew, what arrived (``arrivals_rps``, migration 0030): a saturated
engine finishes what its capacity serves and holds the rest. Demand read from the store (the
history forecasts are calibrated against and the demo fits, exported traces, the requests asked
for, shortfalls, the dashboard's demand) is what arrived: ``arrivals_rps`` where recorded, else
``demand_rps`` (a row before 0030, the simulator, an engine without the gauges). What was served
and the profile's samples per replica stay on ``demand_rps``: the requests that finished.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Engine, Table, func, select
from sqlmodel import SQLModel

import controlplane.store.tables  # noqa: F401  (registers the tables in the metadata)
from controlplane.domain.observed import ObservedModel
from controlplane.store.stored_columns import stored_names
from controlplane.store.utc import as_utc
from forecaster.types import TrafficSeries

ARRIVALS = "arrivals_rps"


def arrived_rps(stored: Collection[str]) -> ColumnElement[Any]:
    """An observation's requests that arrived per second: ``arrivals_rps``, else (NULL, or a
    store whose ``stored`` observations columns lack it: older than 0030) ``demand_rps``."""
    obs = _observations()
    if ARRIVALS not in stored:
        return obs.c.demand_rps
    return func.coalesce(obs.c[ARRIVALS], obs.c.demand_rps)


def arrived_in(engine: Engine) -> ColumnElement[Any]:
    """``arrived_rps`` as the store behind ``engine`` holds observations."""
    return arrived_rps(stored_names(engine, "observations"))


def recorded(model: ObservedModel) -> float | None:
    """What an observation of ``model`` records as arrived: None where the growth of the
    requests its replicas hold was not measured (as many as finished)."""
    return None if model.queue_growth_rps is None else model.arrivals_rps


def rate_history(engine: Engine, stored: Collection[str], model: str, since_at: datetime,
                 until_at: datetime, step_s: int) -> TrafficSeries:
    """The requests that arrived for ``model`` as a regular series: the mean per step of its
    observations in [since_at, until_at), NaN where none (``stored``: the observations'
    columns, ``stored_names``)."""
    start_at = as_utc(since_at)
    steps = max(0, math.ceil((as_utc(until_at) - start_at).total_seconds() / step_s))
    sums = [0.0] * steps
    counts = [0] * steps
    obs = _observations()
    with engine.connect() as connection:
        rows = connection.execute(
            select(obs.c.at, arrived_rps(stored))
            .where(obs.c.model == model, obs.c.at >= since_at, obs.c.at < until_at)).all()
    for at, rps in rows:
        i = int((as_utc(at) - start_at).total_seconds() // step_s)
        if 0 <= i < steps:
            sums[i] += rps
            counts[i] += 1
    values = tuple(s / c if c else math.nan for s, c in zip(sums, counts, strict=True))
    return TrafficSeries(series_id=model, step_s=step_s, start_at=start_at, values=values)


def peak_rps_since(engine: Engine, stored: Collection[str], model: str,
                   since_at: datetime) -> float | None:
    """The most requests per second that arrived for ``model`` in an observation since
    ``since_at``; None when none was observed."""
    obs = _observations()
    with engine.connect() as connection:
        peak = connection.execute(
            select(func.max(arrived_rps(stored)))
            .where(obs.c.model == model, obs.c.at >= since_at)).scalar()
    return float(peak) if peak is not None else None


def _observations() -> Table:
    return SQLModel.metadata.tables["observations"]
