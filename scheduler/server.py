"""gRPC server for the Placement service: health, reflection, graceful shutdown."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.engine import PlacementEngine
from scheduler.metrics import PlacementMetrics
from scheduler.service import PlacementServicer

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Placement"].full_name
#: Worker threads of the default pool (PlanFleet, WatchPlan streams, health, reflection and
#: extra services such as KEDA's scaler, whose streams each hold a thread).
DEFAULT_WORKERS = 16
#: Threads of the default pool that WatchPlan streams never take (PlanFleet, ListBindings,
#: health checks and reflection keep answering however many clients watch).
RESERVED_WORKERS = 4
#: Worker threads for Place/Release/SyncInventory/GetPlan: few, so they do not fight over the
#: GIL on a 2-core machine.
FAST_WORKERS = 2
MAX_MESSAGE_BYTES = 256 * 1024 * 1024

_SERVICERS: dict[int, tuple[PlacementServicer, health.HealthServicer,
                            futures.ThreadPoolExecutor]] = {}


def watch_stream_cap(workers: int) -> int:
    """WatchPlan streams a pool of ``workers`` threads serves at once (RESERVED_WORKERS kept)."""
    return max(1, workers - RESERVED_WORKERS)


def create_server(address: str = "127.0.0.1:0", engine: PlacementEngine | None = None,
                  extra_servicers: Sequence[Callable[[grpc.Server], None]] = (),
                  max_workers: int = DEFAULT_WORKERS,
                  fast_workers: int = FAST_WORKERS,
                  metrics: PlacementMetrics | None = None,
                  max_watch_streams: int | None = None) -> tuple[grpc.Server, int]:
    """Build, bind and start the server; returns (server, bound port).

    ``extra_servicers`` are callables that register more services (e.g. KEDA's external
    scaler) on the server before it starts. ``metrics`` counts and times every Place, Release,
    SyncInventory and PlanFleet call and reads its gauges from the engine. At most
    ``max_watch_streams`` WatchPlan streams are served at once (default: ``watch_stream_cap``
    of ``max_workers``; pass the cap of the server's own threads when ``max_workers`` includes
    threads for the streams of ``extra_servicers``).
    """
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="placement"),
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.so_reuseport", 0)],
    )
    fast_pool = futures.ThreadPoolExecutor(max_workers=fast_workers,
                                           thread_name_prefix="placement-fast")
    engine = engine or PlacementEngine()
    if metrics is not None:
        metrics.read_from(engine.counts)
        engine.on_leases_expired = metrics.leases_expired.inc
    servicer = PlacementServicer(engine, fast_pool, metrics,
                                 max_watch_streams if max_watch_streams is not None
                                 else watch_stream_cap(max_workers))
    pb_grpc.add_PlacementServicer_to_server(servicer, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for register in extra_servicers:
        register(server)
    names = [SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME]
    reflection.enable_server_reflection(names, server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot bind the placement server to {address}")
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    _SERVICERS[id(server)] = (servicer, health_servicer, fast_pool)
    return server, port


def stop(server: grpc.Server, grace_s: float = 5.0) -> None:
    """Graceful stop: report NOT_SERVING, end WatchPlan streams, let in-flight calls finish."""
    found = _SERVICERS.pop(id(server), None)
    if found is not None:
        servicer, health_servicer, _ = found
        health_servicer.enter_graceful_shutdown()
        servicer.stopping.set()
    server.stop(grace_s).wait()
    if found is not None:
        found[2].shutdown(wait=True)
