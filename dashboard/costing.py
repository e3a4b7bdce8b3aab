"""Cost views for the pages: the cost model (``controlplane.domain.cost``) applied to snapshots
read from the store, as DataFrames. Cached with the same TTL as the queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd
import streamlit as st

from controlplane import cost_export, cost_reader
from controlplane.domain.cost import (
    CostAccrual,
    CostCategory,
    CostLine,
    accrue,
    accrue_requests,
    fleet_cost_rate,
)
from controlplane.domain.cost_gaps import (
    UNRECORDED_AFTER_S,
    Span,
    hours_per_day,
    unrecorded_spans,
)
from controlplane.domain.price_history import fleet_cost_rates
from controlplane.domain.timestamps import utc_text
from dashboard import queries as q
from dashboard.context import TTL_S, engine_for

MIN_SAMPLES = 12  # a window shorter than 12 chosen steps is sampled finer (see sampling_step_s)

CONVENTION = ("A MIG slice costs compute slices / 7 of its GPU (g/4 on 4-slice parts); MPS and "
              "time-sliced replicas split the rest of a GPU evenly; replicas a guard keeps over "
              "their target (a scale-down held back) are billed to their model out of what "
              "would be idle; unheld parts of billed GPUs are idle unless the plan keeps them "
              "as warm pool.")


def lines_frame(lines: tuple[CostLine, ...]) -> pd.DataFrame:
    frame = pd.DataFrame([(x.category, x.product, x.tenant, x.model, x.gpus, x.usd_per_hour)
                          for x in lines],
                         columns=["category", "product", "tenant", "model", "gpus",
                                  "usd_per_hour"])
    frame["category"] = frame["category"].astype(str)
    return frame


@st.cache_data(ttl=TTL_S, show_spinner=False)
def cost_now(url: str) -> pd.DataFrame:
    """Cost lines ($/h) of the plan in force at the newest tick."""
    engine = engine_for(url)
    tick = q.last_tick(url)
    if tick is None:
        return lines_frame(())
    ticks = cost_reader.planned_ticks(engine, tick.started_at, tick.started_at)
    picks = cost_reader.sample_ticks(ticks, tick.started_at, tick.started_at, 1.0)
    snaps = cost_reader.snapshots(engine, picks, cost_reader.tenants(engine))
    if not snaps:
        return lines_frame(())
    return lines_frame(fleet_cost_rate(snaps[0], q.prices(url)))


@dataclass(frozen=True, slots=True)
class CostWindow:
    rates: pd.DataFrame  # at, category, usd_per_hour (held until the next sample)
    accruals: pd.DataFrame  # per day and cost line: gpu_hours, usd
    requests: pd.DataFrame  # per model: served_requests, demand_requests (same sampling)
    samples: int
    step_s: float  # the sampling step actually used (see sampling_step_s)
    unrecorded: tuple[Span, ...]  # stretches with no plan recorded (cost_gaps)


def sampling_step_s(since_at: datetime, until_at: datetime, step_s: float) -> float:
    """The chosen step, or a finer one when the window holds fewer than MIN_SAMPLES of them.

    Each sample's rate is held until the next, so a young store sampled once would be priced
    for its whole life at its first tick, when nothing may be billed yet (a $0.00 bill)."""
    span_s = (until_at - since_at).total_seconds()
    return max(1.0, min(step_s, span_s / MIN_SAMPLES))


def export_args(until_at: datetime, window: timedelta, step_s: float) -> tuple[str, ...]:
    """The options of ``headroom cost export`` that export the page's window (``window`` long,
    ending at ``until_at``, both clipped to the store's ticks by ``window_bounds`` alike) at the
    page's sampling step, so it reproduces the page's figures."""
    until = utc_text(until_at)
    return ("--until", until, "--days", _exact(window / timedelta(days=1)),
            "--step-s", _exact(step_s))


def _exact(value: float) -> str:
    """``value`` as short as it reads back exactly: 7, 600, 599.9991666666667."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def cost_window(url: str, since_at: datetime, until_at: datetime, step_s: float,
                gap_limit_s: float = UNRECORDED_AFTER_S) -> CostWindow:
    """Cost and requests over the window, sampling the plan in force every step_s seconds (finer
    in a short window); dollars and requests are held the same way, so $ per 1M requests
    compares like with like. Stretches longer than ``gap_limit_s`` without a plan are named."""
    engine = engine_for(url)
    step_s = sampling_step_s(since_at, until_at, step_s)
    ticks = cost_reader.planned_ticks(engine, since_at, until_at)
    picks = cost_reader.window_sample_ticks(ticks, since_at, until_at, step_s)
    samples = cost_reader.samples_at(engine, picks, cost_reader.tenants(engine))
    # a past sample at the prices then in force, re-priced from each price change it holds over
    rated = fleet_cost_rates([s.snapshot for s in samples], q.price_history(url), until_at)
    held = [*rated, (until_at, rated[-1][1])] if rated and rated[-1][0] < until_at else rated
    rates = pd.DataFrame(
        [(at, line.category.value, line.usd_per_hour) for at, lines in held for line in lines],
        columns=["at", "category", "usd_per_hour"])
    rates = rates.groupby(["at", "category"], as_index=False)["usd_per_hour"].sum()
    served = accrue_requests([(s.snapshot.at, s.served_rps) for s in samples], until_at)
    demand = accrue_requests([(s.snapshot.at, s.demand_rps) for s in samples], until_at)
    requests = pd.DataFrame([(m, served.get(m, 0.0), demand[m]) for m in sorted(demand)],
                            columns=["model", "served_requests", "demand_requests"])
    unrecorded = unrecorded_spans((t.at for t in ticks), since_at, until_at, gap_limit_s)
    return CostWindow(rates, accruals_frame(accrue(rated, until_at)), requests, len(samples),
                      step_s, unrecorded)


def accruals_frame(accruals: tuple[CostAccrual, ...]) -> pd.DataFrame:
    frame = pd.DataFrame([(a.day, a.start_at, a.end_at, a.category, a.product, a.tenant,
                           a.model, a.gpu_hours, a.usd) for a in accruals],
                         columns=["day", "start_at", "end_at", "category", "product", "tenant",
                                  "model", "gpu_hours", "usd"])
    frame["category"] = frame["category"].astype(str)
    return frame


def export_csv(url: str, accruals: pd.DataFrame, since_at: datetime, until_at: datetime,
               unrecorded: tuple[Span, ...] = ()) -> str:
    """The window's showback as OpenCost-layout CSV text (requests per day and model included,
    and each day's hours in ``unrecorded``)."""
    items = tuple(CostAccrual(r.day, r.start_at, r.end_at, _category(r.category), r.product,
                              r.tenant, r.model, r.gpu_hours, r.usd)
                  for r in accruals.itertuples(index=False))
    requests: dict[tuple[str, str], float] = {}
    for day, day_start, day_end in cost_export.day_spans((a.day for a in items), since_at,
                                                         until_at):
        for row in q.served(url, day_start, day_end).itertuples(index=False):
            requests[(day, row.model)] = row.served_requests
    return cost_export.csv_text(cost_export.opencost_rows(items, requests,
                                                          unrecorded_h=hours_per_day(unrecorded)))


def _category(value: object) -> CostCategory:
    return CostCategory(str(value))
