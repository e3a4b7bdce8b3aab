"""The live loop of ``headroom demo`` from a pinned start time, and what its calibration costs.

``headroom demo --minutes N --no-dashboard --json`` starts at the wall clock and its synthetic
traffic follows the time of day, so two runs compare only from the same start. This runs the
demo's own ``Demo`` (what that command runs, without the gRPC server) from ``--start`` on a new
SQLite store and prints the same JSON summary, plus, with ``--tick-cost``, the CPU time of the
reconcile loop's calibration step (``calibrated_latest``) on a full default window: 4,032 scored
records for each of the demo's 6 models.

    python benchmarks/autoscaling/live_demo.py --minutes 120 [--start 2026-11-30T09:00:00Z]
    python benchmarks/autoscaling/live_demo.py --tick-cost
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from controlplane.autoscaling.issued import IssuedForecast
from controlplane.demo import Demo
from controlplane.forecast_calibration import CalibrationConfig, calibrated_latest
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.ledger import SqlForecastLedger
from forecaster.types import Forecast


def run_demo(minutes: float, start_at: datetime, db: Path) -> dict[str, object]:
    # the fitted forecaster state beside the store, not in the working directory
    demo = Demo(load_settings(db={"url": f"sqlite:///{db}"},
                              forecast={"state_dir": str(db.parent / "forecaster-state")}),
                start_at)
    try:
        demo.run_fast(minutes)
    finally:
        demo.shutdown()
    return demo.summary().as_dict()


def tick_cost(db: Path, ticks: int = 20) -> dict[str, float]:
    """CPU ms of ``calibrated_latest`` per tick: the first (table read), then unchanged ticks."""
    settings = load_settings()
    store = Store.open(f"sqlite:///{db}", migrate=True)
    ledger = SqlForecastLedger(store.engine)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    rng = random.Random(1)
    errors = settings.autoscaling.calibration_errors
    step_s = settings.forecast.interval_s
    ledger.record_issued([IssuedForecast(m.name, now - timedelta(seconds=step_s * (errors - k)),
                                         60, 10.0, 11.0, 0.05)
                          for k in range(errors) for m in DEMO_MODELS])
    ledger.record_scored([r.scored(10.0 * rng.lognormvariate(0, 0.1), now)
                          for r in ledger.issued_since(now - timedelta(days=30))])
    store.save_observations([(m.name, now - timedelta(seconds=30 * i), 10.0)
                             for m in DEMO_MODELS for i in range(60)])
    forecasts = {m.name: Forecast(m.name, now, 60, (10.0,) * 20, (11.0,) * 20, "bench")
                 for m in DEMO_MODELS}
    config = CalibrationConfig(settings.autoscaling.calibration_window_s, errors)
    fresh = SqlForecastLedger(store.engine)  # a new process: nothing read yet
    cpu_ms = []
    for i in range(ticks):
        started = time.process_time()
        calibrated_latest(forecasts, fresh, store, config, now + timedelta(seconds=30 * i))
        cpu_ms.append(1000 * (time.process_time() - started))
    return {"records": len(ledger.issued_since(now - timedelta(days=30))),
            "first_tick_cpu_ms": round(cpu_ms[0], 1),
            "unchanged_tick_cpu_ms_median": round(statistics.median(cpu_ms[3:]), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=120.0)
    parser.add_argument("--start", default="2026-11-30T09:00:00Z",
                        help="simulated start (UTC, ISO 8601)")
    parser.add_argument("--tick-cost", action="store_true",
                        help="measure the calibration step instead of running the demo")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.tick_cost:
            out: dict[str, object] = {**tick_cost(Path(tmp) / "cost.db")}
        else:
            start_at = datetime.fromisoformat(args.start.replace("Z", "+00:00"))
            out = run_demo(args.minutes, start_at, Path(tmp) / "demo.db")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
