"""``headroom serve`` with ``backend: kubernetes``: every replica serves the placement API and
keeps the inventory; only the Lease holder reconciles, forecasts and moves MIG re-layouts on.
The models are the store's at each tick (``ModelsInUse``): ``headroom models import`` / ``models
remove`` take effect at the next tick, without a restart.

Each model's request rate comes from Prometheus (``prometheus.url``, required): every tick reads
the current rate (a model it cannot measure is unknown that tick, not 0), and every forecast
refresh reads the stored models' history from Prometheus rather than the store's observations."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from rich.console import Console

from controlplane.adapters.clock import WallClock
from controlplane.adapters.k8s.backend import build_k8s_backend
from controlplane.adapters.k8s.reader import K8sClusterReader, pools_node_mismatches
from controlplane.adapters.keda import keda_registrar
from controlplane.adapters.placement import LocalPlacementClient
from controlplane.adapters.prometheus import (
    PrometheusHistory,
    PrometheusLoad,
    prometheus_source,
    unmatched_model_queries,
)
from controlplane.autoscaling.from_settings import known_capacity
from controlplane.decision_retry import RetryingDecisionStore
from controlplane.domain.errors import Fenced, PermanentError, TransientError, error_line
from controlplane.domain.loading_guard import GuardSync
from controlplane.forecast_refresh import forecast_jobs, refresh_forecasts
from controlplane.jobs import build_scheduler, run_until_stopped
from controlplane.metrics import ControlPlaneMetrics
from controlplane.models_in_use import ModelsInUse
from controlplane.placement_api import FOLLOW_EVERY_S, JournalFollower, start_placement_api
from controlplane.ports import ClusterReader, MigRelayoutActuator, PlacementClient
from controlplane.reconcile import ReconcileConfig, ReconcileDeps
from controlplane.recorded_tick import TickRun, run_tick
from controlplane.runtime import hints_api, keda_servicer, prune_store
from controlplane.settings import ConfigError, Settings, pool_specs
from controlplane.settings_cluster import PrometheusSettings
from controlplane.settings_env import ENV_PREFIX
from controlplane.startup_lines import print_line
from controlplane.store import Store
from controlplane.store.configured import DbGroup, listed_model_count
from controlplane.store.engine import redact, sqlite_file
from controlplane.store.fleet_pause import SqlFleetPause
from controlplane.store.hints import SqlDemandHints
from controlplane.store.ledger import SqlForecastLedger
from controlplane.store.model_digest import model_specs_digested
from controlplane.store.outage import STORE_DOWN
from controlplane.store.pauses import SqlModelPauses
from controlplane.store.relayout import SqlRelayoutStore
from forecaster.sources.prometheus import PrometheusSource
from forecaster.sources.promql import KV_CACHE_GAUGES
from scheduler.engine import PlacementEngine

log = logging.getLogger("headroom.serve")


class NoModelsError(Exception):
    """The store lists no models to manage."""


def _no_models(url: str, what_to_do: str) -> NoModelsError:
    return NoModelsError(f"{redact(url)}: the store lists no models; {what_to_do} before serving")


def check_models_listed(db: DbGroup) -> None:
    """NoModelsError unless the store at ``url`` lists a model. It only reads, so a refused
    start leaves no trace: no SQLite file or directory is created, no schema migrated."""
    url = db.url
    store_file = sqlite_file(url)
    if store_file is not None and not store_file.is_file():
        raise _no_models(url, "there is no such database file: create it with `headroom db "
                              "upgrade`, then add models with `headroom models import FILE`")
    if listed_model_count(db) == 0:
        raise _no_models(url, "add them with `headroom models import FILE`")


def check_prometheus(settings: Settings) -> None:
    """ConfigError (one line) unless ``prometheus`` names a Prometheus and its credentials can
    be read: the Kubernetes backend has no other source of each model's request rate. Builds
    the client only (no request), so a refused start writes nothing."""
    if not settings.prometheus.url:
        raise ConfigError(
            "backend: kubernetes reads each model's request rate from Prometheus: set "
            f"prometheus.url (environment {ENV_PREFIX}PROMETHEUS__URL), e.g. "
            "http://prometheus-server.monitoring:9090")
    prometheus_source(settings.prometheus)


def follow(reader: ClusterReader, placement: PlacementClient) -> bool:
    """A follower's tick: keep the placement inventory fresh (followers still serve Place). An
    API error is logged on one line (warning if transient, error if rejected, e.g. 403) and the
    last inventory kept; False when the fleet could not be read."""
    try:
        observed = reader.snapshot()
    except (TransientError, PermanentError) as error:
        level = logging.WARNING if isinstance(error, TransientError) else logging.ERROR
        log.log(level, "tick.follower_unobserved", extra={"error": str(error)})
        return False
    try:
        placement.sync_inventory(observed)
    except STORE_DOWN as error:  # the placement journal's store is down: the next tick retries
        log.warning("tick.follower_unsynced", extra={"error": error_line(error)})
        return False
    log.info("tick.follower")
    return True


def follower_tick(reader: ClusterReader, placement: PlacementClient,
                  metrics: ControlPlaneMetrics | None) -> bool:
    """The tick of a replica that does not lead: ``follow``, and its metrics say so and drop
    the per-model and per-pool gauges of the ticks it led (``ControlPlaneMetrics.forget_fleet``),
    which would otherwise stay frozen beside the new leader's."""
    if metrics is not None:
        metrics.forget_fleet()
    return follow(reader, placement)


