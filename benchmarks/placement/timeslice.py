"""What time-slicing saves a fleet of small dev/batch models: PlanFleet over a real channel.

A fresh ``headroom placement serve`` (as ``run.py`` starts it) gets one PlanFleet request per
seed: ``--models`` small models on an L4 pool and an L40S pool (GPUs without MIG; MPS is not
profiled, as under the default ``k8s.device_plugin_mps: false``), each profiled on both
products at one batch size with its memory stated. The same models are planned twice: with
isolation NONE (dev/batch: PlanFleet may time-slice a whole GPU among them) and with isolation
STRICT (a whole GPU per replica: what PlanFleet did for every model on a GPU without MIG before
it time-sliced). Every plan is checked here: each model's segments cover its rate, no
time-sliced segment's latency is above 0.45 x its SLO, and the memory of a time-sliced GPU's
models (their stated MiB) never exceeds what CUDA can use of it.

The saving is counted in GPUs, as PlanFleet plans them. A node carries one device-plugin config,
so on nodes of several GPUs each k-way kind the plan uses (the table's `k-way kinds`) needs nodes
of its own, which the loop's node targets count (``desired``: whole nodes per kind).

The models are **synthetic** (no public trace gives per-model profiles of a dev fleet): memory
1-10 GiB, whole-GPU latency 5-120 ms at an SLO of 4-40 x it, a rate of 2-60 % of one whole
GPU's throughput (log-uniform). A time-slice's throughput and latency are PlanFleet's model of
time-slicing (1/k of the GPU's time less 10 % for context switches), not a measurement.

    python benchmarks/placement/timeslice.py [--models 40] [--seeds 1,2,3]

Writes benchmarks/results/placement_timeslice.json.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import grpc

from benchmarks.provenance import provenance, start
from benchmarks.scripts import load_script
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.domain import catalog
from scheduler.domain.usable_memory import segment_usable_mib

RESULTS = Path(__file__).resolve().parents[1] / "results" / "placement_timeslice.json"
POOLS = (("L4", 0.80), ("L40S", 1.86))  # $/GPU-hour (REFERENCE.md section 9, on-demand)
SPEED = {"L4": 1.0, "L40S": 2.2}  # throughput relative to an L4 (synthetic)


def _sibling_run() -> Any:
    """``run.py`` beside this file (its Server and table)."""
    return load_script(Path(__file__).resolve().parent / "run.py", "placement_run")


def _models(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        rps_l4 = math.exp(rng.uniform(math.log(20.0), math.log(400.0)))
        latency_ms = math.exp(rng.uniform(math.log(5.0), math.log(120.0)))
        memory_mib = rng.choice([1, 2, 3, 4, 6, 8, 10]) * 1024
        out.append({"model": f"dev-{k:03d}", "memory_mib": memory_mib, "rps_l4": rps_l4,
                    "latency_ms": latency_ms,
                    "slo_ms": latency_ms * rng.uniform(4.0, 40.0),
                    "rate_rps": rps_l4 * math.exp(rng.uniform(math.log(0.02), math.log(0.6)))})
    return out


def _request(models: list[dict[str, Any]], isolation: pb.Isolation.ValueType,
             gpus_per_node: int) -> pb.PlanFleetRequest:
    return pb.PlanFleetRequest(
        models=[pb.ModelDemand(
            model=m["model"], tenant="dev", isolation=isolation, rate_rps=m["rate_rps"],
            latency_slo_ms=m["slo_ms"], cold_start_s=0.0,
            profile=[pb.ProfilePoint(product=p, compute_slices=0, batch_size=8, mps_processes=1,
                                     throughput_rps=m["rps_l4"] * SPEED[p],
                                     latency_ms=m["latency_ms"] / SPEED[p] ** 0.5,
                                     memory_mib=m["memory_mib"]) for p, _ in POOLS])
            for m in models],
        pools=[pb.GpuPool(product=p, max_gpus=500, price_per_gpu_hour=price,
                          gpus_per_node=gpus_per_node) for p, price in POOLS],
        warm=pb.WarmDecision())


def _check(plan: pb.FleetPlan, models: list[dict[str, Any]]) -> list[str]:
    """Problems of ``plan``: a model short of its rate, a segment over 0.45 x its SLO, a
    time-sliced GPU whose models' memory exceeds what CUDA can use of it."""
    by_name = {m["model"]: m for m in models}
    problems = [f"unplaced: {u}" for u in plan.unplaced]
    capacity: dict[str, float] = {}
    for gpu in plan.gpus:
        usable = segment_usable_mib(catalog.lookup(gpu.product), 0)  # type: ignore[arg-type]
        memory = sum(by_name[s.model]["memory_mib"] for s in gpu.segments)
        if len(gpu.segments) > 1 and (usable is None or memory > usable):
            problems.append(f"{gpu.gpu_id}: {memory} MiB of models on {usable} MiB usable")
        for s in gpu.segments:
            capacity[s.model] = capacity.get(s.model, 0.0) + s.throughput_rps
            if s.latency_ms > 0.45 * by_name[s.model]["slo_ms"] + 1e-9:
                problems.append(f"{gpu.gpu_id}: {s.model} at {s.latency_ms:.1f} ms")
    problems += [f"{name}: {capacity.get(name, 0.0):.2f} < {m['rate_rps']:.2f} rps"
                 for name, m in by_name.items() if capacity.get(name, 0.0) < m["rate_rps"] - 1e-6]
    return problems


