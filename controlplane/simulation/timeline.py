"""Timeline files and run summaries of ``headroom simulate``.

The timeline has one row per minute and model with the DESIGN.md columns
``minute,model,demand_rps,ready_replicas,per_replica_rps,gpu_per_replica,gpus_billed`` and then
``gpu_product,product_gpus_billed`` (``PRODUCT_COLUMNS``); minutes are
UTC timestamps (``YYYY-MM-DD HH:MM:SS``). Numbers are written so they read back exactly
(``exact_text``): the page and the judge compare what they read, and ``summarize`` compares the
unrounded values, so a rounded 40/3 rps would make 3 replicas short of 40 rps in the file only.
With several policies, ``T.csv`` becomes
``T.<policy>.csv`` per policy. The summary recomputes the judge's headline numbers from the same
rows.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controlplane.simulation.engine import MinuteRow, PolicyRun
from controlplane.simulation.sim_config import SimConfig

COLUMNS = ("minute", "model", "demand_rps", "ready_replicas", "per_replica_rps",
           "gpu_per_replica", "gpus_billed")
#: after the contract's columns: the model's GPU product and the GPUs that product's node pool
#: billed in the minute (the same on every row of a minute and product; they add up to
#: gpus_billed), so a reader can price each product's GPU-hours at its own price as cost_usd does
PRODUCT_COLUMNS = ("gpu_product", "product_gpus_billed")
_EPS = 1e-9


def timeline_paths(out: Path, policies: Sequence[str]) -> dict[str, Path]:
    """``T.csv`` for one policy; ``T.<policy>.csv`` for each of several."""
    if len(policies) == 1:
        return {policies[0]: out}
    return {p: out.with_name(f"{out.stem}.{p}{out.suffix or '.csv'}") for p in policies}


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.samefile(b)  # hard links
    except OSError:
        return False


def check_not_inputs(out: Path, paths: Mapping[str, Path], inputs: Mapping[str, Path]) -> None:
    """Refuse (ValueError) a timeline path that is one of the ``inputs`` (label -> file), before
    anything is written: a run never overwrites its own trace or models file."""
    for path in paths.values():
        for label, given in inputs.items():
            if _same_file(path, given):
                writes = "" if path == out else f" writes {path}, which"
                raise ValueError(f"--timeline-out {out}{writes} is the {label} file {given}; "
                                 "refusing to overwrite an input, write the timeline elsewhere")


def exact_text(value: float) -> str:
    """The shortest text that reads back as exactly ``value`` (``repr``), whole numbers without
    ``.0``: 40/3 is ``13.333333333333334``, 8.0 is ``8``."""
    text = repr(float(value))
    return text.removesuffix(".0")


def timeline_text(rows: Sequence[MinuteRow]) -> str:
    """The timeline CSV of ``rows``."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS + PRODUCT_COLUMNS)
    for row in rows:
        writer.writerow((row.minute_at.strftime("%Y-%m-%d %H:%M:%S"), row.model,
                         exact_text(row.demand_rps), row.ready_replicas,
                         exact_text(row.per_replica_rps), exact_text(row.gpu_per_replica),
                         exact_text(row.gpus_billed), row.gpu_product,
                         exact_text(row.product_gpus_billed)))
    return out.getvalue()


