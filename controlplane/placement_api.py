"""Starting the gRPC placement API of ``headroom serve`` (both backends), with its Prometheus
metrics and the reconcile loop's when ``placement.metrics_listen`` is set (``served_metrics``,
also used by ``headroom demo``), and the placement engine that follows the store's placement
journal (``journaled_engine``, ``JournalFollower``: ``serve`` and ``placement serve --db``) and
checks Place against the store's models table (``listed_tenant``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console
from sqlalchemy.exc import SQLAlchemyError

from controlplane.domain.errors import error_line
from controlplane.identity import holder_identity
from controlplane.metrics import ControlPlaneMetrics
from controlplane.ports import Clock
from controlplane.settings import ConfigError, Settings, pool_specs
from controlplane.settings_placement import PlacementSettings
from controlplane.startup_lines import print_line
from controlplane.store import Store
from controlplane.store.placement_journal import SqlPlacementJournal
from scheduler.domain.errors import Unavailable
from scheduler.engine import PlacementEngine
from scheduler.metrics import PlacementMetrics, exposed_metrics
from scheduler.security import SecurityFileError, TransportSecurity, check_files
from scheduler.server import (
    DEFAULT_WORKERS,
    Registrar,
    create_server,
    health_port,
    stop,
    watch_stream_cap,
)

log = logging.getLogger("headroom.placement")
#: how often a server applies what the other servers on its store changed (its reads, WatchPlan)
FOLLOW_EVERY_S = 0.5


def transport_security(placement: PlacementSettings) -> TransportSecurity:
    """The placement API's TLS, token and client identities files, as the settings give them."""
    return TransportSecurity(placement.tls_cert_file, placement.tls_key_file,
                             placement.tls_client_ca_file, placement.token_file,
                             placement.client_identities_file)


def check_security_files(placement: PlacementSettings, origin: str) -> TransportSecurity:
    """The API's exposure checked (``exposure_problem``) and its TLS and token files read
    before anything starts: a ConfigError naming ``origin`` (the config file), the setting and
    the file otherwise."""
    problem = placement.exposure_problem()
    if problem is not None:
        raise ConfigError(f"{origin}: {problem}")
    security = transport_security(placement)
    try:
        check_files(security)
    except SecurityFileError as error:
        raise ConfigError(f"{origin}: placement.{error}") from None
    return security


def journaled_engine(store: Store, clock: Clock, identity: str | None = None
                     ) -> PlacementEngine:
    """A placement engine on the store's placement journal, caught up with it (bindings and
    the plan the servers on this store made); raises Unavailable when it cannot be read. The
    journal names this process ``identity`` when it changes it (``headroom status``'s
    "changed ... by"): the name it leads by (``serve_identity``); hostname-pid by default."""
    holder = identity if identity is not None else holder_identity()
    return PlacementEngine(journal=SqlPlacementJournal(store.engine, holder, clock),
                           now_s=lambda: clock.now().timestamp(),
                           model_tenant=listed_tenant(store))


def listed_tenant(store: Store) -> Callable[[str], str | None]:
    """The tenant the store's models table lists a model under, read per call (None: not
    listed), for Place's tenancy checks as DemandHints reads it per call; a store that cannot
    be read raises Unavailable (UNAVAILABLE, nothing bound)."""
    def tenant_of(model: str) -> str | None:
        try:
            return store.model_tenants().get(model)
        except SQLAlchemyError as error:
            raise Unavailable(f"models table: cannot read the tenant of model {model!r}: "
                              f"{error_line(error)}") from None
    return tenant_of


class JournalFollower:
    """Applies what the other servers on the journal changed, and releases the bindings whose
    lease ran out, every ``FOLLOW_EVERY_S``. A
    journal that cannot be read is one warning when it starts failing and one info line when it
    reads again, not a line every half second (every change still goes through the journal,
    and fails with UNAVAILABLE, while it is so)."""

    def __init__(self, engine: PlacementEngine) -> None:
        self.engine = engine
        self.failing = False

    def __call__(self) -> None:
        try:
            self.engine.refresh()
            self.engine.expire_leases()
        except Unavailable as error:
            if not self.failing:
                log.warning("placement.journal_unreadable", extra={"error": str(error)})
            self.failing = True
            return
        if self.failing:
            log.info("placement.journal_readable")
        self.failing = False


@dataclass(frozen=True, slots=True)
class ServedMetrics:
    """The placement API's and the reconcile loop's metrics on one served registry (both None
    when ``placement.metrics_listen`` is unset), what stops their server, and its URL."""

    placement: PlacementMetrics | None
    loop: ControlPlaneMetrics | None
    stop: Callable[[], None]
    url: str


def served_metrics(settings: Settings) -> ServedMetrics:
    """Metrics served on ``placement.metrics_listen``, or none."""
    listen = settings.placement.metrics_listen
    if not listen:
        return ServedMetrics(None, None, _nothing, "")
    try:
        metrics, stop_metrics, url = exposed_metrics(listen)
    except OSError as error:  # taken since the startup check (headroom serve, demo)
        raise ConfigError(f"placement.metrics_listen {listen}: cannot serve metrics there: "
                          f"{error.strerror or error}") from None
    return ServedMetrics(metrics, ControlPlaneMetrics(metrics.registry, pool_specs(settings)),
                         stop_metrics, url)


def start_placement_api(settings: Settings, engine: PlacementEngine,
                        extra_servicers: Sequence[Registrar],
                        console: Console, stream_workers: int = 0,
                        ) -> tuple[Callable[[], None], ControlPlaneMetrics | None]:
    """Serve the placement API (and /metrics when configured); returns what stops both and,
    with metrics on, the reconcile loop's metrics on the same registry. ``stream_workers``
    threads are added to the server's pool for the long-lived streams of ``extra_servicers``
    (KEDA's scaler: its ``max_streams``), so that they never take the threads of other calls."""
    metrics = served_metrics(settings)
    try:
        server, port = create_server(settings.placement.listen, engine, extra_servicers,
                                     max_workers=DEFAULT_WORKERS + stream_workers,
                                     metrics=metrics.placement,
                                     max_watch_streams=watch_stream_cap(DEFAULT_WORKERS),
                                     security=transport_security(settings.placement),
                                     health_listen=settings.placement.health_listen,
                                     max_request_mib=settings.placement.max_request_mib,
                                     watch_caller_share=settings.placement.watch_caller_share)
    except SecurityFileError as error:  # changed since the startup check
        metrics.stop()
        raise ConfigError(f"placement.{error}") from None
    except (OSError, RuntimeError) as error:  # the port is taken
        metrics.stop()
        raise ConfigError(f"placement.listen {settings.placement.listen}: cannot serve the "
                          f"placement API there: {error}") from None
    except BaseException:
        metrics.stop()
        raise
    host = settings.placement.listen.rpartition(":")[0]

    print_line(console, f"placement API (gRPC) on {host}:{port} "
          f"({transport_security(settings.placement).describe()}"
          f"); backend {settings.backend}; dry_run={settings.safety.dry_run}")
    if metrics.url:
        print_line(console, f"placement API metrics on {metrics.url}")
    if settings.placement.health_listen is not None:
        print_line(console, f"placement API health checks (plaintext) on "
              f"{settings.placement.health_listen.rpartition(':')[0]}:{health_port(server)}")

    def stop_all() -> None:
        stop(server, grace_s=2.0)
        metrics.stop()

    return stop_all, metrics.loop


def _nothing() -> None:
    return None
