"""Builders shared by the scheduler tests (imported by name; tests/scheduler is on sys.path)."""

from __future__ import annotations

from collections.abc import Sequence

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.engine import PlacementEngine


def make_node(name: str, gpus: int = 2, product: str = "T4", cpu_milli: int = 32_000,
              memory_mib: int = 131_072, gpu_memory_mib: int = 15_360,
              mig_capable: bool = False) -> pb.Node:
    return pb.Node(name=name, cpu_milli=cpu_milli, memory_mib=memory_mib, pool=product,
                   gpus=[pb.Gpu(index=i, product=product, memory_mib=gpu_memory_mib,
                                mig_capable=mig_capable) for i in range(gpus)])


def make_place(workload_id: str, num_gpu: int = 1, gpu_milli: int = 1000,
               cpu_milli: int = 1000, memory_mib: int = 1024,
               products: Sequence[str] = (),
               isolation: pb.Isolation.ValueType = pb.ISOLATION_UNSPECIFIED,
               gpu_memory_mib: int = 0, model: str = "m", tenant: str = "t"
               ) -> pb.PlaceRequest:
    return pb.PlaceRequest(workload_id=workload_id, model=model, tenant=tenant,
                           cpu_milli=cpu_milli, memory_mib=memory_mib, num_gpu=num_gpu,
                           gpu_milli=gpu_milli,
                           gpu_memory_mib=gpu_memory_mib, gpu_products=list(products),
                           isolation=isolation)


def two_node_engine() -> PlacementEngine:
    eng = PlacementEngine()
    eng.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0"), make_node("n1")]))
    return eng