def leader_tick(deps: ReconcileDeps, config: ReconcileConfig, mig: MigRelayoutActuator,
                metrics: ControlPlaneMetrics | None) -> TickRun:
    """The leader's tick: reconcile, count it (saved or not), and advance the MIG re-layouts in
    flight whatever became of the tick (a failed save or an error still moves them on; a
    store that cannot be used leaves them where they are, on one line, till the next tick)."""
    try:
        run = run_tick(deps, config)
    finally:
        _advance(mig)
    if metrics is not None:
        metrics.record(run.report, run.saved)
    return run


def leader_tick_on_current_models(deps: ReconcileDeps, models: ModelsInUse,
                                  mig: MigRelayoutActuator,
                                  metrics: ControlPlaneMetrics | None) -> TickRun:
    """``leader_tick`` with the models table's current set (``ModelsInUse.reload_if_changed``):
    a model imported, changed or removed since the last tick is sized as it now is."""
    models.reload_if_changed()
    return leader_tick(deps, models.config, mig, metrics)


def forecast_history(source: PrometheusSource, models: ModelsInUse) -> PrometheusHistory:
    """The forecast refresh's history: Prometheus', of the models in use at each refresh."""
    return PrometheusHistory(source, models.names)


def _advance(mig: MigRelayoutActuator) -> None:
    try:
        mig.advance()
    except STORE_DOWN as error:
        log.warning("relayouts.not_advanced", extra={"error": error_line(error),
                                                     "next": "the next tick tries again"})
    except Fenced as error:  # a step's record refused: another replica leads the relayouts
        log.error("relayouts.fenced", extra={"error": error_line(error),
                                             "next": "this process no longer leads"})


def queue_preset(settings: Settings) -> str | None:
    """The engine whose waiting-requests gauge the load source reads each tick: the metric
    preset's, while ``reconcile.queue_drain_s`` counts the queue and no custom
    ``prometheus.query`` replaces the preset; None otherwise."""
    if settings.reconcile.queue_drain_s <= 0 or settings.prometheus.query is not None:
        return None
    return settings.prometheus.metric


def kv_cache_preset(settings: Settings) -> str | None:
    """The engine whose KV cache usage the load source reads each tick: vLLM's or SGLang's
    (Triton exports none), while ``reconcile.kv_cache_target`` counts it; None otherwise. The
    usage is a fraction, so it is read beside a custom query too (``prometheus.metric`` still
    names the engine). With ``prometheus.by_engine`` each model's engine decides (the metric
    is the default of a model without one)."""
    prometheus = settings.prometheus
    if settings.reconcile.kv_cache_target <= 0 or \
            not (prometheus.by_engine or prometheus.metric in KV_CACHE_GAUGES):
        return None
    return prometheus.metric


