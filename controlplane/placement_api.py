"""Starting the gRPC placement API of ``headroom serve`` (both backends), with its Prometheus
metrics and the reconcile loop's when ``placement.metrics_listen`` is set."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc
from rich.console import Console

from controlplane.metrics import ControlPlaneMetrics
from controlplane.settings import Settings
from scheduler.engine import PlacementEngine
from scheduler.metrics import PlacementMetrics, exposed_metrics
from scheduler.server import create_server, stop


def start_placement_api(settings: Settings, engine: PlacementEngine,
                        extra_servicers: Sequence[Callable[[grpc.Server], None]],
                        console: Console) -> tuple[Callable[[], None], ControlPlaneMetrics | None]:
    """Serve the placement API (and /metrics when configured); returns what stops both and,
    with metrics on, the reconcile loop's metrics on the same registry."""
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

    return stop_all, ControlPlaneMetrics(metrics.registry) if metrics is not None else None


def _nothing() -> None:
    return None