def _kinds(plan: pb.FleetPlan) -> dict[tuple[str, int], int]:
    """GPUs per (product, ways time-sliced; 0 = not): a node carries one device-plugin
    config, so each pool's k-way time-sliced GPUs and its other GPUs fill nodes of their own."""
    kinds: dict[tuple[str, int], int] = {}
    for gpu in plan.gpus:
        sliced = sum(1 for s in gpu.segments if s.mode == pb.TIME_SLICING)
        kinds[(gpu.product, sliced)] = kinds.get((gpu.product, sliced), 0) + 1
    return kinds


def _nodes(plan: pb.FleetPlan, gpus_per_node: int) -> int:
    return sum(math.ceil(n / gpus_per_node) for n in _kinds(plan).values())


def _node_cost(plan: pb.FleetPlan, gpus_per_node: int) -> float:
    price = dict(POOLS)
    return sum(math.ceil(n / gpus_per_node) * gpus_per_node * price[product]
               for (product, _), n in _kinds(plan).items())


def _row(stub: pb_grpc.PlacementStub, models: list[dict[str, Any]],
         isolation: pb.Isolation.ValueType, gpus_per_node: int = 0) -> dict[str, Any]:
    started = time.perf_counter()
    plan = stub.PlanFleet(_request(models, isolation, gpus_per_node), timeout=120)
    wall_s = time.perf_counter() - started
    sliced = [g for g in plan.gpus if any(s.mode == pb.TIME_SLICING for s in g.segments)]
    return {"gpus": len(plan.gpus), "cost_per_hour": plan.cost_per_hour,
            "time_sliced_gpus": len(sliced),
            "models_time_sliced": len({s.model for g in sliced for s in g.segments}),
            "most_ways": max((len(g.segments) for g in sliced), default=0),
            # a node carries one device-plugin config: each k-way kind needs nodes of its own
            "ways_in_use": sorted({len(g.segments) for g in sliced}),
            "plan_wall_s": wall_s, "problems": _check(plan, models),
            "nodes_of_8": _nodes(plan, 8), "node_cost_per_hour_of_8": _node_cost(plan, 8)}


def _seed_row(stub: pb_grpc.PlacementStub, count: int, seed: int) -> dict[str, Any]:
    models = _models(count, seed)
    sliced, whole = _row(stub, models, pb.NONE), _row(stub, models, pb.STRICT)
    on_8 = _row(stub, models, pb.NONE, gpus_per_node=8)  # PlanFleet told the node size
    return {"seed": seed, "time_sliced": sliced, "whole_gpus": whole,
            "time_sliced_8_gpu_nodes": on_8,
            "cost_saved": 1 - sliced["cost_per_hour"] / whole["cost_per_hour"],
            "problems": len(sliced["problems"]) + len(whole["problems"]) + len(on_8["problems"])}


def _cells(r: dict[str, Any]) -> list[Any]:
    sliced, whole = r["time_sliced"], r["whole_gpus"]
    return [r["seed"], f"{whole['gpus']} / {sliced['gpus']}",
            f"{whole['cost_per_hour']:.2f} / {sliced['cost_per_hour']:.2f}",
            f"{r['cost_saved']:.1%}",
            f"{sliced['time_sliced_gpus']} ({sliced['models_time_sliced']})",
            ",".join(str(k) for k in sliced["ways_in_use"]), f"{sliced['plan_wall_s']:.2f}",
            r["problems"]]


def _node_cells(r: dict[str, Any]) -> list[Any]:
    plans = (r["whole_gpus"], r["time_sliced"], r["time_sliced_8_gpu_nodes"])
    return [r["seed"], *(p["nodes_of_8"] for p in plans),
            " / ".join(f"{p['node_cost_per_hour_of_8']:.2f}" for p in plans),
            r["time_sliced_8_gpu_nodes"]["gpus"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=40)
    parser.add_argument("--seeds", default="1,2,3")
    args = parser.parse_args()
    started = start()
    run = _sibling_run()
    with run.Server() as server, grpc.insecure_channel(server.addr) as channel:
        stub = pb_grpc.PlacementStub(channel)
        rows = [_seed_row(stub, args.models, int(seed)) for seed in args.seeds.split(",")]
    run.print_table(f"PlanFleet, {args.models} synthetic dev models on L4 / L40S pools",
                    ["seed", "GPUs: whole / time-sliced", "$/h: whole / time-sliced", "saved",
                     "time-sliced GPUs (models)", "k-way kinds", "plan s", "problems"],
                    [_cells(r) for r in rows])
    run.print_table("The same on 8-GPU nodes: each k-way kind fills whole nodes of its own",
                    ["seed", "nodes: whole", "nodes: sliced, node size not given",
                     "nodes: sliced, PlanFleet told 8 per node", "$/h of those nodes (3 columns)",
                     "GPUs planned (told)"],
                    [_node_cells(r) for r in rows])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"models": args.models, "rows": rows,
                                   "provenance": provenance(started)}, indent=2) + "\n")
    return 1 if any(r["problems"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
