"""``headroom demo``: the whole loop embedded — SQLite, simulated fleet, forecasts, placement API,
reconcile jobs and the dashboard — either paced by APScheduler or run as fast as possible. It
holds its store's fleet lease as ``serve --backend sim`` does (``controlplane.fleet_lease``), so
a demo and a serve, or two demos, never drive one store's simulated fleet at once, and keeps its
placement state in the store's placement journal as ``serve`` does (``headroom placement
bindings`` reads it; a resumed demo keeps its bindings and plan revision)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import grpc

from controlplane.adapters.clock import WallClock
from controlplane.adapters.keda import keda_registrar
from controlplane.autoscaling.from_settings import known_capacity
from controlplane.domain.timestamps import utc_text
from controlplane.domain.url_secrets import redact
from controlplane.domain.wording import counted
from controlplane.fleet_lease import hold_fleet_lease
from controlplane.jobs import build_scheduler
from controlplane.placement_api import (
    FOLLOW_EVERY_S,
    JournalFollower,
    journaled_engine,
    served_metrics,
    transport_security,
)
from controlplane.runtime import SimRuntime, hints_api, keda_servicer
from controlplane.settings import Settings
from controlplane.sim_start import check_sim_store
from controlplane.store.configured import open_store
from controlplane.store.lease import SqlLeaseStore
from scheduler.metrics import check_bindable
from scheduler.server import DEFAULT_WORKERS, create_server, stop, watch_stream_cap

#: the shortest wall time between two steps of a live demo's simulated clock
MIN_SIM_STEP_WALL_S = 0.05
DASHBOARD_APP = Path(__file__).resolve().parent.parent / "dashboard" / "app.py"


@dataclass(frozen=True, slots=True)
class DemoSummary:
    ticks: int  # ticks, placements and forecasts this run made (not the store's rows: pruned)
    sim_minutes: float
    sim_start_at: str  # ISO 8601: the simulated instant this run started at
    models: int
    gpus: int
    gpus_peak: int
    placements: int
    forecasts: int
    served_share: float
    short_model_minutes_pct: float
    gpu_hours: float
    cost_usd: float
    mig_relayouts: int  # nodes the loop re-laid out (MIG) in this run
    wall_s: float
    grpc_address: str
    dashboard_url: str | None
    db_url: str

    def as_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def line(self) -> str:
        """The line a demo ends with (``--json`` prints ``as_dict`` instead)."""
        return (f"stopped after {counted(round(self.sim_minutes), 'simulated minute')}: "
                f"{counted(self.ticks, 'tick')}, {counted(self.placements, 'placement')}, "
                f"{counted(self.gpus, 'GPU')}, served {100 * self.served_share:.2f}% of demand, "
                f"{self.gpu_hours:.1f} GPU-hours (${self.cost_usd:,.0f}), "
                f"{counted(self.mig_relayouts, 'MIG re-layout')}")


class Demo:
    def __init__(self, settings: Settings, start_at: datetime,
                 stopping: threading.Event | None = None) -> None:
        """``start_at``: where a new store's simulated clock starts (floored to the minute; a
        resumed store goes on from its last tick): the wall clock's now, or ``demo --start``.
        The simulated traffic is a function of the time of day and week, so it is an input of
        the run as the settings are: runs from one start give the same summary.
        ``stopping``: the flag ``request_stop`` sets (a signal handler's, set perhaps
        before the demo has started: it then stops as soon as it has)."""
        self.settings = settings
        check_sim_store(settings)  # reads only: a refused start writes no lease, row or schema
        self.store = open_store(settings.db, migrate=True)
        self.lease = hold_fleet_lease(settings.db.url, SqlLeaseStore(self.store.engine),
                                      settings.db.lease_duration_s, WallClock())  # first
        try:
            self.engine = journaled_engine(self.store, WallClock(), self.lease.identity)
            self.runtime = SimRuntime.open(settings, self.store, start_at, self.engine,
                                           writer=self.lease.identity,
                                           term=self.lease.elector.term)
        except BaseException:
            self.lease.release()
            raise
        self.runtime.leads = self.lease.leads
        self.sim_start_at = self.runtime.clock.now()
        self.keda = keda_servicer(settings, self.store, self.runtime.clock,
                                  lambda: self.runtime.specs)
        self.gpus_peak = 0
        self.server: grpc.Server | None = None
        self.grpc_address = ""
        self.dashboard: subprocess.Popen[bytes] | None = None
        self.dashboard_url: str | None = None
        self.metrics_url = ""
        self._stop_metrics: Callable[[], None] = lambda: None
        self._wall_start_s = time.monotonic()
        self._stop = stopping if stopping is not None else threading.Event()

    # -- services ----------------------------------------------------------------------------
    def start_grpc(self) -> str:
        """Placement API plus KEDA's external scaler on the demo's forecasts (and, with
        ``placement.metrics_listen``, the placement API's and the loop's Prometheus metrics)."""
        host = self.settings.placement.listen.rpartition(":")[0]
        extra = [keda_registrar(self.keda), hints_api(self.store, self.runtime.clock,
                                                      known_capacity(self.settings),
                                                      simulated=True)]
        served = served_metrics(self.settings)
        self._stop_metrics, self.metrics_url = served.stop, served.url
        self.runtime.on_tick = served.loop.record if served.loop is not None else None
        metrics = served.placement
        workers = DEFAULT_WORKERS + self.keda.max_streams  # KEDA's streams hold a thread each
        watch_cap = watch_stream_cap(DEFAULT_WORKERS)
        share = self.settings.placement.watch_caller_share
        listen = self.settings.placement.listen
        try:  # a port taken: a free one rather than a failed demo (and no gRPC C-core error line)
            check_bindable(listen, port_free=True)
        except ValueError:
            listen = f"{host}:0"
        security = transport_security(self.settings.placement)
        max_request_mib = self.settings.placement.max_request_mib
        try:
            self.server, bound = create_server(listen, self.engine, extra,
                                               max_workers=workers, metrics=metrics,
                                               max_watch_streams=watch_cap, security=security,
                                               max_request_mib=max_request_mib,
                                               watch_caller_share=share)
        except (RuntimeError, OSError):  # taken since the check: a free one
            self.server, bound = create_server(f"{host}:0", self.engine, extra,
                                               max_workers=workers, metrics=metrics,
                                               max_watch_streams=watch_cap, security=security,
                                               max_request_mib=max_request_mib,
                                               watch_caller_share=share)
        self.grpc_address = f"{host}:{bound}"
        return self.grpc_address

    def start_dashboard(self) -> str:
        """Streamlit on ``dashboard.port``, or on a free port when that one is taken (as the
        gRPC API does): Streamlit would exit unseen and the printed URL show another server."""
        address = self.settings.dashboard.address
        port = port_or_free(address, self.settings.dashboard.port)
        env = {**os.environ, "HEADROOM_DB__URL": self.settings.db.url}
        self.dashboard = subprocess.Popen(
            dashboard_command(address, port), env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.dashboard_url = f"http://{address}:{port}"
        return self.dashboard_url

    # -- running -----------------------------------------------------------------------------
    def run_fast(self, minutes: float, on_minute: Callable[[int], None] | None = None) -> None:
        """Run ``minutes`` simulated minutes as fast as the core allows."""
        for minute in range(int(minutes)):
            if self._stop.is_set():
                break
            self.runtime.advance(60.0)
            self._track_peak()
            if on_minute:
                on_minute(minute + 1)
        if minutes % 1 and not self._stop.is_set():
            self.runtime.advance((minutes % 1) * 60)
            self._track_peak()

    def run_live(self, speed: float, minutes: float | None,
                 on_second: Callable[[], None] | None = None) -> None:
        """Pace virtual time at ``speed`` x wall time with APScheduler jobs until stopped."""
        runtime = self.runtime
        reconcile_s, forecast_s, prune_s = (self.settings.reconcile.interval_s,
                                            self.settings.forecast.interval_s,
                                            self.settings.db.prune_interval_s)
        # a sim step is at most a reconcile interval (at a high speed the loop still ticks at
        # its interval when it keeps up), and at least MIN_SIM_STEP_WALL_S of wall time
        sim_step_wall_s = max(MIN_SIM_STEP_WALL_S, min(0.5, reconcile_s / speed))
        def advance_sim() -> None:
            runtime.advance(speed * sim_step_wall_s, run_jobs=False)
            self._track_peak()

        def every_wall_s(interval_s: float) -> float:  # no job runs more often than the sim steps
            return max(interval_s / speed, sim_step_wall_s)

        runtime.start()  # the first forecast and tick, at the start instant
        started_at = runtime.clock.now()
        self.lease.gated(runtime.prune)()  # a resumed store's backlog first, as serve's job
        jobs: dict[str, tuple[Callable[[], object], float]] = {
            "sim.advance": (advance_sim, sim_step_wall_s),
            "forecast": (self.lease.gated(self._sim_paced(
                runtime.refresh_forecasts, started_at, forecast_s)), every_wall_s(forecast_s)),
            "reconcile": (self.lease.gated(self._sim_paced(runtime.tick, started_at,
                                                           reconcile_s)),
                          every_wall_s(reconcile_s)),
            # db.retention_s by simulated time, every db.prune_interval_s of it
            "store.prune": (self.lease.gated(self._sim_paced(runtime.prune, started_at, prune_s)),
                            every_wall_s(prune_s)),
            "placement.follow": (JournalFollower(self.engine), FOLLOW_EVERY_S),  # wall time
        }
        scheduler = build_scheduler(jobs, start_at=None)
        scheduler.start()
        try:
            while not self._stop.wait(1.0):
                if on_second:
                    on_second()
                if minutes is not None and self.sim_minutes() >= minutes:
                    break
        finally:
            scheduler.shutdown(wait=True)

    def _sim_paced(self, job: Callable[[], object], ran_at: datetime,
                   interval_s: float) -> Callable[[], object]:
        """``job`` that runs only once the simulated clock is at least half of ``interval_s``
        past its last run (at ``ran_at`` first): a wall-clock job that comes round before the
        sim has moved that far would record ticks (forecasts) far closer than their interval,
        several at one simulated instant; half, as the sim moves in steps that jitter against
        the job's wall-clock interval."""
        last_at = [ran_at]
        def run() -> object:
            with self.runtime.lock:  # the clock does not move between the check and the job
                now = self.runtime.clock.now()
                if (now - last_at[0]).total_seconds() < interval_s / 2:
                    return None
                last_at[0] = now
                return job()
        return run

    def request_stop(self) -> None:
        self._stop.set()

    def shutdown(self) -> None:
        self.lease.release()
        self.keda.stopping.set()
        if self.server is not None:
            stop(self.server, grace_s=2.0)
        self._stop_metrics()
        if self.dashboard is not None:
            self.dashboard.terminate()
            try:
                self.dashboard.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.dashboard.kill()

    # -- reporting ---------------------------------------------------------------------------
    def _track_peak(self) -> None:
        self.gpus_peak = max(self.gpus_peak, self.runtime.cluster.snapshot().gpus_ready())

    def sim_minutes(self) -> float:
        return (self.runtime.clock.now() - self.sim_start_at).total_seconds() / 60

    def summary(self) -> DemoSummary:
        tally = self.runtime.tally
        snapshot = self.runtime.cluster.snapshot()
        price = {p.name: p.price_per_gpu_hour for p in self.settings.pools}
        return DemoSummary(
            ticks=self.runtime.ticks,
            sim_minutes=round(self.sim_minutes(), 2),
            sim_start_at=utc_text(self.sim_start_at),
            models=len(self.runtime.specs),
            gpus=snapshot.gpus_ready(),
            gpus_peak=self.gpus_peak,
            placements=self.runtime.placements,
            forecasts=self.runtime.forecasts,
            served_share=round(tally.served_share, 5),
            short_model_minutes_pct=round(
                100 * tally.short_model_s / tally.model_s if tally.model_s else 0.0, 3),
            gpu_hours=round(self.runtime.cluster.gpu_hours, 3),
            cost_usd=round(self.runtime.cluster.cost_usd(price), 2),
            mig_relayouts=self.runtime.cluster.relayouts_started,
            wall_s=round(time.monotonic() - self._wall_start_s, 2),
            grpc_address=self.grpc_address,
            dashboard_url=self.dashboard_url,
            db_url=redact(self.settings.db.url),  # the --json summary: no password
        )


def port_or_free(host: str, port: int) -> int:
    """``port`` if a server can listen on it at ``host`` now, else a free port."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Streamlit's server
        try:
            probe.bind((host, port))
        except OSError:
            probe.bind((host, 0))
        return int(probe.getsockname()[1])


def dashboard_command(address: str, port: int) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(DASHBOARD_APP),
            "--server.address", address, "--server.port", str(port),
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--global.developmentMode", "false", "--server.fileWatcherType", "none",
            # an operator's view: no Deploy button, rerun or clear-cache in the toolbar
            "--client.toolbarMode", "viewer"]
