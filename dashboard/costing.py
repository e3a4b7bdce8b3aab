"""Cost views for the pages: the cost model (``controlplane.domain.cost``) applied to snapshots
read from the store, as DataFrames. Cached with the same TTL as the queries."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd
import streamlit as st

from controlplane import cost_export, cost_reader
from controlplane.domain.cost import (
    CostAccrual,
    CostCategory,
    CostLine,
    fleet_cost_rate,
)
from controlplane.domain.cost_gaps import UNRECORDED_AFTER_S, Span, hours_per_day
from controlplane.domain.timestamps import utc_text
from dashboard import history
from dashboard import queries as q
from dashboard.context import TTL_S, engine_for

#: the GPUs placed, summed over the plans a window holds, that the page reads plan by plan; past
#: it the plan in force is sampled (``cost_reader.bounded_step_s``): e.g. a day and more of 30-s
#: ticks of the demo's 24 GPUs, a quarter of an hour of a fleet of 800
PLACED_GPUS_READ = 100_000

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
    return lines_frame(fleet_cost_rate(snaps[0], history.prices(url)))


@dataclass(frozen=True, slots=True)
class CostWindow:
    rates: pd.DataFrame  # at, category, usd_per_hour (held until the next instant)
    accruals: pd.DataFrame  # per day and cost line: gpu_hours, usd
    requests: pd.DataFrame  # per model: served_requests (the CSV's, summed over its days)
    samples: int  # plans held, one a tick, or instants sampled
    unrecorded: tuple[Span, ...]  # stretches with no plan recorded (cost_gaps)
    step_s: float | None  # the sampling step of a window past PLACED_GPUS_READ; None: every plan


def export_args(until_at: datetime, window: timedelta, step_s: float | None) -> tuple[str, ...]:
    """The options of ``headroom cost export`` that export the page's window (``window`` long,
    ending at ``until_at``, both clipped to the store's ticks by ``window_bounds`` alike) as the
    page did (every plan, or sampled every ``step_s``), so it reproduces the page's figures."""
    step = () if step_s is None else ("--step-s", _exact(step_s))
    return ("--until", utc_text(until_at), "--days", _exact(window / timedelta(days=1)), *step)


def _exact(value: float) -> str:
    """``value`` as short as it reads back exactly: 7, 600, 599.9991666666667."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def cost_window(url: str, since_at: datetime, until_at: datetime, *,
                gap_limit_s: float = UNRECORDED_AFTER_S) -> CostWindow:
    """Cost and requests over the window as ``headroom cost export`` counts them
    (``cost_export.showback``): each recorded plan held from its tick until the next (sampled in
    a window whose plans place more than PLACED_GPUS_READ GPUs in all), requests from the load
    observations. Stretches longer than ``gap_limit_s`` without a plan are named."""
    result = cost_export.showback(engine_for(url), history.price_history(url), since_at, until_at,
                                  gap_limit_s=gap_limit_s, placed_budget=PLACED_GPUS_READ)
    served: dict[str, float] = defaultdict(float)
    for (_, model), requests in result.requests.items():
        served[model] += requests
    return CostWindow(rates_frame(result.rates, until_at), accruals_frame(result.accruals),
                      pd.DataFrame(sorted(served.items()), columns=["model", "served_requests"]),
                      result.samples, result.unrecorded, result.step_s)


def rates_frame(rates: Sequence[tuple[datetime, Sequence[CostLine]]],
                until_at: datetime) -> pd.DataFrame:
    """$/h per category at each instant the fleet's cost changed, each held until the next row,
    the last one again at ``until_at`` so that a step chart reaches the window's end. An instant
    like the one before is left out: a plan a tick is thousands of rows a week, mostly alike."""
    columns = ["at", "category", "usd_per_hour"]
    frame = pd.DataFrame([(at, line.category.value, line.usd_per_hour)
                          for at, lines in rates for line in lines], columns=columns)
    if frame.empty:  # nothing billed at any instant
        return frame
    wide = frame.pivot_table(index="at", columns="category", values="usd_per_hour",
                             aggfunc="sum", fill_value=0.0).reindex(
        sorted({at for at, _ in rates}), fill_value=0.0)
    wide = wide[wide.ne(wide.shift()).any(axis=1)]
    if wide.index[-1] < until_at:
        wide.loc[until_at] = wide.iloc[-1]
    wide.index.name, wide.columns.name = "at", None
    return wide.reset_index().melt(id_vars="at", var_name="category", value_name="usd_per_hour")


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
        for row in history.served(url, day_start, day_end).itertuples(index=False):
            requests[(day, row.model)] = row.served_requests
    return cost_export.csv_text(cost_export.opencost_rows(items, requests,
                                                          unrecorded_h=hours_per_day(unrecorded)))


def _category(value: object) -> CostCategory:
    return CostCategory(str(value))
