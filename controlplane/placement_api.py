"""Starting the gRPC placement API of ``headroom serve`` (both backends), with its Prometheus
metrics when ``placement.metrics_listen`` is set."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc
from rich.console import Console

from controlplane.settings import Settings
from scheduler.engine import PlacementEngine
from scheduler.metrics import PlacementMetrics, exposed_metrics
from scheduler.server import create_server, stop


def start_placement_api(settings: Settings, engine: PlacementEngine,
                        extra_servicers: Sequence[Callable[[grpc.Server], None]],
                        console: Console) -> Callable[[], None]:
    """Serve the placement API (and /metrics when configured); returns what stops both."""
    metrics: PlacementMetrics | None = None
    stop_metrics, url = _nothing, ""
    if settings.placement.metrics_listen:
        metrics, stop_metrics, url = exposed_metrics(settings.placement.metrics_listen)
    try:
        server, port = create_server(settings.placement.listen, engine, extra_servicers,
                                     metrics=metrics)
    except BaseException:
        stop_metrics()
        raise
    host = settings.placement.listen.rpartition(":")[0]
    console.print(f"placement API (gRPC) on {host}:{port}; backend {settings.backend}; "
                  f"dry_run={settings.safety.dry_run}")
    if url:
        console.print(f"placement API metrics on {url}")

    def stop_all() -> None:
        stop(server, grace_s=2.0)
        stop_metrics()

    return stop_all


def _nothing() -> None:
    return None
