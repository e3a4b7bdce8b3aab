"""`headroom placement ...`: the placement gRPC server alone (in-memory state)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

import typer

from controlplane.cli.streams import usage_error
from scheduler.affinity import parse_cpu_list, pin_process
from scheduler.metrics import PlacementMetrics, check_bindable, exposed_metrics
from scheduler.server import create_server, stop

app = typer.Typer(help="Placement API: online placement and fleet plans over gRPC.",
                  no_args_is_help=True)


@app.callback()
def _placement() -> None:
    """Placement API: online placement and fleet plans over gRPC."""


@app.command()
def serve(
    listen: str = typer.Option("127.0.0.1:50051", "--listen",
                               help="HOST:PORT to bind; port 0 picks a free port."),
    workers: int = typer.Option(16, "--workers", min=1,
                                help="Threads for PlanFleet, WatchPlan streams and other calls."),
    fast_workers: int = typer.Option(2, "--fast-workers", min=1,
                                     help="Threads for Place, Release, SyncInventory, GetPlan."),
    grace_s: float = typer.Option(5.0, "--grace-s", min=0.0,
                                  help="Seconds in-flight calls get on shutdown."),
    cpus: str | None = typer.Option(
        None, "--cpus", metavar="LIST",
        help="Pin the server to these CPUs (Linux list: 1, 0-3, 0,2-3). One core keeps the "
             "engine's working set in its caches: faster Place with one call in flight."),
    metrics_listen: str | None = typer.Option(
        None, "--metrics-listen", metavar="HOST:PORT",
        help="Serve Prometheus metrics on http://HOST:PORT/metrics (port 0: a free port)."),
) -> None:
    """Serve the placement gRPC API with an in-memory engine until SIGINT/SIGTERM."""
    try:
        check_bindable(listen, port_free=True)
    except ValueError as exc:
        raise usage_error(f"--listen {exc}") from None
    if cpus is not None:
        _pin(cpus)
    metrics, stop_metrics, metrics_url = _metrics(metrics_listen)
    try:
        server, port = create_server(listen, max_workers=workers, fast_workers=fast_workers,
                                     metrics=metrics)
    except (OSError, RuntimeError) as exc:
        stop_metrics()
        raise usage_error(f"cannot listen on {listen}: {exc}") from exc
    host = listen.rsplit(":", 1)[0] if ":" in listen else listen
    done = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    # handlers first: a supervisor may stop the server as soon as it reads the address
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        typer.echo(f"placement API listening on {host}:{port}", nl=True)
        if metrics_url:
            typer.echo(f"metrics on {metrics_url}")
        while not done.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        stop(server, grace_s)
        stop_metrics()
        typer.echo("placement API stopped")


def _pin(cpus: str) -> None:
    """``--cpus``: pin every thread of this process (refused naming the option)."""
    try:
        pinned = pin_process(parse_cpu_list(cpus))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--cpus") from exc
    typer.echo(f"placement API pinned to CPU(s) {','.join(map(str, sorted(pinned)))}", err=True)


def _metrics(listen: str | None) -> tuple[PlacementMetrics | None, Callable[[], None], str]:
    """``--metrics-listen``: (metrics, what stops their HTTP server, their URL); nothing
    without the option. Refused naming the option when the address cannot be served."""
    if listen is None:
        return None, lambda: None, ""
    try:
        return exposed_metrics(listen)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"cannot serve metrics on {listen}: {exc}",
                                 param_hint="--metrics-listen") from exc