def write_timeline(path: Path, rows: Sequence[MinuteRow]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        handle.write(timeline_text(rows))


def read_timeline(path: Path) -> tuple[MinuteRow, ...]:
    """The rows of a timeline file ``write_timeline`` wrote (``idle_replicas`` is not in it:
    0)."""
    with path.open(newline="") as handle:
        return tuple(MinuteRow(
            datetime.strptime(r["minute"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC), r["model"],
            float(r["demand_rps"]), int(r["ready_replicas"]), 0, float(r["per_replica_rps"]),
            float(r["gpu_per_replica"]), float(r["gpus_billed"]), r["gpu_product"],
            float(r["product_gpus_billed"])) for r in csv.DictReader(handle))


def headline(rows: Sequence[MinuteRow]) -> dict[str, Any]:
    """The judge's headline numbers of a timeline's rows (``sim_score.py``): short
    model-minutes (ready replicas x per-replica rps below the demand), the shortfall, GPU-hours
    (each minute's fleet-wide ``gpus_billed`` once) against the lower bound."""
    short = [r for r in rows if r.ready_replicas * r.per_replica_rps < r.demand_rps * (1 - _EPS)
             - _EPS]
    short_minutes = {r.minute_at for r in short}
    minutes = sorted({r.minute_at for r in rows})
    demand = sum(r.demand_rps for r in rows)
    shortfall = sum(r.demand_rps - r.ready_replicas * r.per_replica_rps for r in short)
    billed: dict[Any, float] = {r.minute_at: r.gpus_billed for r in rows}
    gpu_hours = sum(billed.values()) / 60
    lower = sum(r.demand_rps / r.per_replica_rps * r.gpu_per_replica for r in rows) / 60
    return {
        "minutes": len(minutes), "model_minutes": len(rows),
        "short_model_minutes": len(short),
        "short_model_minutes_pct": round(100 * len(short) / len(rows), 4) if rows else 0.0,
        "minutes_any_short": len(short_minutes),
        "shortfall_requests": round(shortfall * 60, 1),
        "shortfall_pct_of_demand": round(100 * shortfall / demand, 4) if demand else 0.0,
        "gpu_hours": round(gpu_hours, 3),
        "gpu_hours_lower_bound": round(lower, 3),
        "gpu_hours_over_lower_bound": _ratio(gpu_hours, lower),
    }


def billed_cost_usd(rows: Sequence[MinuteRow], prices: Mapping[str, float]) -> float:
    """What the minutes of ``rows`` cost: each minute's GPUs billed of each product
    (``product_gpus_billed``, once a minute and product) at ``prices`` (USD per GPU-hour)."""
    billed = {(r.minute_at, r.gpu_product): r.product_gpus_billed for r in rows}
    unpriced = sorted({product for _, product in billed} - set(prices))
    if unpriced:
        raise ValueError(f"no price per GPU-hour of {', '.join(unpriced)}")
    return round(sum(gpus * prices[product] for (_, product), gpus in billed.items()) / 60, 2)


def summarize(run: PolicyRun, config: SimConfig) -> dict[str, Any]:
    """Short model-minutes, shortfall, GPU-hours against the lower bound, cost."""
    rows = run.rows
    by_product = run.stats.gpu_hours_by_product
    cost = sum(hours * config.fleet.prices[product] for product, hours in by_product.items())
    return {
        "policy": run.policy, "seed": run.seed, **headline(rows),
        "cost_usd": round(cost, 2),
        "gpu_hours_by_product": {p: round(h, 3) for p, h in sorted(by_product.items())},
        "usd_per_gpu_hour_by_product": {p: config.fleet.prices[p] for p in sorted(by_product)},
        "mean_idle_replicas": round(sum(r.idle_replicas for r in rows) / len(rows), 3)
        if rows else 0.0,
        "ticks": run.stats.ticks, "actions": run.stats.actions,
        "forecasts": run.stats.forecasts,
        "forecast_methods": dict(run.stats.forecast_methods),
        "forecast_fallbacks": dict(run.stats.forecast_fallbacks),
        "uncalibrated_forecasts": run.stats.uncalibrated_forecasts,
        "demand_reasons": dict(run.stats.demand_reasons),
        "held_by_guards": dict(run.stats.skipped_reasons),
    } | ({"profile_rps_in_use": {m: round(v, 4) for m, v in run.stats.profile_rps.items()},
          "profile_rps_range": {m: [round(low, 4), round(high, 4)]
                                for m, (low, high) in run.stats.profile_rps_range.items()},
          "profile_corrected_ticks": {m: run.stats.profile_corrected_ticks[m]
                                      for m in run.stats.profile_rps}}
         if run.stats.profile_rps else {}) | (
        {"hints_capped": {m: t.summary() for m, t in sorted(run.stats.hints_capped.items())}}
        if run.stats.hints_capped else {})


def _ratio(gpu_hours: float, lower: float) -> float | None:
    """GPU-hours over the lower bound; None when the bound is 0, or so small the ratio is not
    a finite number (JSON has no Infinity)."""
    if not lower:
        return None
    ratio = gpu_hours / lower
    return round(ratio, 4) if math.isfinite(ratio) else None
