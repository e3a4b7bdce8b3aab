"""Demand hints in the simulator: announced campaigns on real traffic, with and without the hint.

The first ``--days`` days of ServeGen (``../shared/data/forecast/servegen_llm_10min.csv``, both
models, the autoscaling benchmark's models file) with CAMPAIGNS injected: in each window one
model's demand is multiplied by a factor, as a launch or a marketing push would (a constructed
scenario on real traffic: no trace here records an announced event). ``headroom simulate
--policy predictive`` replays it twice per seed, without and with ``--hints`` announcing each
campaign at its mean demand; the independent judge ``../shared/bench/sim_score.py`` scores
both timelines; short model-minutes inside the campaign windows are counted from the
timelines (the judge's own rule: ready x per-replica rps < demand). Prints a table and writes
``benchmarks/results/hints.json``. The derived trace, the hints file and the timelines go to a
temporary directory removed at the end (shared data is never copied into the project);
``--out-dir`` keeps them in a folder of your choice.

    python benchmarks/hints/run.py [--seeds 1,2,3] [--days 3] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for benchmarks.provenance

from benchmarks.provenance import provenance  # noqa: E402
from benchmarks.provenance import start as provenance_start  # noqa: E402
from benchmarks.scripts import load_script  # noqa: E402

SHARED = REPO.parent / "shared"
TRACE = SHARED / "data" / "forecast" / "servegen_llm_10min.csv"
JUDGE = SHARED / "bench" / "sim_score.py"
MODELS = REPO / "benchmarks" / "autoscaling" / "servegen_models.yaml"
RESULTS = REPO / "benchmarks" / "results" / "hints.json"

#: (model, start, end, demand factor): a launch on day 2 and a push on day 3
CAMPAIGNS = (("language/m-large", "2025-01-02 14:00", "2025-01-02 15:00", 3.0),
             ("language/m-small", "2025-01-03 09:00", "2025-01-03 10:30", 2.5))


def _simulate_cmd() -> list[str]:
    module = load_script(REPO / "benchmarks" / "autoscaling" / "run.py", "autoscaling_run")
    cmd: list[str] = module.simulate_cmd()
    return cmd


def _run(cmd: list[str], what: str) -> dict[str, Any]:
    started = time.monotonic()
    print(f"  {what} ...", file=sys.stderr, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    doc: dict[str, Any] = json.loads(done.stdout)
    doc["_wall_s"] = round(time.monotonic() - started, 1)
    return doc


def build_inputs(days: float, out: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    """The trace with the campaigns injected, the hints file announcing them (both written to
    ``out``), and each campaign's window and announced rate."""
    frame = pd.read_csv(TRACE)
    times = pd.to_datetime(frame["ts"])
    frame = frame[times < times.min() + pd.Timedelta(days=days)].copy()
    times = pd.to_datetime(frame["ts"])
    announced = []
    for model, start, end, factor in CAMPAIGNS:
        inside = (frame["model"] == model) & (times >= start) & (times < end)
        frame.loc[inside, "rate_rps"] = frame.loc[inside, "rate_rps"] * factor
        announced.append({"model": model, "start": start, "end": end, "factor": factor,
                          "rate_rps": round(float(frame.loc[inside, "rate_rps"].mean()), 3)})
    trace = out / f"servegen_{days:g}d_campaigns.csv"
    frame.to_csv(trace, index=False)
    hints = out / "hints.csv"
    with hints.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "start", "end", "rate_rps", "reason"])
        for a in announced:
            writer.writerow([a["model"], a["start"], a["end"], a["rate_rps"], "campaign"])
    return trace, hints, announced


def short_in_windows(timeline: Path, announced: list[dict[str, Any]]) -> int:
    """Short model-minutes of each campaign's model inside its window (the judge's rule)."""
    rows = pd.read_csv(timeline)
    minute = pd.to_datetime(rows["minute"], utc=True).dt.tz_localize(None)
    short = rows["ready_replicas"] * rows["per_replica_rps"] < rows["demand_rps"]
    total = 0
    for a in announced:
        inside = (rows["model"] == a["model"]) & (minute >= a["start"]) & (minute < a["end"])
        total += int((short & inside).sum())
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--days", type=float, default=3.0)
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="keep the derived trace, hints file and timelines here "
                             "(default: a temporary directory, removed at the end)")
    args = parser.parse_args()
    started = provenance_start()
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        results = measure(args.seeds, args.days, args.out_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="headroom-hints-") as tmp:
            results = measure(args.seeds, args.days, Path(tmp))
    print(f"\n{len(results['campaigns'])} campaigns, {results['campaign_model_minutes']} "
          f"model-minutes; first {args.days:g} days of ServeGen")
    print(f"{'seed':<6}{'policy':<22}{'short (all)':>12}{'short in campaigns':>20}"
          f"{'GPU-h':>10}")
    for seed, by_label in results["seeds"].items():
        for label in ("predictive", "predictive + hints"):
            r = by_label[label]
            print(f"{seed:<6}{label:<22}{r['short_model_minutes']:>12}"
                  f"{r['short_in_campaigns']:>20}{r['gpu_hours']:>10.1f}")
    results["provenance"] = provenance(started)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")


def measure(seeds: str, days: float, out_dir: Path) -> dict[str, Any]:
    """Both simulations and the judge per seed, with every file in ``out_dir``."""
    trace, hints, announced = build_inputs(days, out_dir)
    campaign_minutes = sum(int((datetime.fromisoformat(a["end"]) -
                                datetime.fromisoformat(a["start"])) / timedelta(minutes=1))
                           for a in announced)
    results: dict[str, Any] = {"campaigns": announced, "days": days, "seeds": {},
                               "campaign_model_minutes": campaign_minutes}
    for seed in (int(s) for s in seeds.split(",")):
        timelines = {}
        for label, extra in (("predictive", []), ("predictive + hints", ["--hints", str(hints)])):
            out = out_dir / f"seed{seed}_{'hints' if extra else 'plain'}.csv"
            _run([*_simulate_cmd(), "--trace", str(trace), "--models", str(MODELS),
                  "--timeline-out", str(out), "--seed", str(seed), "--policy", "predictive",
                  "--json", *extra], f"simulate {label} seed {seed}")
            timelines[label] = out
        cmd = [sys.executable, str(JUDGE), "--baseline", "predictive", "--gpus-billed", "fleet"]
        for label, path in timelines.items():
            cmd += ["--timeline", str(path), "--label", label]
        judged = _run(cmd, f"judge seed {seed}")
        results["seeds"][f"seed{seed}"] = {
            label: {"short_model_minutes": judged["policies"][label]["short_model_minutes"],
                    "short_in_campaigns": short_in_windows(path, announced),
                    "gpu_hours": judged["policies"][label]["gpu_hours"]}
            for label, path in timelines.items()}
        results["seeds"][f"seed{seed}"]["judge"] = judged
    return results


if __name__ == "__main__":
    main()
