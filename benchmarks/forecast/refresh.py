"""Refresh time of the forecast job for 1,000 synthetic series (7 days at 1 minute).

Runs exactly what ``headroom forecast run`` runs (``controlplane.forecast_job.run_job``: fetch,
forecast in a process pool with stored state, store into a real SQLite store) in three ticks:

* cold    - empty state directory: every model fits (Prophet cold + level model);
* steady  - 5 minutes later: stored fits are reused (only models whose staggered anchor passed
            in those 5 minutes refit);
* refit   - 6 hours later: every model's level-model anchor has passed (all refit, Prophet
            warm-started from stored parameters where its daily anchor passed too). With
            staggered anchors this load is spread over 6 hours in production; it is the worst
            case of one tick if all anchors coincided.

    python benchmarks/forecast/refresh.py [--series 1000] [--workers 2] [--step-s 60]
                                          [--fit-budget-s S]

Writes benchmarks/results/forecast_refresh.json (``--step-s 600``: 10-minute series, which the
boosted model serves: forecast_refresh_10min.json). With ``--fit-budget-s`` the job starts first
fits only for that many wall seconds per tick (``controlplane.forecast_pool``): the cold tick
defers the rest to persistence, and ``catch-up`` ticks every 5 minutes fit them until none is
left, before the steady tick; there is no refit tick, since the budget does not bound refits of
models with state (results: ``..._budget.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.provenance import provenance, start  # noqa: E402
from controlplane.forecast_job import JobConfig, JobReport, run_job  # noqa: E402
from controlplane.store import Store  # noqa: E402
from forecaster.types import TrafficSeries  # noqa: E402

STEP_S = 60
HISTORY_S = 7 * 86_400
NOW = datetime(2025, 6, 9, 0, 0, tzinfo=UTC)
EXTRA_S = 6 * 3600 + 600  # data beyond NOW for the later ticks
RESULTS = REPO / "benchmarks" / "results" / "forecast_refresh.json"


def synthetic(n: int, seed: int = 0, step_s: int = STEP_S) -> dict[str, np.ndarray]:
    """Diurnal + weekly shape, wandering level, noise and bursts; some sparse, some gappy
    (requests per step; the 1-minute defaults scale with the step)."""
    rng = np.random.default_rng(seed)
    steps = (HISTORY_S + EXTRA_S) // step_s
    per = step_s // STEP_S
    t = np.arange(steps) * step_s
    out: dict[str, np.ndarray] = {}
    for i in range(n):
        level = rng.lognormal(3, 1.2)
        phase = rng.uniform(0, 2 * np.pi)
        day = 1 + rng.uniform(0.2, 0.7) * np.sin(2 * np.pi * t / 86_400 + phase)
        week = 1 + 0.15 * np.sin(2 * np.pi * t / (7 * 86_400))
        wander = np.exp(np.cumsum(rng.normal(0, 0.003 * np.sqrt(per), steps)))
        bursts = 1 + (rng.random(steps) < 0.002 * per) * rng.uniform(1, 4, steps)
        rate = level * per * day * week * wander * bursts
        values = rng.poisson(np.maximum(rate, 0) * 1.0).astype(float)  # requests per step
        if i % 10 == 0:  # a two-hour scrape gap
            values[rng.integers(0, steps - 300 // per):][:120 // per] = np.nan
        out[f"model-{i:04d}"] = values
    return out


class MemorySource:
    """In-memory histories (what a source returns), sliced to the requested window."""

    def __init__(self, data: dict[str, np.ndarray], step_s: int = STEP_S) -> None:
        self.data = data
        self.step_s = step_s
        self.start = NOW - timedelta(seconds=HISTORY_S)

    def model_names(self) -> list[str]:
        return list(self.data)

    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries:
        lo = int((since_at - self.start).total_seconds()) // self.step_s
        hi = int((until_at - self.start).total_seconds()) // self.step_s
        return TrafficSeries(model, self.step_s, since_at,
                             tuple(self.data[model][lo:hi].tolist()))


def tick(label: str, source: MemorySource, store: Store, at: datetime, config: JobConfig,
         ) -> dict[str, Any]:
    print(f"-- {label} tick at {at.isoformat()} ...", file=sys.stderr, flush=True)
    started, cpu = time.perf_counter(), cpu_s()
    report: JobReport = run_job(source, store, at, config)
    wall, cpu = time.perf_counter() - started, cpu_s() - cpu
    return {"tick": label, "at": at.isoformat(), "models": report.models,
            "forecasts": len(report.forecasts), "failed": len(report.failed),
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "load_average_at_end": os.getloadavg(), "fetch_s": round(report.fetch_s, 2),
            "compute_s": round(report.compute_s, 2), "store_s": round(report.store_s, 2),
            "refits": report.refits, "reused_state": report.reused,
            "deferred": report.deferred, "seasonal_fits": report.seasonal_fits,
            "methods": report.methods, "fallbacks": report.fallbacks}


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and its finished children: the job, its
    worker processes and their CmdStan optimizer runs. Unlike the wall time, this barely
    depends on what else the machine is running."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--step-s", type=int, default=STEP_S, choices=(STEP_S, 600))
    ap.add_argument("--fit-budget-s", type=float, default=None,
                    help="wall seconds per tick for first fits (default: no limit)")
    args = ap.parse_args()
    started = start()
    t0 = time.perf_counter()
    data = synthetic(args.series, step_s=args.step_s)
    gen_s = time.perf_counter() - t0
    source = MemorySource(data, args.step_s)
    rows = []
    with tempfile.TemporaryDirectory(prefix="headroom-refresh-") as tmp:
        store = Store.open(f"sqlite:///{tmp}/bench.db", migrate=True)
        config = JobConfig(horizon_s=1200, step_s=args.step_s, history_s=HISTORY_S, method="auto",
                           workers=args.workers, state_dir=Path(tmp) / "state",
                           fit_budget_s=args.fit_budget_s)
        rows.append(tick("cold", source, store, NOW, config))
        at = NOW
        while rows[-1]["deferred"] and len(rows) < 60:  # the deferred models' first fits
            at += timedelta(minutes=5)
            rows.append(tick(f"catch-up {len(rows)}", source, store, at, config))
        rows.append(tick("steady", source, store, at + timedelta(minutes=5), config))
        if args.fit_budget_s is None:  # the budget bounds first fits only, not refits
            rows.append(tick("refit", source, store, NOW + timedelta(hours=6, minutes=5), config))
    print(f"{'tick':11s} {'wall s':>7s} {'cpu s':>7s} {'load':>5s} {'fetch':>6s} {'compute':>8s} "
          f"{'store':>6s} {'refits':>6s} {'reused':>6s} {'deferred':>8s} {'prophet':>7s}  methods")
    for r in rows:
        print(f"{r['tick']:11s} {r['wall_s']:7.1f} {r['cpu_s']:7.1f} "
              f"{r['load_average_at_end'][0]:5.1f} {r['fetch_s']:6.1f} {r['compute_s']:8.1f} "
              f"{r['store_s']:6.1f} {r['refits']:6d} {r['reused_state']:6d} "
              f"{r['deferred']:8d} {r['seasonal_fits']:7d}  {r['methods']}")
    doc = {"benchmark": "forecast refresh", "series": args.series,
           "history": f"7 days at {args.step_s} s ({HISTORY_S // args.step_s:,} points)",
           "workers": args.workers, "fit_budget_s": args.fit_budget_s,
           "cpus": os.cpu_count(), "load_average_at_end": os.getloadavg(),
           "generate_s": round(gen_s, 1), "target_s": 60, "ticks": rows,
           "provenance": provenance(started)}
    out = RESULTS if args.step_s == STEP_S else RESULTS.with_name("forecast_refresh_10min.json")
    if args.fit_budget_s is not None:
        out = out.with_name(f"{out.stem}_budget.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
