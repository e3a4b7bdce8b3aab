"""A minimal router loop on Headroom's routing hint (RankReplicas).

Each round it reads every replica's load (here a dict standing in for the vLLM metrics a router
scrapes: ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``), asks Headroom to rank the
replicas and routes to the best one; the replicas are named by the ``workload_id`` each was
placed with. Run it against ``headroom placement serve``::

    python deploy/examples/router_hint.py --addr 127.0.0.1:50051 \\
        --replica llama-0=3 --replica llama-1=0:0.9 --model-version v2

With TLS and a token (``placement.tls_cert_file`` / ``token_file``): ``--ca-file ca.pem
--token-file token``. Needs grpcio and Headroom's generated stubs (``protos``: installed with
Headroom, or the repository root on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc

#: Stands in for the serving layer's metrics: replica id -> (queue depth, KV cache usage 0-1).
SCRAPED: dict[str, tuple[int, float | None]] = {"llama-0": (4, 0.5), "llama-1": (0, 0.2)}


@dataclass(frozen=True, slots=True)
class Choice:
    workload_id: str
    node: str
    score: float


def parse_replica(text: str) -> tuple[str, tuple[int, float | None]]:
    """``ID=QUEUE`` or ``ID=QUEUE:KV`` -> (id, (queue depth, KV cache usage))."""
    workload_id, _, load = text.partition("=")
    queue, _, kv = load.partition(":")
    if not workload_id or not queue.isdigit():
        raise argparse.ArgumentTypeError(f"expected ID=QUEUE[:KV], got {text!r}")
    return workload_id, (int(queue), float(kv) if kv else None)


def channel(addr: str, ca_file: Path | None) -> grpc.Channel:
    if ca_file is None:
        return grpc.insecure_channel(addr)
    creds = grpc.ssl_channel_credentials(root_certificates=ca_file.read_bytes())
    return grpc.secure_channel(addr, creds)


def pick(stub: pb_grpc.PlacementStub, scraped: dict[str, tuple[int, float | None]],
         model_version: str, metadata: tuple[tuple[str, str], ...]) -> Choice | None:
    """The replica Headroom ranks first; None when it knows none of them (place them again)."""
    loads = [pb.ReplicaLoad(workload_id=w, queue_depth=queue, kv_cache_usage=kv)
             if kv is not None else pb.ReplicaLoad(workload_id=w, queue_depth=queue)
             for w, (queue, kv) in scraped.items()]
    answer = stub.RankReplicas(pb.RankReplicasRequest(replicas=loads, model_version=model_version),
                               timeout=2.0, metadata=metadata)
    if not answer.ranked:
        return None
    best = answer.ranked[0]
    return Choice(best.workload_id, best.node, best.score)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--addr", default="127.0.0.1:50051")
    parser.add_argument("--token-file", type=Path, help="bearer token (its first line)")
    parser.add_argument("--ca-file", type=Path, help="CA of the server's certificate: TLS")
    parser.add_argument("--replica", type=parse_replica, action="append", default=[],
                        metavar="ID=QUEUE[:KV]", help="a replica's load (default: SCRAPED)")
    parser.add_argument("--model-version", default="")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--interval-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    scraped = dict(args.replica) or SCRAPED
    metadata: tuple[tuple[str, str], ...] = ()
    if args.token_file is not None:
        token = args.token_file.read_text().strip().splitlines()[0]
        metadata = (("authorization", f"Bearer {token}"),)
    with channel(args.addr, args.ca_file) as ch:
        stub = pb_grpc.PlacementStub(ch)
        for round_ in range(args.rounds):
            if round_:
                time.sleep(args.interval_s)
            try:
                choice = pick(stub, scraped, args.model_version, metadata)
            except grpc.RpcError as err:
                print(f"error: RankReplicas: {err.code().name}: {err.details()}", file=sys.stderr)
                return 2
            if choice is None:
                print("no replica is bound: place them again", file=sys.stderr)
                return 1
            print(f"route to {choice.workload_id} on {choice.node} (score {choice.score:.3f})",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
