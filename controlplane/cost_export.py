"""Showback CSV in OpenCost's allocation export layout (``pkg/costmodel/csv_export.go``): the
same leading columns (Date, Namespace, ControllerKind, ControllerName, Pod, Container, Labels,
usage averages, GPUs, costs, TotalCost) so the file merges with an OpenCost export, then
Headroom's own columns (GPUHours, GPUProduct, Category, Requests, CostPer1MRequests,
UnrecordedHours). Requests: the model's requests served that day, split among its serving lines
by their dollars (``request_shares``), so they sum to what it served.

Mapping: a serving line is namespace = tenant (the model's tenant when the plan was stored, see
``cost_reader.placed_usage``), controller = the model's deployment; warm-pool GPUs
are placeholder capacity in Headroom's namespace (``warm-pool-<product>``); idle GPUs are
OpenCost's ``__idle__``. Labels carry ``headroom_io_*`` keys in OpenCost's sanitised form.
UnrecordedHours: the hours of the row's day in the window when no plan was recorded (see
``controlplane.domain.cost_gaps``), whose cost holds the plan before; the same on every row of
that day, 0 on a day fully recorded.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from sqlalchemy import Engine

from controlplane import cost_reader
from controlplane.domain.cost import (
    IDLE_MODEL,
    CostAccrual,
    CostCategory,
    CostLine,
    PriceTable,
    accrue,
    cost_per_million,
)
from controlplane.domain.cost_gaps import UNRECORDED_AFTER_S, Span, unrecorded_spans
from controlplane.domain.price_history import PriceHistory, fleet_cost_rates

OPENCOST_COLUMNS = (
    "Date", "Namespace", "ControllerKind", "ControllerName", "Pod", "Container", "Labels",
    "CPUCoreUsageAverage", "CPUCoreRequestAverage", "RAMBytesUsageAverage",
    "RAMBytesRequestAverage", "NetworkReceiveBytes", "NetworkTransferBytes", "GPUs", "PVBytes",
    "CPUCost", "RAMCost", "NetworkCost", "PVCost", "GPUCost", "TotalCost",
)
HEADROOM_COLUMNS = ("GPUHours", "GPUProduct", "Category", "Requests", "CostPer1MRequests",
                    "UnrecordedHours")
COLUMNS = OPENCOST_COLUMNS + HEADROOM_COLUMNS
_ZERO_COLUMNS = (*OPENCOST_COLUMNS[7:13], "PVBytes", "CPUCost", "RAMCost", "NetworkCost",
                 "PVCost")


def _fmt(value: float) -> str:
    return repr(round(value, 6))


def allocation_identity(accrual: CostAccrual, warm_namespace: str) -> tuple[str, str, str]:
    """(Namespace, ControllerKind, ControllerName) of a cost line, OpenCost-style."""
    if accrual.category is CostCategory.SERVING:
        return accrual.tenant, "deployment", accrual.model
    if accrual.category is CostCategory.WARM:
        return warm_namespace, "deployment", f"warm-pool-{accrual.product.lower()}"
    return IDLE_MODEL, "", IDLE_MODEL


def opencost_rows(accruals: Sequence[CostAccrual], requests: Mapping[tuple[str, str], float],
                  warm_namespace: str = "headroom",
                  unrecorded_h: Mapping[str, float] | None = None) -> list[dict[str, str]]:
    """One row per day and cost line; ``requests`` maps (day, model) to requests served,
    ``unrecorded_h`` a day to its hours without a plan recorded (``cost_gaps.hours_per_day``).
    A model with several serving lines a day (GPU products, or tenants on the day it moved) has
    its requests split among them by their dollars (by GPU-hours if they cost nothing): the
    Requests column sums to what it served and each line's cost per 1M is the model's own."""
    unrecorded_h = unrecorded_h or {}
    shares = request_shares(accruals)
    rows = []
    for a in accruals:
        namespace, kind, controller = allocation_identity(a, warm_namespace)
        hours = (a.end_at - a.start_at).total_seconds() / 3600
        labels = {"headroom_io_category": a.category.value, "headroom_io_gpu_product": a.product}
        served: float | None = None
        if a.category is CostCategory.SERVING:
            labels |= {"app": a.model, "headroom_io_model": a.model, "headroom_io_tenant": a.tenant}
            served = requests.get((a.day, a.model))
            served = None if served is None else served * shares[id(a)]
        per_million = cost_per_million(a.usd, served) if served is not None else None
        row = dict.fromkeys(_ZERO_COLUMNS, "0")
        row |= {
            "Date": a.day, "Namespace": namespace, "ControllerKind": kind,
            "ControllerName": controller, "Pod": "", "Container": "",
            "Labels": json.dumps(labels, sort_keys=True, separators=(",", ":")),
            "GPUs": _fmt(a.gpu_hours / hours if hours > 0 else 0.0),
            "GPUCost": _fmt(a.usd), "TotalCost": _fmt(a.usd),
            "GPUHours": _fmt(a.gpu_hours), "GPUProduct": a.product, "Category": a.category.value,
            "Requests": "" if served is None else _fmt(served),
            "CostPer1MRequests": "" if per_million is None else _fmt(per_million),
            "UnrecordedHours": _fmt(unrecorded_h[a.day]) if unrecorded_h.get(a.day) else "0",
        }
        rows.append(row)
    return rows


def request_shares(accruals: Sequence[CostAccrual]) -> dict[int, float]:
    """Each serving line's share (by ``id``) of its model's requests that day."""
    lines: dict[tuple[str, str], list[CostAccrual]] = defaultdict(list)
    for a in accruals:
        if a.category is CostCategory.SERVING:
            lines[(a.day, a.model)].append(a)
    shares: dict[int, float] = {}
    for group in lines.values():
        usd = sum(a.usd for a in group)
        gpu_hours = sum(a.gpu_hours for a in group)
        for a in group:
            shares[id(a)] = (a.usd / usd if usd > 0 else
                             a.gpu_hours / gpu_hours if gpu_hours > 0 else 1 / len(group))
    return shares


def csv_text(rows: Iterable[Mapping[str, str]]) -> str:
    """The rows as CSV text with the OpenCost + Headroom header."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


