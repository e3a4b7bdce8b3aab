"""Sim-to-real: does ``headroom simulate`` predict what the live loop does with the same demand?

1. ``headroom demo`` runs the live reconcile loop (forecaster, PlanFleet with MIG / MPS /
   time-slicing, guards, the models table) on the simulated fleet, with its node provisioning,
   image pulls, weight loads and MIG re-layouts, for ``--hours`` from a fixed start.
2. ``headroom trace export`` writes the demand the loop observed, from the history the demo
   backfilled before its start (``sim.history_s``) on, so simulate's forecaster warms up on it as
   the live one did; ``headroom models list --yaml`` the store's models, to which this script
   adds each mis-profiled model's true throughput per replica (``sim.true_throughput_factor`` x
   its best point: what the demo fleet's replicas really serve) and the demo fleet's
   provisioning delay.
3. ``headroom simulate --policy predictive --policy reactive`` replays that demand with serve's
   settings where simulate's defaults differ (``--config``: profile correction on, target
   utilization 0.8, replica step 8, node step 4) and the demo's pools (node sizes, node limits
   and prices).
4. ``headroom trace timeline`` writes the loop's own minutes; ``../shared/bench/sim_score.py``
   scores them beside the simulated timelines' same minutes (from the demo's start on).

Prints a table and writes ``benchmarks/results/replay.json`` (the judge's whole document, the
demo's and simulate's summaries, provenance). What simulate does not model is listed in
``benchmarks/replay/README.md``.

    python benchmarks/replay/run.py [--hours 24] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for benchmarks.provenance

from benchmarks.provenance import provenance  # noqa: E402
from benchmarks.provenance import start as provenance_start  # noqa: E402

JUDGE = REPO.parent / "shared" / "bench" / "sim_score.py"
RESULTS = REPO / "benchmarks" / "results" / "replay.json"
START_AT = "2026-12-03T00:00:00Z"  # a Thursday: the demo's traffic follows the time of day
#: serve's values of the keys where simulate's defaults differ (simulate's note names them)
SERVE_SETTINGS = {"autoscaling": {"profile_correction": {"enabled": True}},
                  "reconcile": {"target_utilization": 0.8},
                  "safety": {"max_replica_step": 8, "max_node_step": 4}}
POLICIES = ("predictive", "reactive")


def _headroom(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    print(f"  headroom {' '.join(args[:2])} ...", file=sys.stderr, flush=True)
    done = subprocess.run(["headroom", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"headroom {' '.join(args)} failed ({done.returncode}): "
                         f"{done.stderr.strip()[-2000:]}")
    print(f"    {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return done


def models_file(listed: Path) -> dict[str, Any]:
    """The store's models file (``listed``) with the demo fleet: its provisioning delay and each
    model's true throughput per replica where the demo's fleet serves less than the profile (the
    best point the loop sizes it by, x ``sim.true_throughput_factor``)."""
    from controlplane.models_file import load_model_specs
    from controlplane.settings import load_settings

    settings = load_settings()
    products = [p.product for p in settings.pools]
    doc: dict[str, Any] = yaml.safe_load(listed.read_text())
    for model, spec in zip(doc["models"], load_model_specs(listed), strict=True):
        factor = settings.sim.true_throughput_factor.get(spec.name)
        if factor is not None:
            model["true_per_replica_rps"] = spec.best_point(products).replica_rps * factor
    low_s, high_s = settings.sim.node_provision_s  # uniform: p50 the middle, p90 9/10 of the way
    doc["fleet"] = {"node_provision_s": {"p50": (low_s + high_s) / 2,
                                         "p90": low_s + 0.9 * (high_s - low_s)}}
    return doc


def serve_settings() -> dict[str, Any]:
    """``SERVE_SETTINGS`` and the demo's pools, as serve's settings file gives them."""
    from controlplane.settings import load_settings

    return {**SERVE_SETTINGS, "pools": [p.model_dump() for p in load_settings().pools]}


def since(timeline: Path, start_at: str, out: Path) -> Path:
    """The rows of ``timeline`` from ``start_at`` on, written to ``out``."""
    frame = pd.read_csv(timeline)
    first = pd.Timestamp(start_at).tz_localize(None)
    frame[pd.to_datetime(frame["minute"]) >= first].to_csv(out, index=False)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="keep the store, trace, models file and timelines here")
    args = parser.parse_args()
    if not JUDGE.exists():
        raise SystemExit(f"{JUDGE}: the judge is missing (../shared beside the project)")
    from controlplane.settings import load_settings

    started = provenance_start()
    history_days = load_settings().sim.history_s / 86400  # backfilled before the demo's start
    until = (pd.Timestamp(START_AT) + pd.Timedelta(hours=args.hours)).isoformat()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out_dir or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        db = out / "demo.db"
        db.unlink(missing_ok=True)
        demo = json.loads(_headroom(
            "demo", "--minutes", f"{args.hours * 60:g}", "--no-dashboard", "--json", "--db",
            str(db), "--start", START_AT, cwd=out).stdout)
        # the demand from the history the demo backfilled before its start on: the forecaster
        # in simulate warms up on it as the live one did
        _headroom("trace", "export", "--db", str(db), "--out", str(out / "trace.csv"),
                  "--until", until, "--days", f"{history_days + args.hours / 24:.6f}", cwd=out)
        listed = out / "listed.yaml"
        listed.write_text(_headroom("models", "list", "--yaml", "--db", str(db), cwd=out).stdout)
        (out / "models.yaml").write_text(yaml.safe_dump(models_file(listed), sort_keys=False))
        settings = serve_settings()
        (out / "serve.yaml").write_text(yaml.safe_dump(settings))
        _headroom("trace", "timeline", "--db", str(db), "--out", str(out / "recorded.csv"),
                  "--until", until, "--days", f"{args.hours / 24:.6f}", cwd=out)
        simulated = json.loads(_headroom(
            "simulate", "--trace", str(out / "trace.csv"), "--models", str(out / "models.yaml"),
            *(a for p in POLICIES for a in ("--policy", p)), "--config", str(out / "serve.yaml"),
            "--timeline-out", str(out / "simulated.csv"), "--json", cwd=out).stdout)
        scored = [since(out / f"simulated.{p}.csv", START_AT, out / f"{p}.csv") for p in POLICIES]
        judged = subprocess.run(
            [sys.executable, str(JUDGE), "--timeline", str(out / "recorded.csv"),
             *(a for path in scored for a in ("--timeline", str(path))),
             "--label", "recorded", *(a for p in POLICIES for a in ("--label", p)),
             "--gpus-billed", "fleet"],
            capture_output=True, text=True, check=True)
    judge = json.loads(judged.stdout)
    table = {label: {**{k: p.get(k) for k in ("minutes", "model_minutes", "short_model_minutes",
                                              "short_model_minutes_pct", "gpu_hours")},
                     "gpu_hours_over_lower_bound":
                         (p.get("lower_bound") or {}).get("gpu_hours_over_lower_bound")}
             for label, p in judge["policies"].items()}
    print(f"{'timeline':<11} {'minutes':>8} {'short':>6} {'short %':>8} {'GPU-h':>9} "
          f"{'/ LB':>7}")
    for label, row in table.items():
        print(f"{label:<11} {row['minutes']:>8} {row['short_model_minutes']:>6} "
              f"{row['short_model_minutes_pct']:>8.3f} {row['gpu_hours']:>9.1f} "
              f"{row['gpu_hours_over_lower_bound'] or float('nan'):>7.3f}")
    RESULTS.write_text(json.dumps({
        "benchmark": "replay", "hours": args.hours, "start_at": START_AT,
        "history_days": history_days, "serve_settings": settings, "table": table,
        "comparable": judge.get("comparable"), "demo": demo, "simulated": simulated,
        "judge": judge, "provenance": provenance(started)}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