def guard_loading(sync: Callable[[], GuardSync],
                  metrics: ControlPlaneMetrics | None = None) -> None:
    """The leader's loading guard after its tick (``K8sLoadingGuard``): each pod it guarded or
    released is logged and counted; an API it cannot read or write now is left to the next
    tick."""
    try:
        synced = sync()
    except (TransientError, PermanentError) as error:
        log.warning("loading_guard.failed", extra={"error": error_line(error),
                                                   "next": "the next tick tries again"})
        return
    for line in synced.lines():
        log.info("loading_guard.changed", extra={"change": line})
    if metrics is not None:
        metrics.loading_guard.record(synced)


def warn_unknown_model_queries(settings: PrometheusSettings, models: Sequence[str],
                               console: Console) -> None:
    """At start, a ``warning:`` line naming each ``prometheus.model_queries`` entry of a model
    the models file does not list (a misspelt name would leave that model on the preset's
    requests, profiled in tokens); it applies once such a model is imported."""
    for model in unmatched_model_queries(settings, models):
        print_line(console, f"warning: prometheus.model_queries.{model}: no model {model!r} in "
                            "the models file; its query applies once one is imported")


def warn_pool_mismatches(reader: K8sClusterReader, console: Console) -> None:
    """At start, a ``warning:`` line for each pool whose registered nodes report another GPU
    product or count than its settings (``reader.pool_node_mismatches``; every tick's record
    notes them too, as ``headroom status`` shows). An API that cannot be read now is left to
    the first tick, which says so."""
    try:
        lines = pools_node_mismatches(reader.inventory(), reader.pools)
    except (TransientError, PermanentError) as error:
        log.debug("pools.unchecked", extra={"error": error_line(error)})
        return
    for line in lines:
        print_line(console, f"warning: {line}")


def claim_term(decisions: RetryingDecisionStore, now: datetime) -> None:
    """A replica that leads claims its term's fencing token at once (a no-op once claimed),
    not at its first save: from then on a deposed leader's late save is refused, also in the
    seconds before the new leader's first tick or refresh. A store that is down: the first
    save claims it (the tick reports the store down)."""
    try:
        decisions.fence_token(now)
    except STORE_DOWN as error:
        log.debug("tick.fence_unclaimed", extra={"error": error_line(error)})