@dataclass(frozen=True, slots=True)
class Showback:
    accruals: tuple[CostAccrual, ...]
    requests: dict[tuple[str, str], float]  # (day, model) -> requests served
    samples: int  # plans held (one a tick), or instants sampled at a fixed step
    unrecorded: tuple[Span, ...]  # stretches with no plan recorded (cost_gaps)
    step_s: float | None = None  # the sampling step; None: every plan held until the next
    # the cost lines ($/h) from each instant on, held until the next (the last: the window's end)
    rates: tuple[tuple[datetime, tuple[CostLine, ...]], ...] = ()


def showback(engine: Engine, prices: PriceTable | PriceHistory, since_at: datetime,
             until_at: datetime, step_s: float | None = None,
             gap_limit_s: float = UNRECORDED_AFTER_S,
             placed_budget: int | None = None) -> Showback:
    """Accrued cost per day and line over [since_at, until_at): each recorded plan held from its
    tick until the next (exact; ``cost_reader.held_ticks``), or with ``step_s`` the plan in force
    sampled every ``step_s`` seconds, priced as in force from each instant (a price change from
    its exact time, ``fleet_cost_rates``; a ``PriceTable``: those at every instant),
    requests served per day and model, and the stretches longer than ``gap_limit_s`` with no
    plan recorded. ``placed_budget`` (no ``step_s``): sample instead when holding every plan
    would read more placed GPUs (``cost_reader.bounded_step_s``). The dashboard's Cost page
    shows this, so it and the export agree."""
    history = prices if isinstance(prices, PriceHistory) else PriceHistory.fixed(prices)
    ticks = cost_reader.planned_ticks(engine, since_at, until_at)
    if step_s is None and placed_budget is not None:
        step_s = cost_reader.bounded_step_s(ticks, since_at, until_at, placed_budget)
    picks = (cost_reader.held_ticks(ticks, since_at, until_at) if step_s is None
             else cost_reader.window_sample_ticks(ticks, since_at, until_at, step_s))
    tenant_of = cost_reader.tenants(engine)
    listed = sorted(tenant_of)
    window_days = day_spans(days_between(since_at, until_at), since_at, until_at)
    with ThreadPoolExecutor(max_workers=1) as worker:
        # the listed models' requests every day of the window, read beside the plans: each read
        # is mostly the database's own work, done outside the interpreter's lock
        counting = (worker.submit(requests_by_day, engine, listed, window_days)
                    if cost_reader.readable_from_threads(engine) else None)
        snaps = cost_reader.snapshots(engine, picks, tenant_of)
        rates = fleet_cost_rates(snaps, history, until_at)
        accruals = accrue(rates, until_at)
        counted = (requests_by_day(engine, listed, window_days) if counting is None
                   else counting.result())
    # the days billed; the models billed too: one since removed from the models table served
    billed_days = {a.day for a in accruals}
    unlisted = sorted({a.model for a in accruals if a.category is CostCategory.SERVING}
                      - set(tenant_of))
    if unlisted:
        counted |= requests_by_day(engine, unlisted, [s for s in window_days
                                                      if s[0] in billed_days])
    requests = {(day, model): served for (day, model), served in sorted(
        counted.items(), key=lambda item: item[0][0]) if day in billed_days}
    unrecorded = unrecorded_spans((t.at for t in ticks), since_at, until_at, gap_limit_s)
    return Showback(accruals, requests, len(picks), unrecorded, step_s, tuple(rates))


def day_spans(days: Iterable[str], since_at: datetime, until_at: datetime
              ) -> list[tuple[str, datetime, datetime]]:
    """Each day (ISO date) as (day, start, end): the day clipped to [since_at, until_at); a
    day ends at the next midnight exactly, where the next one starts."""
    spans = []
    for day in sorted(set(days)):
        day_start = max(since_at, datetime.fromisoformat(day).replace(tzinfo=since_at.tzinfo))
        day_end = min(until_at, day_start.replace(hour=0, minute=0, second=0, microsecond=0)
                      + timedelta(days=1))
        spans.append((day, day_start, day_end))
    return spans


def days_between(since_at: datetime, until_at: datetime) -> list[str]:
    """The UTC days (ISO dates) [since_at, until_at) touches: every day a window can bill."""
    days, day = [], since_at.date()
    while datetime.combine(day, time(), since_at.tzinfo) < until_at:
        days.append(day.isoformat())
        day += timedelta(days=1)
    return days


def requests_by_day(engine: Engine, models: Sequence[str],
                    spans: Iterable[tuple[str, datetime, datetime]]
                    ) -> dict[tuple[str, str], float]:
    """Requests served per (day, model) of ``models`` over each day's span (``day_spans``)."""
    return {(day, model): served for day, day_start, day_end in spans
            for model, served in cost_reader.requests_served(engine, models, day_start,
                                                             day_end).items()}
