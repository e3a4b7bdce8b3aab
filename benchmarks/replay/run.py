"""Sim-to-real: does ``headroom simulate`` predict what the live loop does with the same demand?

1. ``headroom demo`` runs the live reconcile loop (forecaster, PlanFleet with MIG / MPS /
   time-slicing, guards, the models table) on the simulated fleet, with its node provisioning,
   image pulls, weight loads and MIG re-layouts, for ``--hours`` from a fixed start.
2. ``headroom trace replay`` (the product's own command) writes the demand the loop observed,
   from the history the demo backfilled before its start on (``--warmup-days``), so simulate's
   forecaster warms up as the live one did; the store's models, each replica credited with the
   throughput the fleet reported (the demo's mis-profiled model serves 0.6 x its profile); serve's
   settings and pools; the loop's own minutes (``trace timeline``); and runs ``headroom simulate
   --policy predictive --policy reactive`` on them.
3. ``../shared/bench/sim_score.py`` scores the recorded timeline beside the simulated ones' same
   minutes (from the demo's start on).

Prints a table and writes ``benchmarks/results/replay.json`` (the judge's whole document, the
demo's summary, the replay's own document, provenance). What simulate does not model is listed
in ``benchmarks/replay/README.md``.

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

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for benchmarks.provenance

from benchmarks.provenance import provenance  # noqa: E402
from benchmarks.provenance import start as provenance_start  # noqa: E402

JUDGE = REPO.parent / "shared" / "bench" / "sim_score.py"
RESULTS = REPO / "benchmarks" / "results" / "replay.json"
START_AT = "2026-12-03T00:00:00Z"  # a Thursday: the demo's traffic follows the time of day
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
        replay = out / "replay"
        replayed = json.loads(_headroom(
            "trace", "replay", "--db", str(db), "--out-dir", str(replay), "--until", until,
            "--days", f"{args.hours / 24:.6f}", "--warmup-days", f"{history_days:.6f}",
            *(a for p in POLICIES for a in ("--policy", p)), "--json", cwd=out).stdout)
        scored = [since(replay / f"simulated.{p}.csv", START_AT, out / f"{p}.csv")
                  for p in POLICIES]
        judged = subprocess.run(
            [sys.executable, str(JUDGE), "--timeline", str(replay / "recorded.csv"),
             *(a for path in scored for a in ("--timeline", str(path))),
             "--label", "recorded", *(a for p in POLICIES for a in ("--label", p)),
             "--gpus-billed", "fleet"],
            capture_output=True, text=True, check=True)
    judge = json.loads(judged.stdout)
    table = {label: {**{k: p.get(k) for k in ("minutes", "model_minutes", "short_model_minutes",
                                              "short_model_minutes_pct", "gpu_hours")},
                     "gpu_hours_over_lower_bound":
                         (p.get("lower_bound") or {}).get("gpu_hours_over_lower_bound"),
                     # the judge has no prices: trace replay's own, at the demo pools' prices
                     "cost_usd": replayed["scores"][label]["cost_usd"]}
             for label, p in judge["policies"].items()}
    print(f"{'timeline':<11} {'minutes':>8} {'short':>6} {'short %':>8} {'GPU-h':>9} "
          f"{'/ LB':>7} {'cost $':>9}")
    for label, row in table.items():
        print(f"{label:<11} {row['minutes']:>8} {row['short_model_minutes']:>6} "
              f"{row['short_model_minutes_pct']:>8.3f} {row['gpu_hours']:>9.1f} "
              f"{row['gpu_hours_over_lower_bound'] or float('nan'):>7.3f} "
              f"{row['cost_usd']:>9,.0f}")
    RESULTS.write_text(json.dumps({
        "benchmark": "replay", "hours": args.hours, "start_at": START_AT,
        "history_days": history_days, "table": table,
        "comparable": judge.get("comparable"), "demo": demo, "replay": replayed,
        "judge": judge, "provenance": provenance(started)}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
