"""What the routing hint costs a serving layer: RankReplicas over a real channel.

A fresh ``headroom placement serve`` (as ``run.py`` starts it) gets an inventory of 256 nodes of
8 L4 GPUs, and replicas are placed on it: a quarter of them whole GPUs, the rest MPS shares of
250 milli with 4 GiB stated (so some share a GPU). Then, for each batch size, one client calls
RankReplicas with that many replicas (random queue depths and KV cache usage, two versions) for
``--seconds`` seconds, one call in flight, and the table gives calls/s as the client observes
them (calls over the timed loop's wall time) and p50/p99 latency. An answer is ok when the
workload ids it returns (ranked plus unknown) are exactly the ones asked for and the ranked
ones come best first.

    python benchmarks/placement/rank.py [--seconds 3] [--batches 8,64,512] [--replicas 1024]

Writes benchmarks/results/placement_rank.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
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

RESULTS = Path(__file__).resolve().parents[1] / "results" / "placement_rank.json"
NODES, GPUS_PER_NODE = 256, 8


def _sibling_run() -> Any:
    """``run.py`` beside this file (its Server and table)."""
    return load_script(Path(__file__).resolve().parent / "run.py", "placement_run")


def _inventory() -> pb.SyncInventoryRequest:
    return pb.SyncInventoryRequest(nodes=[pb.Node(
        name=f"n{i:03d}", cpu_milli=192_000, memory_mib=1_048_576, pool="L4",
        gpus=[pb.Gpu(index=g, product="L4", memory_mib=24_576) for g in range(GPUS_PER_NODE)])
        for i in range(NODES)])


def _place_all(stub: pb_grpc.PlacementStub, replicas: int) -> list[str]:
    ids = []
    for k in range(replicas):
        whole = k % 4 == 0
        stub.Place(pb.PlaceRequest(
            workload_id=f"r{k:05d}", model="m", tenant="t", cpu_milli=1000, memory_mib=4096,
            num_gpu=1, gpu_milli=1000 if whole else 250, gpu_memory_mib=0 if whole else 4096,
            isolation=pb.ISOLATION_UNSPECIFIED if whole else pb.TRUSTED), timeout=10)
        ids.append(f"r{k:05d}")
    return ids


def _request(ids: list[str], batch: int, rng: random.Random) -> pb.RankReplicasRequest:
    return pb.RankReplicasRequest(model_version="v2", replicas=[pb.ReplicaLoad(
        workload_id=w, queue_depth=rng.randrange(0, 20), kv_cache_usage=rng.random(),
        model_version=rng.choice(["v1", "v2"])) for w in rng.sample(ids, batch)])


def _measure(stub: pb_grpc.PlacementStub, ids: list[str], batch: int, seconds: float
             ) -> dict[str, Any]:
    """Calls for ``seconds`` of wall time, one in flight. calls/s is the client-observed rate:
    calls over the loop's wall time (perf_counter around the whole loop, the per-answer checks
    included), not calls over the sum of call latencies."""
    rng = random.Random(batch)
    requests = [_request(ids, batch, rng) for _ in range(64)]  # built before the timed loop
    asked = [sorted(r.workload_id for r in request.replicas) for request in requests]
    latencies_s: list[float] = []
    ranked_ok = True
    loop_started = time.perf_counter()
    ends_at = loop_started + seconds
    while time.perf_counter() < ends_at:
        k = len(latencies_s) % len(requests)
        started = time.perf_counter()
        answer = stub.RankReplicas(requests[k], timeout=10)
        latencies_s.append(time.perf_counter() - started)
        scores = [r.score for r in answer.ranked]
        answered = sorted([*(r.workload_id for r in answer.ranked), *answer.unknown])
        ranked_ok &= answered == asked[k] and scores == sorted(scores, reverse=True)
    wall_s = time.perf_counter() - loop_started
    cuts = statistics.quantiles(latencies_s, n=100)
    return {"batch": batch, "calls": len(latencies_s), "wall_s": wall_s,
            "client_observed_calls_per_s": len(latencies_s) / wall_s,
            "p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000,
            "every_answer_complete_and_best_first": ranked_ok}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--batches", default="8,64,512")
    parser.add_argument("--replicas", type=int, default=1024)
    args = parser.parse_args()
    started = start()
    batches = [int(b) for b in args.batches.split(",")]
    if max(batches) > args.replicas:
        parser.error("--batches: every batch must be <= --replicas")
    run = _sibling_run()
    with run.Server() as server, grpc.insecure_channel(server.addr) as channel:
        stub = pb_grpc.PlacementStub(channel)
        stub.SyncInventory(_inventory(), timeout=30)
        ids = _place_all(stub, args.replicas)
        rows = [_measure(stub, ids, b, args.seconds) for b in batches]
    run.print_table(f"RankReplicas, {args.replicas} replicas placed, one call in flight",
                ["replicas per call", "calls", "calls/s (client-observed)", "p50 ms", "p99 ms",
                 "answers ok"],
                [[r["batch"], r["calls"], r["client_observed_calls_per_s"], r["p50_ms"],
                  r["p99_ms"], r["every_answer_complete_and_best_first"]] for r in rows])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"replicas_placed": args.replicas, "seconds": args.seconds,
                                   "rows": rows, "provenance": provenance(started)},
                                  indent=2) + "\n")
    return 0 if all(r["every_answer_complete_and_best_first"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
