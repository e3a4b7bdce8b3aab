"""`headroom placement ...`: the placement gRPC server alone: in-memory state, or on a store's
placement journal (``--db`` / ``--config``: shared with every server on the store, kept across
restarts), with the store's DemandHints service beside it."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from controlplane.adapters.clock import WallClock
from controlplane.cli.bindings import list_bindings, release
from controlplane.cli.demo_store import settings_with_db
from controlplane.cli.numbers import float_option
from controlplane.cli.placement_security import (
    AllowInsecureOption,
    ClientIdentitiesOption,
    HealthListenOption,
    TlsCertOption,
    TlsClientCaOption,
    TlsKeyOption,
    TokenFileOption,
    served_security,
)
from controlplane.cli.store_origin import db_url_named, store_errors
from controlplane.cli.streams import usage_error
from controlplane.logsetup import setup_logging
from scheduler.affinity import parse_cpu_list, pin_process
from scheduler.limits import DEFAULT_MAX_REQUEST_MIB, MAX_REQUEST_MIB_LIMIT
from scheduler.metrics import PlacementMetrics, check_bindable, exposed_metrics
from scheduler.stream_shares import DEFAULT_CALLER_SHARE

if TYPE_CHECKING:  # imported where used: `headroom placement --help` loads no store or gRPC
    from controlplane.settings import Settings
    from scheduler.engine import PlacementEngine
    from scheduler.server import Registrar

#: where the server listens without --listen and without placement.listen in the settings
DEFAULT_LISTEN = "127.0.0.1:50051"
app = typer.Typer(help="Placement API: online placement and fleet plans over gRPC.",
                  no_args_is_help=True)


@app.callback()
def _placement() -> None:
    """Placement API: online placement and fleet plans over gRPC."""


app.command("bindings")(list_bindings)
app.command("release")(release)


@app.command()
def serve(
    listen: str | None = typer.Option(
        None, "--listen", metavar="HOST:PORT", show_default=False,
        help=f"HOST:PORT to bind; port 0 picks a free port. Default: placement.listen of "
             f"--config, else {DEFAULT_LISTEN}."),
    workers: int = typer.Option(16, "--workers", min=1,
                                help="Threads for PlanFleet, WatchPlan streams and other calls."),
    fast_workers: int = typer.Option(2, "--fast-workers", min=1,
                                     help="Threads for Place, Release, SyncInventory, GetPlan."),
    grace_s: float = float_option(5.0, "--grace-s", min=0.0,
                                  help="Seconds in-flight calls get on shutdown."),
    cpus: str | None = typer.Option(
        None, "--cpus", metavar="LIST",
        help="Pin the server to these CPUs (Linux list: 1, 0-3, 0,2-3). One core keeps the "
             "engine's working set in its caches: faster Place with one call in flight."),
    metrics_listen: str | None = typer.Option(
        None, "--metrics-listen", metavar="HOST:PORT",
        help="Serve Prometheus metrics on http://HOST:PORT/metrics (port 0: a free port). "
             "Default: placement.metrics_listen of --config, else none."),
    config: Annotated[Path | None, typer.Option(
        "--config", "-c",
        help="YAML settings: keep the placement state in its store (db.url), as with "
             "--db.")] = None,
    db: Annotated[Path | None, typer.Option(
        "--db", metavar="<path>", dir_okay=False,
        help="Keep the placement state (bindings, the current plan and its revision) in this "
             "SQLite store file, shared with every server on it and kept across restarts; "
             "beats HEADROOM_DB__URL and db.url of --config. Without --db or --config the "
             "state is in memory only.")] = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    tls_client_ca: TlsClientCaOption = None,
    token_file: TokenFileOption = None,
    client_identities: ClientIdentitiesOption = None,
    health_listen: HealthListenOption = None,
    allow_insecure: AllowInsecureOption = False,
    max_request_mib: int | None = typer.Option(
        None, "--max-request-mib", min=1, max=MAX_REQUEST_MIB_LIMIT, metavar="MIB",
        show_default=False,
        help=f"The largest request received, in MiB (larger: RESOURCE_EXHAUSTED, unread). "
             f"Default: placement.max_request_mib of --config, else {DEFAULT_MAX_REQUEST_MIB}."),
) -> None:
    """Serve the placement gRPC API until SIGINT/SIGTERM: in memory, or on a store."""
    from controlplane.placement_api import JournalFollower
    from scheduler.engine import PlacementEngine
    from scheduler.security import SecurityFileError, TransportSecurity
    from scheduler.server import create_server, health_port, stop

    settings = _settings(config, db) if config is not None or db is not None else None
    listen, listen_named = _address(listen, "--listen", "listen", settings, config)
    listen = listen or DEFAULT_LISTEN
    metrics_listen, metrics_named = _address(metrics_listen, "--metrics-listen",
                                             "metrics_listen", settings, config)
    try:  # after the settings: a bad --config is named whether or not the port is free
        check_bindable(listen, port_free=True)
    except ValueError as exc:
        raise usage_error(f"{listen_named} {exc}") from None
    secured = served_security(
        listen, settings.placement if settings is not None else None, tls_cert=tls_cert,
        tls_key=tls_key, tls_client_ca=tls_client_ca, token_file=token_file,
        health_listen=health_listen, allow_insecure=allow_insecure,
        client_identities=client_identities, listen_named=listen_named)
    if cpus is not None:
        _pin(cpus)
    # warnings (an unreadable journal, a hint over the pools) as serve's JSON events with their
    # fields, not Python's bare event name; below WARNING stays silent, as before
    setup_logging(logging.WARNING)
    engine, extra, stop_store, kept_note = (
        _kept_in_store(settings, checks_hints=config is not None) if settings is not None
        else (PlacementEngine(), (), lambda: None, ""))
    metrics, stop_metrics, metrics_url = _metrics(metrics_listen, metrics_named)
    try:
        server, port = create_server(listen, engine, extra, max_workers=workers,
                                     fast_workers=fast_workers, metrics=metrics,
                                     security=secured.security,
                                     health_listen=secured.health_listen,
                                     max_request_mib=_max_request_mib(max_request_mib,
                                                                      settings),
                                     watch_caller_share=(
                                         settings.placement.watch_caller_share
                                         if settings is not None else DEFAULT_CALLER_SHARE))
    except (OSError, RuntimeError, SecurityFileError) as exc:
        stop_metrics()
        stop_store()
        raise usage_error(f"cannot listen on {listen}: {exc}") from exc
    host = listen.rsplit(":", 1)[0] if ":" in listen else listen
    done = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    # handlers first: a supervisor may stop the server as soon as it reads the address
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        typer.echo(f"placement API listening on {host}:{port}", nl=True)
        if kept_note:
            typer.echo(kept_note)
        if metrics_url:
            typer.echo(f"metrics on {metrics_url}")
        if secured.security != TransportSecurity():
            typer.echo(f"secured with {secured.security.describe()}")
        if secured.health_listen is not None:
            typer.echo(f"health checks (plaintext) on "
                       f"{secured.health_listen.rpartition(':')[0]}:{health_port(server)}")
        follow = JournalFollower(engine)
        while not done.wait(0.5):
            follow()  # what other servers on the store changed: for reads
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        stop(server, grace_s)
        stop_metrics()
        stop_store()
        typer.echo("placement API stopped")


def _max_request_mib(option: int | None, settings: Settings | None) -> int:
    """--max-request-mib, else placement.max_request_mib of the settings, else the default."""
    if option is not None:
        return option
    return settings.placement.max_request_mib if settings is not None else DEFAULT_MAX_REQUEST_MIB


def _address(option: str | None, flag: str, field: str, settings: Settings | None,
             config: Path | None) -> tuple[str | None, str]:
    """An address to serve on and how its errors name it: the option when given (options beat
    --config's), else the ``placement.<field>`` setting when the settings set it (--config, or
    HEADROOM_PLACEMENT__*), named as that setting in its file, else None, named by the option."""
    if option is not None:
        return option, flag
    if settings is not None and field in settings.placement.model_fields_set:
        return getattr(settings.placement, field), f"{config or 'configuration'}: placement.{field}"
    return None, flag


def _settings(config: Path | None, db: Path | None) -> Settings:
    from controlplane.settings import ConfigError

    try:
        return settings_with_db(config, db)
    except ConfigError as error:
        raise usage_error(str(error)) from None


#: what a server started on a store cannot do yet: the store keeps bindings and plans, not the
#: inventory (Place is FAILED_PRECONDITION no_inventory, RankReplicas scores every replica 0)
WAITS_FOR_INVENTORY = ("placing and ranking wait for the first SyncInventory (the inventory is "
                       "not kept)")


def _kept_in_store(settings: Settings, checks_hints: bool = False) -> tuple[
        PlacementEngine, Sequence[Registrar], Callable[[], None], str]:
    """``--db`` / ``--config``: an engine following the store's placement journal (its schema
    migrated first, as ``headroom serve`` does), the DemandHints service on the same store
    (``checks_hints``, with --config: AddHint checks a hint against its pools and budgets;
    ``--db`` alone knows no fleet's pools), what closes the store and a line saying what was
    restored and that placing and ranking wait for the first SyncInventory; one-line errors
    naming the store."""
    from controlplane.autoscaling.from_settings import known_capacity
    from controlplane.placement_api import journaled_engine
    from controlplane.runtime import hints_api
    from controlplane.store.configured import open_store
    from controlplane.store.engine import redact

    url, clock = settings.db.url, WallClock()
    with store_errors(url), db_url_named(settings):
        store = open_store(settings.db, migrate=True)
        # the journal names this server by k8s.identity when set (e.g. its pod's name, as a
        # `headroom serve` replica goes by its Lease identity), else hostname-pid
        engine = journaled_engine(store, clock, settings.k8s.identity or None)
    bindings, _, revision = engine.counts()
    known = known_capacity(settings) if checks_hints else None
    return engine, (hints_api(store, clock, known, simulated=None),), store.engine.dispose, (
        f"placement state kept in {redact(url)}: {bindings} binding(s) and plan revision "
        f"{revision} restored; {WAITS_FOR_INVENTORY}")


def _pin(cpus: str) -> None:
    """``--cpus``: pin every thread of this process (refused naming the option)."""
    try:
        pinned = pin_process(parse_cpu_list(cpus))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--cpus") from exc
    typer.echo(f"placement API pinned to CPU(s) {','.join(map(str, sorted(pinned)))}", err=True)


def _metrics(listen: str | None, named: str = "--metrics-listen"
             ) -> tuple[PlacementMetrics | None, Callable[[], None], str]:
    """``--metrics-listen`` or ``placement.metrics_listen`` (``named``): (metrics, what stops
    their HTTP server, their URL); nothing without either. Refused naming the option or the
    setting when the address cannot be served."""
    if listen is None:
        return None, lambda: None, ""
    try:
        return exposed_metrics(listen)
    except (OSError, ValueError) as exc:
        if named.startswith("--"):
            raise typer.BadParameter(f"cannot serve metrics on {listen}: {exc}",
                                     param_hint=named) from exc
        raise usage_error(f"{named} {listen}: cannot serve metrics there: {exc}") from None
