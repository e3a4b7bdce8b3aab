"""Bounds that no placer can beat, computed on the judges' own inputs.

**openb: an upper bound on GPU allocation** for any placer that places every arrival that fits
(the judge's feasibility: a node with the CPU, memory and an idle GPU / a GPU with the share
free), on the judge's exact arrival sequence (``openb_replay.build_arrivals``). Nothing is
released, so free CPU, memory and GPU milli only shrink. Take a share size ``m`` > 500 milli (two
never share a GPU; the ``1000 - m`` left beside one only fits shares <= ``1000 - m``):

* if every ``m``-share is placed, each sits on its own GPU, and at the end those GPUs still have
  ``(1000 - m) x count - (all milli of shares <= 1000 - m)`` free at least;
* otherwise let ``e`` be the first rejected ``m``-share: at that moment no node had a GPU with
  ``m`` free together with ``e``'s CPU and memory, so from then on no pod that needs a GPU with
  >= ``m`` free (whole-GPU pods and shares >= ``m``) and at least ``e``'s CPU and memory can be
  placed; what can still be placed is the rest; and the ``m``-shares before ``e`` were all placed
  (first case's argument for them).

The bound is the largest over these cases, then the smallest over ``m``.

**ParvaGPU: a lower bound on GPUs.** Every segment is one MIG instance of a measured profile
row (1, 2, 3, 4 or 7 compute slices) whose profiled latency is <= 0.45 x the model's SLO,
segments are never shared between models, and a GPU has 7 compute slices. So a scenario needs
at least ceil(sum over models of the fewest slices whose rows reach the model's rate / 7) GPUs;
the fewest slices per model is an exact unbounded-knapsack minimum.

    python benchmarks/placement/bounds.py [--traces default,multigpu50] [--arrive 1.3]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO.parent / "shared" / "bench"
OPENB = REPO.parent / "shared" / "data" / "packing" / "openb"
PARVA = REPO.parent / "shared" / "data" / "packing" / "parvagpu"
WHOLE = 1000
SEED = 42  # openb_replay's default sampling seed
#: the judge's tolerances (parvagpu_check.REL_TOL)
REL_TOL = 1e-9
GPU_SLICES = 7


def allocation_bound_pct(trace: str, arrive: float) -> tuple[float, int]:
    """Upper bound (% of cluster GPU milli) on allocation at ``arrive`` and the share size
    that gives it."""
    import openb_replay as judge  # type: ignore[import-not-found]  # ../shared/bench

    inv = judge.load_nodes(OPENB / "openb_node_list_gpu_node.csv")
    pods, _, _ = judge.load_pods(OPENB / f"openb_pod_list_{trace}.csv")
    arrivals = judge.build_arrivals(pods, inv.total_gpu_milli, arrive, SEED)
    seq = [pods[i] for i in arrivals.seq]
    cap = inv.total_gpu_milli
    demand = np.array([p.demand_milli for p in seq], dtype=np.int64)
    share = np.array([p.gpu_milli if p.num_gpu == 1 else 0 for p in seq], dtype=np.int64)
    gpu_milli = np.array([p.gpu_milli if p.num_gpu else 0 for p in seq], dtype=np.int64)
    cpu = np.array([p.cpu_milli for p in seq], dtype=np.int64)
    mem = np.array([p.memory_mib for p in seq], dtype=np.int64)
    free_products = np.array([not p.gpu_products for p in seq])
    best: tuple[float, int] = (100.0 * min(int(demand.sum()), cap) / cap, 0)
    for m in sorted({int(s) for s in share if WHOLE // 2 < s < WHOLE}):
        hole = WHOLE - m
        fillers = int(share[(share > 0) & (share <= hole)].sum())
        rows = np.flatnonzero((share == m) & free_products)
        worst = min(int(demand.sum()), cap - (hole * rows.size - fillers))  # all placed
        for j, r in enumerate(rows.tolist()):
            later = np.arange(demand.size) > r
            blocked = later & (gpu_milli >= m) & (cpu >= cpu[r]) & (mem >= mem[r])
            placeable = int(demand[:r].sum()) + int(demand[later & ~blocked].sum())
            worst = max(worst, min(placeable, cap - (hole * j - fillers)))
        if 100.0 * worst / cap < best[0]:
            best = (100.0 * worst / cap, m)
    return best


def parvagpu_bounds() -> dict[str, dict[str, Any]]:
    """Per scenario: the fewest compute slices per model and the GPU lower bound."""
    import parvagpu_check as judge  # type: ignore[import-not-found]  # ../shared/bench

    profiles, _ = judge.load_profiles(PARVA / "a100_80gb_profiles.csv")
    out: dict[str, dict[str, Any]] = {}
    for scenario, demands in sorted(judge.load_scenarios(PARVA / "scenarios.csv").items()):
        slices: dict[str, int] = {}
        for d in demands:
            limit = judge.SLO_LATENCY_FRACTION * d.latency_slo_ms * (1 + REL_TOL)
            rows = [(GPU_SLICES if r.g == 0 else r.g, r.throughput)
                    for r in profiles.get(d.model, {}).values()
                    if r.measured and r.latency_ms <= limit]
            slices[d.model] = fewest_slices(rows, d.rate_rps * (1 - REL_TOL))
        total = sum(slices.values())
        out[scenario] = {"slices": total, "gpus_at_least": math.ceil(total / GPU_SLICES),
                         "per_model": slices}
    return out


def fewest_slices(rows: list[tuple[int, float]], rate_rps: float, limit: int = 1000) -> int:
    """Fewest compute slices whose rows (slices, throughput), any number of each, reach
    ``rate_rps`` (unbounded knapsack); ``limit`` + 1 when none do."""
    capacity = [0.0] * (limit + 1)
    for k in range(1, limit + 1):
        capacity[k] = max([capacity[k - 1]] + [capacity[k - g] + t for g, t in rows if g <= k])
        if capacity[k] >= rate_rps:
            return k
    return limit + 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="default,multigpu30,multigpu40,multigpu50")
    parser.add_argument("--arrive", type=float, default=1.3)
    args = parser.parse_args()
    if not BENCH.is_dir():
        print(f"skipped: {BENCH} (judges and data) is absent")
        return 0
    sys.path.insert(0, str(BENCH))
    for trace in args.traces.split(","):
        pct, m = allocation_bound_pct(trace, args.arrive)
        print(f"openb {trace}: allocation at {args.arrive:.0%} <= {pct:.3f}% for any placer "
              f"that places every arrival that fits (share size {m})")
    bounds = parvagpu_bounds()
    for scenario, b in bounds.items():
        print(f"ParvaGPU {scenario}: >= {b['slices']} compute slices, so >= "
              f"{b['gpus_at_least']} GPUs  {b['per_model']}")
    print(f"ParvaGPU total: >= {sum(b['gpus_at_least'] for b in bounds.values())} GPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
