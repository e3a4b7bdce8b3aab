"""gRPC server for the Placement service: health, reflection, graceful shutdown."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.callers import caller_interceptor
from scheduler.engine import PlacementEngine
from scheduler.limits import DEFAULT_MAX_REQUEST_MIB, MAX_RESPONSE_BYTES, mib_to_bytes
from scheduler.metrics import PlacementMetrics
from scheduler.security import TransportSecurity, server_credentials
from scheduler.service import PlacementServicer

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Placement"].full_name
#: registers one more service on a server before it starts; returns the service's full name
#: for reflection and health (None: listed by neither)
Registrar = Callable[[grpc.Server], str | None]
#: Worker threads of the default pool (PlanFleet, WatchPlan streams, health, reflection and
#: extra services such as KEDA's scaler, whose streams each hold a thread).
DEFAULT_WORKERS = 16
#: Threads of the default pool that WatchPlan streams never take (PlanFleet, ListBindings,
#: health checks and reflection keep answering however many clients watch).
RESERVED_WORKERS = 4
#: Worker threads for Place/Release/SyncInventory/GetPlan: few, so they do not fight over the
#: GIL on a 2-core machine.
FAST_WORKERS = 2


@dataclass(slots=True)
class _Served:
    """What ``stop`` ends beside the server: the servicer's streams, health, the fast pool and
    the plaintext health-only server (``health_listen``) with its port."""

    servicer: PlacementServicer
    health: health.HealthServicer
    fast_pool: futures.ThreadPoolExecutor
    health_server: grpc.Server | None = None
    health_port: int | None = None


_SERVICERS: dict[int, _Served] = {}


def watch_stream_cap(workers: int) -> int:
    """WatchPlan streams a pool of ``workers`` threads serves at once (RESERVED_WORKERS kept)."""
    return max(1, workers - RESERVED_WORKERS)


def create_server(address: str = "127.0.0.1:0", engine: PlacementEngine | None = None,
                  extra_servicers: Sequence[Registrar] = (),
                  max_workers: int = DEFAULT_WORKERS,
                  fast_workers: int = FAST_WORKERS,
                  metrics: PlacementMetrics | None = None,
                  max_watch_streams: int | None = None,
                  security: TransportSecurity | None = None,
                  health_listen: str | None = None,
                  max_request_mib: int = DEFAULT_MAX_REQUEST_MIB,
                  watch_caller_share: float | None = None) -> tuple[grpc.Server, int]:
    """Build, bind and start the server; returns (server, bound port).

    ``extra_servicers`` are callables that register more services (e.g. KEDA's external
    scaler) on the server before it starts; each returns its service's full name, which
    reflection lists and health reports SERVING (None: neither). ``metrics`` counts and times
    every Place, Release, SyncInventory and PlanFleet call and reads its gauges from the
    engine. At most ``max_watch_streams`` WatchPlan streams are served at once (default:
    ``watch_stream_cap`` of ``max_workers``; pass the cap of the server's own threads when
    ``max_workers`` includes threads for the streams of ``extra_servicers``), of which one
    caller (``scheduler.stream_shares``) holds at most ``watch_caller_share`` (at least 1;
    None: no per-caller cap; ``headroom serve``, ``demo`` and ``placement serve`` give
    ``placement.watch_caller_share``). ``security``:
    TLS (mutual with a client CA) and/or a bearer token on every call but health and KEDA's
    scaler, and client certificate identities mapped to tenants (``scheduler.security``);
    its files are checked before anything is bound (``SecurityFileError``). ``health_listen``:
    the health service alone, in plaintext, on another address, for kubelet's gRPC probe (it
    speaks neither TLS nor tokens); its port: ``health_port(server)``. ``max_request_mib``: the
    largest request any service of the server receives (larger: RESOURCE_EXHAUSTED, unread;
    ``scheduler.limits``).
    """
    security = security or TransportSecurity()
    credentials = server_credentials(security) if security.tls else None  # files checked here
    callers = caller_interceptor(security, metrics.refused if metrics is not None else None)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="placement"),
        options=[("grpc.max_receive_message_length", mib_to_bytes(max_request_mib)),
                 ("grpc.max_send_message_length", MAX_RESPONSE_BYTES),
                 ("grpc.so_reuseport", 0)],
        interceptors=[callers] if callers is not None else None,
    )
    fast_pool = futures.ThreadPoolExecutor(max_workers=fast_workers,
                                           thread_name_prefix="placement-fast")
    engine = engine or PlacementEngine()
    if metrics is not None:
        metrics.read_from(engine.counts)
        engine.on_leases_expired = metrics.leases_expired.inc
    servicer = PlacementServicer(engine, fast_pool, metrics,
                                 max_watch_streams if max_watch_streams is not None
                                 else watch_stream_cap(max_workers), watch_caller_share)
    pb_grpc.add_PlacementServicer_to_server(servicer, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    extra_names = [name for name in (register(server) for register in extra_servicers) if name]
    names = [SERVICE_NAME, *extra_names, health.SERVICE_NAME, reflection.SERVICE_NAME]
    reflection.enable_server_reflection(names, server)
    port = (server.add_secure_port(address, credentials) if credentials is not None
            else server.add_insecure_port(address))
    if port == 0:
        raise OSError(f"cannot bind the placement server to {address}")
    served = _Served(servicer, health_servicer, fast_pool)
    if health_listen is not None:
        served.health_server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="placement-health"),
            options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, served.health_server)
        served.health_port = served.health_server.add_insecure_port(health_listen)
        if served.health_port == 0:
            fast_pool.shutdown(wait=False)
            raise OSError(f"cannot bind the placement API's health checks to {health_listen}")
        served.health_server.start()
    server.start()
    for name in ("", SERVICE_NAME, *extra_names):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    _SERVICERS[id(server)] = served
    return server, port


def health_port(server: grpc.Server) -> int | None:
    """The port of the plaintext health-only server started with ``health_listen``."""
    served = _SERVICERS.get(id(server))
    return served.health_port if served is not None else None


def stop(server: grpc.Server, grace_s: float = 5.0) -> None:
    """Graceful stop: report NOT_SERVING, end WatchPlan streams, let in-flight calls finish."""
    found = _SERVICERS.pop(id(server), None)
    if found is not None:
        found.health.enter_graceful_shutdown()
        found.servicer.stopping.set()
        found.servicer.engine.wake_plan_waiters()  # WatchPlan streams end now
    server.stop(grace_s).wait()
    if found is not None:
        if found.health_server is not None:
            found.health_server.stop(0).wait()
        found.fast_pool.shutdown(wait=True)
