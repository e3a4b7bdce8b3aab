"""What a wrong offline profile costs each policy: ``language/m-large`` really serves
``--true-factor`` x its profiled 2 rps per replica; predictive with ``--profile-correction``,
predictive without, and reactive (KEDA/HPA at 0.8 of the profile), judged by
``../shared/bench/sim_score.py`` like run.py.

    python benchmarks/autoscaling/misprofile.py [--true-factor 0.8] [--days 14] [--seed 1]

Merges its numbers into benchmarks/results/autoscaling.json under
``misprofiled["f<factor>"]["seed<seed>"]`` (other keys and runs untouched) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from run import (  # run.py is a script beside this one
    COLDSTART,
    JUDGE,
    MODELS,
    OUT,
    REPO,
    RESULTS,
    TRACE,
    judge,
    print_table,
    row,
    simulate,
    trace_for,
)

from benchmarks.provenance import provenance, start

MODEL = "language/m-large"


def misprofiled_models(factor: float, out: Path) -> Path:
    """The benchmark's models file with MODEL's true throughput at ``factor`` x its profile
    (cold-start sample paths made absolute, since the copy lives elsewhere)."""
    doc: dict[str, Any] = yaml.safe_load(MODELS.read_text())
    for model in doc["models"]:
        samples = model["cold_start"].get("samples_ms_csv")
        if samples:
            model["cold_start"]["samples_ms_csv"] = str((MODELS.parent / samples).resolve())
        if model["name"] == MODEL:
            model["true_per_replica_rps"] = factor * float(model["per_replica_rps"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def commit() -> str:
    """The worktree's commit (``-dirty`` with uncommitted changes), for the results."""
    done = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                          text=True, cwd=REPO, check=False)
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--true-factor", type=float, default=0.8)
    parser.add_argument("--days", type=float, default=None, help="replay only the first N days")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not all(p.is_file() for p in (TRACE, COLDSTART, JUDGE)):
        print("skipping the misprofiled benchmark: ../shared absent")
        return
    started = time.monotonic()
    begun = start()
    trace = trace_for(args.days)
    base = OUT / "misprofiled" / f"f{args.true_factor:g}_seed{args.seed}"
    models = misprofiled_models(args.true_factor, base / "models.yaml")
    runs = {"predictive + correction": ["--policy", "predictive", "--profile-correction"],
            "predictive": ["--policy", "predictive"], "reactive": ["--policy", "reactive"]}
    timelines, product = {}, {}
    for label, flags in runs.items():
        path = base / f"{label.replace(' + ', '_').replace(' ', '_')}.csv"
        product[label] = simulate(trace, path, args.seed, "auto", [*flags],
                                  models=models)["policies"]
        timelines[label] = path
    judged = judge(timelines, "reactive")
    rows = [row(label, judged["policies"][label]) for label in timelines]
    print_table(f"{MODEL} serving {args.true_factor:g} x its profile, seed {args.seed}", rows)
    doc = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    by_factor: dict[str, dict[str, Any]] = doc.setdefault("misprofiled", {})
    by_factor.setdefault(f"f{args.true_factor:g}", {})[f"seed{args.seed}"] = {
        "model": MODEL, "true_factor": args.true_factor, "seed": args.seed,
        "days": args.days or 14, "trace": str(trace.relative_to(REPO.parent)),
        "rows": rows, "judge": judged, "product_reported": product,
        "wall_s": round(time.monotonic() - started, 1), "commit": commit(),
        "provenance": provenance(begun)}
    RESULTS.write_text(json.dumps(doc, indent=2, default=str))
    print(f"\nwrote {RESULTS.relative_to(REPO)} "
          f"(key misprofiled.f{args.true_factor:g}.seed{args.seed})")


if __name__ == "__main__":
    main()
