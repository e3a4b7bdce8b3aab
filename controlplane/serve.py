"""``headroom serve``: reconcile + forecast jobs and the gRPC placement API, paced by wall time.

With ``backend: sim`` the simulated fleet runs in real time (useful to try a config), driven by
one process per store (``controlplane.fleet_lease``); with
``backend: kubernetes`` the Kubernetes adapters actuate (leader only) while every replica serves
the placement API.
"""

from __future__ import annotations

import threading

from rich.console import Console

from controlplane.adapters.clock import WallClock
from controlplane.adapters.keda import keda_registrar
from controlplane.autoscaling.from_settings import known_capacity
from controlplane.fleet_lease import FleetLease, FleetLeaseHeld, hold_fleet_lease
from controlplane.forecast_refresh import forecast_jobs
from controlplane.identity import holder_identity
from controlplane.jobs import build_scheduler, run_until_stopped
from controlplane.placement_api import (
    FOLLOW_EVERY_S,
    JournalFollower,
    journaled_engine,
    start_placement_api,
)
from controlplane.ports import Clock
from controlplane.runtime import SimRuntime, hints_api, keda_servicer
from controlplane.settings import Settings
from controlplane.sim_start import check_sim_store
from controlplane.store import Store
from controlplane.store.configured import open_store
from controlplane.store.lease import SqlLeaseStore
from scheduler.domain.errors import Unavailable
from scheduler.engine import PlacementEngine


class ServeError(Exception):
    """A one-line startup error (exit code 2)."""


def check_models(settings: Settings) -> None:
    """With ``backend: kubernetes`` Prometheus must be configured (each model's request rate)
    and the store must list the models to manage; the sim backend brings its own, and refuses
    a store that lists others (a real fleet's: ``controlplane.sim_start``). Reads only: the
    caller runs it before anything is written (the store, its schema, its lease, the
    forecaster state directory), so a refused start leaves no trace."""
    if settings.backend != "kubernetes":
        check_sim_store(settings)
        return
    from controlplane.serve_k8s import NoModelsError, check_models_listed, check_prometheus

    check_prometheus(settings)
    try:
        check_models_listed(settings.db)
    except NoModelsError as error:
        raise ServeError(str(error)) from None


def serve_identity(settings: Settings) -> str:
    """The one name a ``headroom serve`` replica goes by in the store, as the writer of its
    ticks and the process that changed the placement journal, and as the holder of the lease it
    leads by: with ``backend: kubernetes`` its Lease holder identity (``k8s.identity``, or
    hostname-pid as the elector computes it), else hostname-pid (the store fleet lease's)."""
    if settings.backend == "kubernetes" and settings.k8s.identity:
        return settings.k8s.identity
    return holder_identity()


def run_serve(settings: Settings, console: Console,
              stop_event: threading.Event | None = None) -> None:
    """Serve until SIGTERM (``stop_event``, installed by the caller before anything starts)
    or Ctrl-C."""
    store = open_store(settings.db, migrate=True)
    identity = serve_identity(settings)
    try:  # the placement state every replica on the store shares, and a restart restores
        engine = journaled_engine(store, WallClock(), identity)
    except Unavailable as error:
        store.engine.dispose()
        raise ServeError(str(error)) from None
    if settings.backend == "kubernetes":
        from controlplane.adapters.k8s.backend import KubeconfigError
        from controlplane.serve_k8s import NoModelsError, run_serve_k8s

        try:
            run_serve_k8s(settings, store, engine, console, stop_event, identity=identity)
        except (NoModelsError, KubeconfigError) as error:
            raise ServeError(str(error)) from None
        return
    clock = WallClock()
    lease = _hold_fleet_lease(settings, store, clock)
    try:
        _run_sim(settings, store, engine, console, clock, lease, stop_event)
    finally:
        lease.release()  # after the last job stopped: a restart takes the store at once


def _run_sim(settings: Settings, store: Store, engine: PlacementEngine, console: Console,
             clock: Clock, lease: FleetLease, stop_event: threading.Event | None) -> None:
    runtime = SimRuntime.open(settings, store, clock.now(), engine, writer=lease.identity,
                              term=lease.elector.term)
    runtime.follow_wall(clock.now())  # a resumed store: from now, not from its last tick
    runtime.leads = lease.leads
    keda = keda_servicer(settings, store, runtime.clock, lambda: runtime.specs)
    stop_api, metrics = start_placement_api(settings, engine, [keda_registrar(keda),
                                                               hints_api(
                                                                   store, runtime.clock,
                                                                   known_capacity(settings),
                                                                   simulated=True)],
                                           console,
                                           stream_workers=keda.max_streams)
    runtime.on_tick = metrics.record if metrics is not None else None
    scheduler = build_scheduler({
        "sim.advance": (lambda: runtime.follow_wall(clock.now()), 1.0),
        **forecast_jobs(settings, lease.gated(runtime.refresh_forecasts)),
        # a process whose lease lapsed to another exports none of the fleet's gauges
        "reconcile": (lease.gated(runtime.tick, following=None if metrics is None
                                  else metrics.forget_fleet), settings.reconcile.interval_s),
        "store.prune": (lease.gated(runtime.prune), settings.db.prune_interval_s),
        "placement.follow": (JournalFollower(engine), FOLLOW_EVERY_S),
    })
    runtime.start(forecast=settings.forecast.refresh_in_serve)

    def on_stop() -> None:
        keda.stopping.set()
        stop_api()

    run_until_stopped(scheduler, on_stop, stop_event)


def _hold_fleet_lease(settings: Settings, store: Store, clock: Clock) -> FleetLease:
    """The store's fleet lease before the simulated fleet writes anything (ServeError when a
    live process holds it: nothing else written)."""
    try:
        return hold_fleet_lease(settings.db.url, SqlLeaseStore(store.engine),
                                settings.db.lease_duration_s, clock)
    except FleetLeaseHeld as error:
        store.engine.dispose()
        raise ServeError(str(error)) from None
