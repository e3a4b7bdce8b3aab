"""Bounds that no placer can beat, computed on the judges' own inputs.

**openb: an upper bound on GPU allocation** for any placer that places every arrival that fits
(the judge's feasibility: a node with the CPU, memory and an idle GPU / a GPU with the share
free), on the judge's exact arrival sequence (``openb_replay.build_arrivals``). Nothing is
released, so free CPU, memory and GPU milli only shrink. Call a share of more than 500 milli
(and no product restriction) *big*: two never share a GPU, and the ``1000 - b`` milli beside a
big share ``b`` only fit smaller shares (a *hole*).

* If every big share is placed, each sits on its own GPU, and at the end the free milli is at
  least the holes' total minus the most that the small shares of the whole sequence can fill of
  them (an integer program over fill patterns; its linear relaxation when not solved to
  optimality, which only loosens the bound).
* Otherwise let ``e`` be the first rejected big share: at that moment no node had a GPU with
  ``e``'s milli free together with ``e``'s CPU and memory, so from then on no pod that needs a
  GPU with at least that much free (whole-GPU pods included) and at least ``e``'s CPU and memory
  can be placed; what can still be placed is the rest. The big shares before ``e`` were all
  placed, so their holes (minus the most small shares can fill) stay free. The hole bound only
  grows with more holes, so it is computed every ``HOLE_GRID`` big shares and the last grid
  point at or before ``e`` is used.

The bound is the largest over these cases. Any set of big share sizes can play the role of
"big" (a first rejection only counts within the set), so the result is the smallest bound over
every set of sizes.

**ParvaGPU: a lower bound on GPUs.** Every segment is one MIG instance of a measured profile
row (1, 2, 3, 4 or 7 compute slices) whose profiled latency is <= 0.45 x the model's SLO,
segments are never shared between models, and a GPU has 7 compute slices. So a scenario needs
at least ceil(sum over models of the fewest slices whose rows reach the model's rate / 7) GPUs;
the fewest slices per model is an exact unbounded-knapsack minimum.

    python benchmarks/placement/bounds.py [--traces default,multigpu50] [--arrive 1.3]

Prints the bounds and writes benchmarks/results/placement_bounds.json (per trace the allocation
bound, per ParvaGPU scenario the fewest slices per model and the GPU bound, and provenance).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # scheduler (the MILP solver) and benchmarks.provenance

from benchmarks.provenance import provenance, start  # noqa: E402

IntArray = npt.NDArray[np.int64]
RESULTS = REPO / "benchmarks" / "results" / "placement_bounds.json"
BENCH = REPO.parent / "shared" / "bench"
OPENB = REPO.parent / "shared" / "data" / "packing" / "openb"
PARVA = REPO.parent / "shared" / "data" / "packing" / "parvagpu"
WHOLE = 1000
SEED = 42  # openb_replay's default sampling seed
#: the judge's tolerances (parvagpu_check.REL_TOL)
REL_TOL = 1e-9
GPU_SLICES = 7
#: the hole bound is computed every this many big shares (it only grows with more holes)
HOLE_GRID = 5
#: HiGHS's relative MIP gap in scheduler.highs
MIP_GAP = 1e-6


def allocation_bound_pct(trace: str, arrive: float) -> float:
    """Upper bound (% of cluster GPU milli) on allocation at ``arrive`` (module docstring)."""
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
    candidates = (share > WHOLE // 2) & (share < WHOLE) & free_products
    sizes = sorted({int(v) for v in share[candidates]})
    bounds = [100.0 * min(int(demand.sum()), cap) / cap]
    for n in range(1, len(sizes) + 1):
        for chosen in itertools.combinations(sizes, n):
            big = np.flatnonzero(candidates & np.isin(share, chosen))
            bounds.append(_bound_for(big, demand, share, gpu_milli, cpu, mem, cap))
    return float(min(bounds))


def _bound_for(big: IntArray, demand: IntArray, share: IntArray, gpu_milli: IntArray,
               cpu: IntArray, mem: IntArray, cap: int) -> float:
    """The bound of the module docstring with the big shares ``big`` (arrival rows)."""
    widest = WHOLE - int(share[big].min()) if big.size else 0
    small = share[(share > 0) & (share <= widest)]
    items = {int(v): int(c) for v, c in zip(*np.unique(small, return_counts=True), strict=True)}

    def hole_bound(first: int) -> int:
        """Free milli left at least by the holes of the first ``first`` big shares."""
        holes: dict[int, int] = {}
        for b in share[big[:first]].tolist():
            holes[WHOLE - b] = holes.get(WHOLE - b, 0) + 1
        return sum(h * n for h, n in holes.items()) - most_filled(holes, items)

    total = int(demand.sum())
    worst = min(total, cap - hole_bound(big.size))  # every big share placed
    grid = {k: hole_bound(k) for k in range(0, big.size, HOLE_GRID)}
    for j, r in enumerate(big.tolist()):
        later = np.arange(demand.size) > r
        blocked = later & (gpu_milli >= share[r]) & (cpu >= cpu[r]) & (mem >= mem[r])
        placeable = int(demand[:r].sum()) + int(demand[later & ~blocked].sum())
        worst = max(worst, min(placeable, cap - grid[j - j % HOLE_GRID]))
    return 100.0 * worst / cap


def most_filled(holes: dict[int, int], items: dict[int, int],
                time_limit_s: float = 20.0) -> int:
    """The most milli that shares of sizes ``items`` (size -> count) can fill of ``holes``
    (size -> count), each hole holding shares that sum to at most its size: an integer program
    over fill patterns, or its linear relaxation (an upper bound) when not proven optimal."""
    from scheduler.domain.milp import Milp
    from scheduler.highs import HighsSolver

    sizes = sorted(items)
    problem = Milp()
    fills: list[int] = []
    use: dict[int, dict[int, float]] = {s: {} for s in sizes}
    for hole, count in sorted(holes.items()):
        chosen = []
        for pattern in _patterns(hole, [s for s in sizes if s <= hole]):
            if not pattern:
                continue
            var = problem.var(f"h{hole}:{pattern}", -float(sum(pattern)))
            fills.append(sum(pattern))
            chosen.append(var)
            for s in set(pattern):
                use[s][var] = float(pattern.count(s))
        if chosen:
            problem.row(dict.fromkeys(chosen, 1.0), upper=float(count))
    for s in sizes:
        if use[s]:
            problem.row(use[s], upper=float(items[s]))
    if not fills:
        return 0
    solver = HighsSolver()
    found = solver.solve(problem, time_limit_s)
    if found is None or not found.optimal:
        problem.integer = [False] * len(problem.integer)
        found = solver.solve(problem, time_limit_s)
        assert found is not None and found.optimal
    # HiGHS proves optimality within a relative gap of 1e-6: allow for it (and for rounding).
    best = sum(f * x for f, x in zip(fills, found.values, strict=True))
    return math.ceil(best * (1 + MIP_GAP)) + 1


def _patterns(room: int, sizes: list[int]) -> list[tuple[int, ...]]:
    """Every multiset (non-increasing tuple) of ``sizes`` summing to at most ``room``."""
    out: list[tuple[int, ...]] = [()]
    for k, s in enumerate(sizes):
        if s <= room:
            out += [(s, *rest) for rest in _patterns(room - s, sizes[k:])]
    return out


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
    started = start()
    sys.path.insert(0, str(BENCH))
    openb: dict[str, dict[str, Any]] = {}
    for trace in args.traces.split(","):
        began = time.perf_counter()
        pct = allocation_bound_pct(trace, args.arrive)
        openb[trace] = {"allocation_pct_at_most": pct,
                        "wall_s": round(time.perf_counter() - began, 1)}
        print(f"openb {trace}: allocation at {args.arrive:.0%} <= {pct:.4f}% for any placer "
              "that places every arrival that fits")
    bounds = parvagpu_bounds()
    for scenario, b in bounds.items():
        print(f"ParvaGPU {scenario}: >= {b['slices']} compute slices, so >= "
              f"{b['gpus_at_least']} GPUs  {b['per_model']}")
    total = sum(b["gpus_at_least"] for b in bounds.values())
    print(f"ParvaGPU total: >= {total} GPUs")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "benchmark": "placement bounds",
        "openb": {"arrive": args.arrive, "seed": SEED,
                  "what": "upper bound on GPU allocation (% of cluster GPU milli) at `arrive` "
                          "for any placer that places every arrival that fits",
                  "traces": openb},
        "parvagpu": {"what": "lower bound on GPUs per scenario: ceil(sum over models of the "
                             "fewest compute slices (per_model) whose profile rows within "
                             "0.45 x SLO reach the model's rate / 7)",
                     "scenarios": bounds, "total_gpus_at_least": total},
        "provenance": provenance(started)}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
