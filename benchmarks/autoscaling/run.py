"""Predictive vs reactive vs static autoscaling on the ServeGen LLM trace, several seeds, scored by
the independent judge ``../shared/bench/sim_score.py``.

    python benchmarks/autoscaling/run.py [--seeds 1,2,3] [--days 14] [--no-frontier]
                                         [--forecast-method auto|persistence|...]

For each seed, ``headroom simulate`` replays the trace (14 days x 2 models, 10-minute steps held
for each minute) with ``--policy predictive --policy reactive --policy static``; the judge reads
the three timelines and computes short model-minutes, shortfall and GPU-hours (against the
perfect-foresight lower bound). A frontier on seed 1 adds predictive at other shortfall prices
and reactive at other target utilizations, so the policies can be compared at equal cost, and
the predictive policy fed ORACLE forecasts (the trace's own future, ``--oracle-forecast``; a
benchmark-only measurement of the floor that node granularity, whole replicas and cold starts
leave, never a product setting).
Cold starts: GenTD26 base-model load latencies (``../shared/data/coldstart``), node provisioning
p50 120 s / p90 240 s. Data: Alibaba ServeGen (Apache-2.0), Alibaba GenTD26 (research use).

Writes benchmarks/results/autoscaling.json and prints a table. Skips with a message when
../shared is absent.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for benchmarks.provenance

from benchmarks.provenance import provenance, start  # noqa: E402

SHARED = REPO.parent / "shared"
TRACE = SHARED / "data" / "forecast" / "servegen_llm_10min.csv"
COLDSTART = SHARED / "data" / "coldstart" / "basemodel_update_latency_anon.csv"
JUDGE = SHARED / "bench" / "sim_score.py"
MODELS = Path(__file__).with_name("servegen_models.yaml")
OUT = REPO / "benchmarks" / "autoscaling" / "out"
RESULTS = REPO / "benchmarks" / "results" / "autoscaling.json"
POLICIES = ("predictive", "reactive", "static")
ORACLE_LABEL = "predictive ORACLE (benchmark only)"
#: (label, policy, flags): the predictive policy's short-minute price (hot headroom), the same
#: policy without headroom at the earlier default (shortfall cost ratio 4), and the reactive
#: policy's target utilization.
FRONTIER = ([(f"predictive@{v}", "predictive", ["--short-minute-cost-ratio", v])
             for v in ("20", "40", "60", "120")]
            + [("predictive, no headroom, ratio 4", "predictive",
                ["--short-minute-cost-ratio", "0", "--shortfall-cost-ratio", "4"])]
            + [(f"reactive@{v}", "reactive", ["--reactive-target", v])
               for v in ("0.6", "0.7", "0.9")])


def simulate_cmd() -> list[str]:
    probe = subprocess.run(["headroom", "simulate", "--help"], capture_output=True, check=False)
    if probe.returncode == 0:
        return ["headroom", "simulate"]
    return [sys.executable, "-c", "import typer; from controlplane.cli.simulate import "
            "simulate_command as f; typer.run(f)"]


def run(cmd: list[str], what: str, attempts: int = 6) -> dict[str, Any]:
    """Run one command that prints a JSON document. The working tree is shared with engineers
    mid-edit: a failure to even import is retried after a minute (a few times)."""
    started = time.monotonic()
    print(f"  {what} ...", file=sys.stderr, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    while done.returncode != 0 and attempts > 1 and any(
            e in done.stderr for e in ("ImportError", "ModuleNotFoundError")):
        print(f"  {what}: import failed (tree mid-edit?), retrying in 60 s", file=sys.stderr)
        time.sleep(60)
        attempts -= 1
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]}\n"
                         f"command: {shlex.join(cmd)}")
    doc: dict[str, Any] = json.loads(done.stdout)
    doc["_wall_s"] = round(time.monotonic() - started, 1)
    return doc


def judge(timelines: dict[str, Path], baseline: str) -> dict[str, Any]:
    cmd = [sys.executable, str(JUDGE), "--baseline", baseline, "--gpus-billed", "fleet"]
    for label, path in timelines.items():
        cmd += ["--timeline", str(path), "--label", label]
    return run(cmd, f"judge {', '.join(timelines)}")


def trace_for(days: float | None) -> Path:
    if days is None:
        return TRACE
    frame = pd.read_csv(TRACE)
    times = pd.to_datetime(frame["ts"])
    cut = frame[times < times.min() + pd.Timedelta(days=days)]
    # the cut is a copy of shared data: it goes to a temporary directory, never the project
    path = Path(tempfile.mkdtemp(prefix="headroom-servegen-")) / f"servegen_{days:g}d.csv"
    cut.to_csv(path, index=False)
    return path


def simulate(trace: Path, out: Path, seed: int, method: str, extra: list[str],
             reuse: bool = False, models: Path = MODELS) -> dict[str, Any]:
    """Run ``headroom simulate`` (or, with ``reuse``, take the report of an identical earlier
    run whose timelines are still there)."""
    cmd = [*simulate_cmd(), "--trace", str(trace), "--models", str(models), "--timeline-out",
           str(out), "--seed", str(seed), "--forecast-method", method, "--json", *extra]
    saved = out.with_suffix(".product.json")
    if reuse and saved.is_file():
        doc: dict[str, Any] = json.loads(saved.read_text())
        if doc.get("_cmd") == cmd[len(simulate_cmd()):] and all(
                Path(p).is_file() for p in doc["timelines"].values()):
            print(f"  reusing {saved.relative_to(REPO)}", file=sys.stderr)
            return doc
    doc = run(cmd, f"simulate {' '.join(extra)} seed {seed}")
    doc["_cmd"] = cmd[len(simulate_cmd()):]
    saved.write_text(json.dumps(doc, indent=2))
    return doc


def row(label: str, judged: dict[str, Any]) -> dict[str, Any]:
    lb = judged.get("lower_bound") or {}
    return {"label": label, "short_model_minutes": judged["short_model_minutes"],
            "short_pct": judged["short_model_minutes_pct"],
            "minutes_any_short": judged["minutes_any_short"],
            "shortfall_pct_of_demand": judged["shortfall_pct_of_demand"],
            "gpu_hours": judged["gpu_hours"],
            "gpu_hours_over_lower_bound": lb.get("gpu_hours_over_lower_bound")}


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    head = f"  {'policy':<38}{'short':>7}{'short %':>9}{'min any':>9}{'shortfall %':>13}" \
           f"{'GPU-h':>11}{'GPU-h/LB':>10}"
    print(head)
    print("  " + "-" * (len(head) - 2))
    for r in rows:
        ratio = r["gpu_hours_over_lower_bound"]
        print(f"  {r['label']:<38}{r['short_model_minutes']:>7}{r['short_pct']:>9.3f}"
              f"{r['minutes_any_short']:>9}{r['shortfall_pct_of_demand']:>13.4f}"
              f"{r['gpu_hours']:>11.1f}{'-' if ratio is None else f'{ratio:.3f}':>10}")


def targets(per_seed: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    checks = []
    for seeded in per_seed:
        p, r = seeded["predictive"], seeded["reactive"]
        checks.append({
            "seed": seeded["seed"],
            "predictive_short_pct_le_0_5": p["short_pct"] <= 0.5,
            "predictive_gpu_hours_le_1_25_lower_bound":
                (p["gpu_hours_over_lower_bound"] or 99) <= 1.25,
            "predictive_fewer_short_minutes_than_reactive":
                p["short_model_minutes"] < r["short_model_minutes"],
            "predictive_gpu_hours_le_reactive_plus_5pct": p["gpu_hours"] <= 1.05 * r["gpu_hours"],
        })
    keys = [k for k in checks[0] if k != "seed"] if checks else []
    return {"per_seed": checks, "all_seeds": {k: all(c[k] for c in checks) for k in keys}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--days", type=float, default=None, help="replay only the first N days")
    parser.add_argument("--forecast-method", default="auto",
                        help="forecaster method for the predictive policy (default: auto, the "
                             "product's default; 'persistence', the best naive baseline on "
                             "ServeGen, gets its own row)")
    parser.add_argument("--no-frontier", action="store_true")
    parser.add_argument("--skip-contrast", action="store_true",
                        help="leave out the frontier row with the other forecast method "
                             "(persistence, or auto when --forecast-method is not auto)")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse timelines of identical earlier runs (after an interruption)")
    args = parser.parse_args()
    missing = [p for p in (TRACE, COLDSTART, JUDGE) if not p.is_file()]
    if missing:
        print(f"skipping the autoscaling benchmark: {missing[0]} not found (../shared absent)")
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    trace = trace_for(args.days)
    started = time.monotonic()
    begun = start()
    headline: list[dict[str, Any]] = []  # {"seed": n, policy: its row, ...}
    docs: dict[str, Any] = {"product_reported": {}, "judge": {}}
    for seed in seeds:
        base = OUT / f"seed{seed}" / "T.csv"
        product = simulate(trace, base, seed, args.forecast_method,
                           [a for p in POLICIES for a in ("--policy", p)], args.reuse)
        judged = judge({p: base.with_name(f"T.{p}.csv") for p in POLICIES}, "reactive")
        docs["product_reported"][f"seed{seed}"] = product
        docs["judge"][f"seed{seed}"] = judged
        headline.append({"seed": seed, **{p: row(p, judged["policies"][p]) for p in POLICIES}})
        print_table(f"seed {seed}", [headline[-1][p] for p in POLICIES])
    frontier_rows: list[dict[str, Any]] = []
    if not args.no_frontier:
        seed = seeds[0]
        timelines = {"reactive@0.8": OUT / f"seed{seed}" / "T.reactive.csv",
                     "predictive (default)": OUT / f"seed{seed}" / "T.predictive.csv"}
        for label, policy, flags in FRONTIER:
            path = OUT / "frontier" / f"{policy}_{'_'.join(flags).replace('--', '')}.csv"
            simulate(trace, path, seed, args.forecast_method, ["--policy", policy, *flags],
                     args.reuse)
            timelines[label] = path
        # BENCHMARK ONLY: the same predictive policy with perfect-foresight forecasts (the
        # trace's own future), the floor node granularity, whole replicas and cold starts leave.
        path = OUT / "frontier" / "predictive_oracle.csv"
        simulate(trace, path, seed, args.forecast_method,
                 ["--policy", "predictive", "--oracle-forecast"], args.reuse)
        timelines[ORACLE_LABEL] = path
        if not args.skip_contrast:
            other = "persistence" if args.forecast_method != "persistence" else "auto"
            path = OUT / "frontier" / f"predictive_{other}.csv"
            simulate(trace, path, seed, other, ["--policy", "predictive"], args.reuse)
            timelines[f"predictive (default, {other} forecasts)"] = path
        judged = judge(timelines, "reactive@0.8")
        docs["judge"]["frontier"] = judged
        frontier_rows = [row(label, judged["policies"][label]) for label in timelines]
        print_table(f"frontier (seed {seed}; predictive@price of a short model-minute, "
                    "reactive@target utilization)",
                    sorted(frontier_rows, key=lambda r: r["gpu_hours"]))
    mean = {p: {k: round(sum(h[p][k] for h in headline) / len(headline), 4)
                for k in ("short_model_minutes", "short_pct", "minutes_any_short",
                          "shortfall_pct_of_demand", "gpu_hours", "gpu_hours_over_lower_bound")}
            for p in POLICIES}
    print_table(f"mean over seeds {seeds}", [{"label": p, **mean[p]} for p in POLICIES])
    checked = targets(headline)
    print("\ntargets (all seeds):", json.dumps(checked["all_seeds"], indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "benchmark": "autoscaling", "trace": str(trace.relative_to(REPO.parent)),
        "models": str(MODELS.relative_to(REPO)), "seeds": seeds,
        "forecast_method": args.forecast_method, "wall_s": round(time.monotonic() - started, 1),
        "headline": headline, "mean": mean, "frontier": frontier_rows, "targets": checked,
        **docs, "provenance": provenance(begun)}, indent=2, default=str))
    print(f"\nwrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
