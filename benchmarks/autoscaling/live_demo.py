"""The live loop of ``headroom demo`` from a pinned start time, and what its calibration costs.

``headroom demo --minutes N --no-dashboard --json`` starts at the wall clock and its synthetic
traffic follows the time of day, so two runs compare only from the same start. This runs the
demo's own ``Demo`` (what that command runs, without the gRPC server) from ``--start`` on a new
SQLite store and prints the same JSON summary, plus, with ``--tick-cost``, the CPU time of the
reconcile loop's calibration step (``calibrated_latest``) on a full default window: 4,032 scored
records for each of the demo's 6 models.

    python benchmarks/autoscaling/live_demo.py --minutes 120 [--start 2026-11-30T09:00:00Z]
    python benchmarks/autoscaling/live_demo.py --tick-cost
    python benchmarks/autoscaling/live_demo.py --minutes 480 --profile-correction --true-factor 0.6

``--profile-correction`` runs the demo twice from the same start, with the online profile
correction on and off (``autoscaling.profile_correction.enabled``), ``mistral-7b-support``
really serving ``--true-factor`` x its profile, and reports its short model-minutes, its
GPU-hours (GPU share of its replicas) and its last correction, and the fleet's, merged into
``benchmarks/results/autoscaling_live.json`` under ``profile_correction``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # for benchmarks.provenance

from benchmarks.provenance import provenance, start
from controlplane.autoscaling.issued import IssuedForecast
from controlplane.demo import Demo
from controlplane.forecast_calibration import CalibrationConfig, calibrated_latest
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.ledger import SqlForecastLedger
from forecaster.types import Forecast


def run_demo(minutes: float, start_at: datetime, db: Path,
             **overrides: dict[str, object]) -> dict[str, object]:
    return _run(minutes, start_at, db, **overrides).summary().as_dict()


def _run(minutes: float, start_at: datetime, db: Path, **overrides: dict[str, object]) -> Demo:
    # the fitted forecaster state beside the store, not in the working directory
    demo = Demo(load_settings(None, db={"url": f"sqlite:///{db}"},
                                    forecast={"state_dir": str(db.parent / "forecaster-state")},
                                    **overrides), start_at)
    try:
        demo.run_fast(minutes)
    finally:
        demo.shutdown()
    return demo


MISTRAL = "mistral-7b-support"


def correction_run(minutes: float, start_at: datetime, db: Path, enabled: bool,
                   true_factor: float) -> dict[str, object]:
    """One demo run with the profile correction on or off: the fleet's summary, mistral's
    short model-minutes and GPU-hours, and the profile the last tick sized it with."""
    started = time.monotonic()
    demo = _run(minutes, start_at, db, sim={"true_throughput_factor": {MISTRAL: true_factor}},
                autoscaling={"profile_correction": {"enabled": enabled}})
    summary = demo.summary().as_dict()
    tally = demo.runtime.tally.models[MISTRAL]
    profile = next(p for p in demo.store.last_profiles() if p.model == MISTRAL)
    return {
        "fleet": {k: summary[k] for k in ("served_share", "short_model_minutes_pct",
                                          "gpu_hours", "gpus_peak", "cost_usd", "ticks")},
        "fleet_short_model_minutes": round(demo.runtime.tally.short_model_s / 60, 1),
        MISTRAL: {"short_model_minutes": round(tally.short_s / 60, 1),
                  "short_model_minutes_pct": round(100 * tally.short_s / tally.model_s, 2),
                  "gpu_hours": round(tally.gpu_s / 3600, 3),
                  "offline_rps": profile.offline_rps,
                  "corrected_rps": round(profile.corrected_rps, 3),
                  "factor": round(profile.factor, 3), "reason": profile.reason},
        "wall_s": round(time.monotonic() - started, 1),
    }


def compare_correction(minutes: float, start_at: datetime, tmp: Path,
                       true_factor: float) -> dict[str, object]:
    runs = {}
    for name, enabled in (("on", True), ("off", False)):
        (tmp / name).mkdir()
        runs[name] = correction_run(minutes, start_at, tmp / name / "demo.db", enabled,
                                    true_factor)
    return {"minutes": minutes, "start_at": start_at.isoformat().replace("+00:00", "Z"),
            "true_factor": {MISTRAL: true_factor}, **runs}


def merge_result(key: str, run: dict[str, object]) -> None:
    """Add ``run`` to the results file under ``key`` (one entry per minutes and true factor),
    keeping everything else there."""
    path = Path(__file__).resolve().parents[1] / "results" / "autoscaling_live.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    kept = [r for r in data.get(key, {}).get("runs", [])
            if (r["minutes"], r["true_factor"]) != (run["minutes"], run["true_factor"])]
    data[key] = {"what": "headroom demo from a pinned start with the online profile "
                         "correction on and off; mistral-7b-support really serves true_factor "
                         "x its profile (sim.true_throughput_factor)",
                 "command": "python benchmarks/autoscaling/live_demo.py --minutes N "
                            "--profile-correction --true-factor F",
                 "runs": sorted([*kept, run], key=lambda r: (r["minutes"],
                                                             str(r["true_factor"])))}
    path.write_text(json.dumps(data, indent=2) + "\n")


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
    parser.add_argument("--profile-correction", action="store_true",
                        help="run with the profile correction on and off and merge the result "
                             "into benchmarks/results/autoscaling_live.json")
    parser.add_argument("--true-factor", type=float, default=0.6,
                        help="what mistral-7b-support really serves / its profile")
    args = parser.parse_args()
    begun = start()
    out: dict[str, object]
    with tempfile.TemporaryDirectory() as tmp:
        if args.profile_correction:
            start_at = datetime.fromisoformat(args.start.replace("Z", "+00:00"))
            out = compare_correction(args.minutes, start_at, Path(tmp), args.true_factor)
            merge_result("profile_correction", {**out, "provenance": provenance(begun)})
        elif args.tick_cost:
            out = {**tick_cost(Path(tmp) / "cost.db")}
        else:
            start_at = datetime.fromisoformat(args.start.replace("Z", "+00:00"))
            out = run_demo(args.minutes, start_at, Path(tmp) / "demo.db")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
