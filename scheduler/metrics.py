"""Prometheus metrics of the placement API (prometheus-client), on a registry of their own.

What an operator watches on the placement server: calls per method and gRPC status code (every
unary method, GetPlan too; WatchPlan streams when they end, or are refused before they open:
OK when the server stopped them, CANCELLED or DEADLINE_EXCEEDED when their client did), the
engine's time per call (server side, without the transport), Place refusals by their reason code
(the ``Infeasible`` reasons: ``no_idle_gpus``, ``no_gpu_share_fits``, ...; and ``no_inventory``,
FAILED_PRECONDITION, before the first SyncInventory), bindings this server
released because their lease ran out (a serving layer that stopped renewing), and, read from the
engine at scrape time (nothing on the hot path), the workloads bound, the GPUs in the inventory
and the fleet plan's revision. ``serve_metrics`` exposes the registry on ``/metrics`` over HTTP.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    start_http_server,
)

#: the gRPC service whose calls ``headroom_placement_requests_total`` counts
PLACEMENT_SERVICE = "headroom.v1.Placement"
#: Engine seconds per call: a replay Place takes ~0.1-0.3 ms, a PlanFleet up to seconds.
LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.1, 0.5,
                     2.5, 10.0)


class PlacementMetrics:
    """The placement API's metrics; ``observe`` is what the servicer calls after each call."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter("headroom_placement_requests", "Placement API calls by method "
                                "and gRPC status code.", ["method", "code"],
                                registry=self.registry)
        self.seconds = Histogram("headroom_placement_request_seconds", "Engine time per "
                                 "placement API call (server side, without the transport).",
                                 ["method"], buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.rejections = Counter("headroom_placement_rejections", "Place calls refused "
                                  "RESOURCE_EXHAUSTED (or FAILED_PRECONDITION no_inventory: no "
                                  "SyncInventory yet), by reason code.", ["reason"],
                                  registry=self.registry)
        self.leases_expired = Counter("headroom_placement_leases_expired", "Bindings this server "
                                      "released because their lease ran out.",
                                      registry=self.registry)
        self.bindings = Gauge("headroom_placement_bindings", "Workloads bound now.",
                              registry=self.registry)
        self.inventory_gpus = Gauge("headroom_placement_inventory_gpus",
                                    "GPUs in the current inventory.", registry=self.registry)
        self.plan_revision = Gauge("headroom_fleet_plan_revision",
                                   "Revision of the current fleet plan.", registry=self.registry)
        self._calls: dict[tuple[str, str], Callable[[], None]] = {}
        self._timers: dict[str, Callable[[float], None]] = {}

    def read_from(self, snapshot: Callable[[], tuple[int, int, int]]) -> None:
        """Gauges read at scrape time from ``snapshot()`` = (bindings, GPUs, plan revision)."""
        self.bindings.set_function(lambda: float(snapshot()[0]))
        self.inventory_gpus.set_function(lambda: float(snapshot()[1]))
        self.plan_revision.set_function(lambda: float(snapshot()[2]))

    def observe(self, method: str, code: str, seconds: float, reason: str | None = None) -> None:
        """One finished call: its status code name, engine seconds and refusal reason."""
        count = self._calls.get((method, code))
        if count is None:
            count = self._calls[(method, code)] = self.requests.labels(method, code).inc
        count()
        timer = self._timers.get(method)
        if timer is None:
            timer = self._timers[method] = self.seconds.labels(method).observe
        timer(seconds)
        if reason is not None:
            self.rejections.labels(reason).inc()

    def refused(self, service: str, method: str) -> None:
        """A Placement call refused UNAUTHENTICATED before the engine (no engine seconds)."""
        if service == PLACEMENT_SERVICE:
            self.requests.labels(method, "UNAUTHENTICATED").inc()


def serve_metrics(metrics: PlacementMetrics, listen: str) -> tuple[Callable[[], None], int]:
    """Serve ``/metrics`` on ``listen`` (HOST:PORT; port 0 picks a free one) in a daemon
    thread; returns what stops it (and frees the port) and the bound port. ValueError for a
    malformed address, OSError when it cannot bind. Counters and histograms are served without
    their ``_created`` series (one more series per label set that no rule or panel reads)."""
    host, port = host_and_port(listen)
    disable_created_metrics()  # type: ignore[no-untyped-call]  # read at each scrape
    server, _ = start_http_server(port, addr=host, registry=metrics.registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return stop, int(server.server_address[1])


def exposed_metrics(listen: str) -> tuple[PlacementMetrics, Callable[[], None], str]:
    """New metrics served on ``listen``: (metrics, what stops their server, their URL), with
    the process's own (``process_*``: memory, CPU, start time; ``python_*``: GC, version)."""
    metrics = PlacementMetrics()
    ProcessCollector(registry=metrics.registry)
    PlatformCollector(registry=metrics.registry)
    GCCollector(registry=metrics.registry)
    stop, port = serve_metrics(metrics, listen)
    return metrics, stop, f"http://{host_and_port(listen)[0]}:{port}/metrics"


def host_and_port(listen: str) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT``; ValueError naming the address otherwise."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{listen!r}: expected HOST:PORT (port 0: a free port)")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether HOST (a name, an IPv4 or a bracketed IPv6 address) names only this machine:
    ``localhost`` or a loopback address; ``0.0.0.0``, ``[::]`` and other names do not."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if bare.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def check_bindable(listen: str, *, port_free: bool = False) -> None:
    """ValueError naming ``listen`` unless it is ``HOST:PORT`` whose host resolves to an address
    of this machine. gRPC logged a C-core line for such a host before failing, and took a port
    above 65535 modulo 65536; a bad host surfaced as a traceback. The port itself is tried only
    with ``port_free`` (an address that must be this exact one: ``serve``, ``placement serve``;
    the demo takes a free port instead): another socket holding it is a ValueError too."""
    host, port = host_and_port(listen)
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        family, _, _, _, address = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"{listen!r}: cannot resolve {bare!r} ({reason})") from None
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address[0], 0, *address[2:]))
        except OSError as exc:
            raise ValueError(f"{listen!r}: cannot bind {address[0]} "
                             f"({exc.strerror or exc})") from None
    if not port_free or port == 0:
        return
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no owner
        try:
            probe.bind(address)
        except OSError as exc:
            raise ValueError(f"{listen!r}: port {port} is taken ({exc.strerror or exc})"
                             ) from None