def run_serve_k8s(settings: Settings, store: Store, engine: PlacementEngine,
                  console: Console, stop_event: threading.Event | None = None, *,
                  identity: str | None = None) -> None:
    """``identity``: the replica's Lease holder identity (``serve.serve_identity``), the name
    its ``engine`` changes the placement journal by; None: ``k8s.identity`` or hostname-pid."""
    digest, specs = model_specs_digested(store.engine)
    if not specs:  # check_models_listed ran before the store was migrated; models went since
        raise _no_models(settings.db.url, "add them with `headroom models import FILE`")
    # the models every consumer uses, reloaded each tick when `headroom models import` /
    # `models remove` changed them (no restart)
    models = ModelsInUse(settings, store.engine, digest, specs)
    clock = WallClock()
    store.upsert_prices(pool_specs(settings), clock.now())  # the Cost page's prices
    source = prometheus_source(settings.prometheus, engines=models.engines)
    # the re-layouts' records are fenced by the term of the tick records' (``decisions``)
    relayouts = SqlRelayoutStore(store.engine, fence=lambda: decisions.fence_token(clock.now()))
    # a workload labelled with a model the table does not list is not observed as one
    backend = build_k8s_backend(settings, clock, relayouts,
                                identity=identity,
                                load=PrometheusLoad(source, models.replica_rps,
                                                   settings.prometheus.metric,
                                                   settings.prometheus.latency_query,
                                                   settings.prometheus.latency_quantile,
                                                   queue_preset(settings),
                                                   kv_cache_preset(settings),
                                                   latency_timed=settings.prometheus.latency),
                                models=models.names)
    warn_pool_mismatches(backend.reader, console)
    warn_unknown_model_queries(settings.prometheus, models.names(), console)
    history = forecast_history(source, models)
    placement = LocalPlacementClient(engine)
    inventory_reader = backend.reader.without_load()  # a follower's: no Prometheus queries
    decisions = RetryingDecisionStore(store, writer=backend.identity, term=backend.elector.term)
    deps = ReconcileDeps(clock=clock, reader=backend.reader, node_pools=backend.node_pools,
                         replicas=backend.replicas, placement=placement, forecasts=store,
                         # the ticks a replica records only while it holds the Lease (or, a
                         # dry run, while none does): written by its Lease holder identity
                         decisions=decisions,
                         history=store,
                         # its writes are fenced by the term of the tick records', too
                         ledger=SqlForecastLedger(
                             store.engine, fence=lambda: decisions.fence_token(clock.now())),
                         sharing=backend.sharing, mig=backend.mig, samples=store,
                         hints=SqlDemandHints(store.engine),
                         pauses=SqlModelPauses(store.engine),
                         fleet_pause=SqlFleetPause(store.engine))

    stepping_down = threading.Event()  # SIGTERM: lead no more, hand the Lease back
    ticking = threading.Lock()  # held by a tick, so the Lease goes only once none is in flight
    leasing = threading.Lock()  # the elector is used by one thread at a time

    def leads() -> bool:
        return not stepping_down.is_set() and backend.elector.is_leader(clock.now())

    def keep_lease() -> None:
        with leasing:
            if not stepping_down.is_set():
                now = clock.now()
                backend.elector.try_acquire_or_renew(now, clock.monotonic())
                if backend.elector.is_leader(now):
                    claim_term(decisions, now)

    def tick() -> None:
        with ticking:
            if not leads():
                models.reload_if_changed()  # a follower's KEDA targets follow the models, too
                follower_tick(inventory_reader, placement, metrics)
                return
            # metrics: set below, before it runs
            leader_tick_on_current_models(deps, models, backend.mig, metrics)
            guard_loading(backend.guard_loading, metrics)

    def forecast() -> None:
        if leads():  # stored under this term's token: none when another replica led since
            models.reload_if_changed()  # forecast the models in use, as a takeover's, too
            now = clock.now()
            refresh_forecasts(history, store, now, settings, fence=decisions.fence_token(now))

    def prune() -> None:
        if leads():
            prune_store(store, clock.now(), settings)

    def step_down() -> None:
        """At once on SIGTERM: no job starts leading again; the tick in flight, if any, ends
        (the re-layout step it moves on is not left halfway); then the Lease is handed back,
        so a standby takes over at its next try, while a forecast refresh in flight finishes
        (it writes nothing to the cluster; its forecasts are stored unless the new leader
        claimed the store first)."""
        stepping_down.set()
        with ticking, leasing:
            backend.elector.release()
            if metrics is not None:  # scraped until it stops: as a follower's
                metrics.forget_fleet()

    keda = keda_servicer(settings, store, clock, lambda: models.specs)
    hints = hints_api(store, clock, known_capacity(settings))
    stop_api, metrics = start_placement_api(settings, engine, [keda_registrar(keda), hints],
                                           console, stream_workers=keda.max_streams)
    keep_lease()
    # every job runs at once, then on its interval: the leader forecasts from Prometheus'
    # history at start rather than one forecast.interval_s later
    scheduler = build_scheduler({
        "leader": (keep_lease, settings.k8s.renew_deadline_s / 3),
        **forecast_jobs(settings, forecast),
        "reconcile": (tick, settings.reconcile.interval_s),
        "store.prune": (prune, settings.db.prune_interval_s),
        "placement.follow": (JournalFollower(engine), FOLLOW_EVERY_S),
    }, start_at=clock.now())

    def on_stop() -> None:
        keda.stopping.set()
        stop_api()

    run_until_stopped(scheduler, on_stop, stop_event, on_stopping=step_down)
