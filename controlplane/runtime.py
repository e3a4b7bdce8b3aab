"""Wiring of one process: settings -> store, clock, cluster, placement engine, reconcile deps
(and the reconcile loop's config, ``controlplane.reconcile_config``).

``SimRuntime`` runs the real core against the simulated fleet on a virtual clock. It is what
``headroom demo`` drives (as fast as possible, or paced by APScheduler jobs).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from datetime import datetime, timedelta

import grpc

from controlplane.adapters.hints_grpc import DemandHintsServicer, hints_registrar
from controlplane.adapters.keda import KedaScalerServicer
from controlplane.adapters.keda_limits import StoredLimits
from controlplane.adapters.keda_targets import CorrectedTargets
from controlplane.adapters.placement import LocalPlacementClient
from controlplane.autoscaling.hint_capacity import KnownCapacity
from controlplane.decision_retry import RetryingDecisionStore
from controlplane.domain.actions import RelayoutMig
from controlplane.domain.guards import GuardMemory
from controlplane.domain.models import ModelSpec
from controlplane.domain.node_plan import node_config_plan
from controlplane.domain.observed import ObservedState
from controlplane.domain.store_clock import StoreNow
from controlplane.domain.tick import TickReport
from controlplane.fleet_lease import FLEET_LEASE
from controlplane.forecast_calibration import CalibratedForecasts
from controlplane.forecast_refresh import refresh_forecasts
from controlplane.hint_checks import hint_checker
from controlplane.hinted_forecasts import HintedForecasts
from controlplane.models_in_use import ModelsInUse
from controlplane.ports import Clock
from controlplane.reconcile import ReconcileDeps, reconcile_once
from controlplane.reconcile_config import calibration_config
from controlplane.recorded_tick import run_tick
from controlplane.settings import Settings, pool_specs
from controlplane.sim import traffic
from controlplane.sim.catalog import DEMO_MODELS, DEMO_TRAFFIC, demo_rate_rps
from controlplane.sim.clock import VirtualClock
from controlplane.sim.cluster import SimCluster
from controlplane.sim.tally import ModelTally, ServedTally
from controlplane.sim_start import check_not_a_real_fleet, check_sim_models
from controlplane.store import Store
from controlplane.store import retention as store_retention
from controlplane.store.engine import shown_url
from controlplane.store.fleet_pause import SqlFleetPause
from controlplane.store.hints import SqlDemandHints
from controlplane.store.ledger import SqlForecastLedger
from controlplane.store.model_digest import model_specs_digested
from controlplane.store.pauses import SqlModelPauses
from controlplane.store.relayout import SqlRelayoutStore
from controlplane.store.resumed_state import last_tick_state
from controlplane.store.retention import Pruned, retention_cutoff
from controlplane.store.store_clock import read_store_now
from forecaster.types import Forecast
from scheduler.engine import PlacementEngine

log = logging.getLogger("headroom.runtime")


def keda_servicer(settings: Settings, store: Store, clock: Clock,
                  specs: Sequence[ModelSpec] | Callable[[], Sequence[ModelSpec]]
                  ) -> KedaScalerServicer:
    """KEDA's external scaler on the stored forecasts, with the upper tails the reconcile loop
    calibrated from its own errors and the demand hints' floors it sizes with (without the
    loop's hint lead: GetMetrics' own lookahead, ``keda_lookahead_s``, is KEDA's lead); the
    target is one replica's share, of the profile the loop sized the model with (corrected
    online where it was). It honours each model's replica bounds and pause as stored now; a
    pause without a count holds the replicas the newest tick observed, while that tick is at
    most a reconcile interval plus ``reconcile.max_staleness_s`` old. ``specs``: the models, or
    what gives the current ones at each call (``serve``'s models in use)."""
    pauses = SqlModelPauses(store.engine)
    observed_age_s = settings.reconcile.interval_s + settings.reconcile.max_staleness_s

    def offline_rps(given: Sequence[ModelSpec]) -> dict[str, float]:
        return {s.name: s.best_point().replica_rps for s in given}

    targets = CorrectedTargets((lambda: offline_rps(specs())) if callable(specs)
                               else offline_rps(specs),
                               settings.reconcile.target_utilization, store, clock,
                               refresh_s=settings.reconcile.interval_s)
    forecasts = HintedForecasts(CalibratedForecasts(store, SqlForecastLedger(store.engine), clock,
                                                    calibration_config(settings)),
                                SqlDemandHints(store.engine), clock, lead_s=0.0)
    return KedaScalerServicer(forecasts, clock, lookahead_s=settings.autoscaling.keda_lookahead_s,
                              max_forecast_age_s=settings.reconcile.max_forecast_age_s,
                              target_rps=targets, poll_s=settings.autoscaling.keda_poll_s,
                              max_streams=settings.autoscaling.keda_max_streams,
                              caller_share=settings.autoscaling.keda_caller_share,
                              observations=store, recent_load=store,
                              limits=StoredLimits(pauses, pauses, store, clock,
                                                  max_observed_age_s=observed_age_s),
                              models=store)


def hints_api(store: Store, clock: Clock, known: KnownCapacity | None = None,
              simulated: bool | None = False) -> Callable[[grpc.Server], str]:
    """The DemandHints gRPC service on the store's hints and models, for the placement server's
    ``extra_servicers`` (``headroom serve``, ``headroom demo`` and ``placement serve --db``);
    with ``known`` (the settings' pools and budgets) AddHint says whether they hold the hint,
    and always whether the model is paused (``hint_checks``).
    Its now is ``clock``'s, the loop's own (``simulated``: a simulated fleet's clock), or with
    ``simulated`` None, a server beside no loop, the store's (``read_store_now``, per call)."""
    def now() -> StoreNow:
        if simulated is None:
            return read_store_now(store.engine, FLEET_LEASE, clock.now())
        return StoreNow(clock.now(), simulated)

    return hints_registrar(DemandHintsServicer(
        SqlDemandHints(store.engine), store.model_tenants, now, hint_checker(store, known)))


def prune_store(store: Store, now: datetime, settings: Settings) -> Pruned | None:
    """Delete what is older than ``db.retention_s`` (the store job); None when it keeps all."""
    cutoff = retention_cutoff(now, settings.db.retention_s)
    if cutoff is None:
        return None
    pruned = store_retention.prune_store(store.engine, cutoff)
    if pruned.total:
        log.info("store.pruned", extra={"before": cutoff.isoformat(), **asdict(pruned)})
    return pruned


class PreHistory:
    """A DecisionStore that keeps nothing: the simulated fleet's life before Headroom's first
    recorded tick (no guard memory, no observations, no tick)."""

    def save_observed(self, observed: ObservedState, fence: int | None = None) -> None:
        pass

    def save_tick(self, report: TickReport, fence: int | None = None) -> int:
        return 0

    def save_intent(self, started_at: datetime, memory: GuardMemory,
                    writer: str | None = None, fence: int | None = None) -> None:
        pass

    def claim_fence(self, holder: str, now: datetime) -> int:
        return 0

    def last_guard_memory(self) -> GuardMemory:
        return GuardMemory()


class SimRuntime:
    def __init__(self, settings: Settings, store: Store, start_at: datetime,
                 engine: PlacementEngine | None = None, writer: str | None = None,
                 term: Callable[[], int | None] | None = None,
                 models: ModelsInUse | None = None) -> None:
        """``models``: the models table's set in use (None: read from ``store`` now); each tick
        picks up the table's changes as ``serve --backend kubernetes`` does."""
        self.settings = settings
        self.store = store
        self.clock = VirtualClock(start_at)
        check_sim_models(settings.sim.true_throughput_factor, DEMO_MODELS)
        self.models = models if models is not None else ModelsInUse(
            settings, store.engine, *model_specs_digested(store.engine))
        self.engine = engine or PlacementEngine()
        #: the tick records' store, and the term's fencing token the forecasts, observations,
        #: forecast-calibration ledger and MIG re-layouts are stored by
        self.decisions = RetryingDecisionStore(store, writer, term)
        relayouts = SqlRelayoutStore(store.engine, fence=lambda: (
            self.decisions.fence_token(self.clock.now())))
        self.cluster = SimCluster(pool_specs(settings), self.specs,
                                  demo_rate_rps(settings.sim.seed), settings.sim, start_at,
                                  mig_binding=settings.reconcile.node_configs,
                                  relayouts=relayouts)
        self.deps = ReconcileDeps(clock=self.clock, reader=self.cluster, node_pools=self.cluster,
                                  replicas=self.cluster,
                                  placement=LocalPlacementClient(self.engine),
                                  forecasts=store,
                                  decisions=self.decisions,
                                  history=store,
                                  ledger=SqlForecastLedger(store.engine, fence=lambda: (
                                      self.decisions.fence_token(self.clock.now()))),
                                  sharing=self.cluster, mig=self.cluster, samples=store,
                                  hints=SqlDemandHints(store.engine),
                                  pauses=SqlModelPauses(store.engine),
                                  fleet_pause=SqlFleetPause(store.engine))
        self.config = self.models.config
        self.tally = ServedTally()
        #: what this process ran: ticks, the placements they planned (a tick record's
        #: placement rows) and the forecasts its refreshes stored (the store's counts fall once
        #: it is pruned)
        self.ticks = 0
        self.placements = 0
        self.forecasts = 0
        #: called with every tick's report (e.g. ``ControlPlaneMetrics.record``)
        self.on_tick: Callable[[TickReport, bool], None] | None = None  # report, saved
        #: whether this process may write to the store now (it holds the store's fleet lease)
        self.leads: Callable[[], bool] = lambda: True
        self.lock = threading.RLock()
        self._next_tick_at = start_at
        self._next_forecast_at = start_at
        self._next_prune_at = start_at
        self._started = False
        self._take_over = False

    @classmethod
    def open(cls, settings: Settings, store: Store, wall_now: datetime,
             engine: PlacementEngine | None = None, writer: str | None = None,
             term: Callable[[], int | None] | None = None) -> SimRuntime:
        """Start on a new store (backfilling synthetic history) or resume where it stopped;
        its ticks are recorded as written by ``writer`` (the store lease holder's identity),
        fenced by its lease's ``term`` (``store/tick_fence.py``).

        The models are the store's models table: a new store's (an empty table) gets the six
        demo models; a resumed store's is kept as it is, with the operator's ``models import`` /
        ``models remove`` (ConfigError when ``serve``'s checks refuse it, before anything else
        is written)."""
        # before anything is written (``controlplane.sim_start``; the callers checked both
        # before they took the store's lease): a real fleet's store stays as it was
        check_sim_models(settings.sim.true_throughput_factor, DEMO_MODELS)
        listed = store.model_names()
        check_not_a_real_fleet(shown_url(store.engine), listed)
        if not listed:
            store.upsert_models(DEMO_MODELS)
        models = ModelsInUse(settings, store.engine, *model_specs_digested(store.engine))
        last_at = store.last_tick_at()
        # a changed price bills from the store's (simulated) clock on, where the ticks go on
        resume_at = None if last_at is None else \
            last_at + timedelta(seconds=settings.reconcile.interval_s)
        store.upsert_prices(pool_specs(settings), wall_now, resume_at)
        if last_at is None:
            start_at = wall_now.replace(second=0, microsecond=0)
            # a run stopped before its first tick stored its history: not twice
            shapes = [shape for shape in DEMO_TRAFFIC if shape.model in models.names()]
            stored = {shape.model: store.last_observed_at(shape.model) for shape in shapes}
            rows = traffic.history(shapes, settings.sim.seed, start_at,
                                   settings.sim.history_s, settings.forecast.step_s, stored)
            store.save_observations(rows)
            runtime = cls(settings, store, start_at, engine, writer, term, models)
            runtime._take_over = settings.sim.start_warm
            return runtime
        runtime = cls(settings, store, last_at + timedelta(seconds=settings.reconcile.interval_s),
                      engine, writer, term, models)
        observed = last_tick_state(store.engine)  # with what that tick applied
        if observed is not None:
            runtime.cluster.restore(observed)
        log.info("demo.resumed", extra={"at": last_at.isoformat()})
        return runtime

    def start(self, forecast: bool = True) -> None:
        """The first jobs, now: forecast (unless ``forecast`` is False: jobs outside
        this process refresh them) and tick (once; ``advance`` calls it if nobody did).

        On a new store with ``sim.start_warm`` an unrecorded tick first sizes the fleet that
        was already running (its nodes ready, its replicas serving), as when Headroom is
        installed on a serving cluster rather than on empty pools; the first recorded tick
        observes that fleet."""
        with self.lock:
            if self._started:
                return
            self._started = True
            now = self.clock.now()
            if forecast:
                self.refresh_forecasts()
            if self._take_over:
                taken = reconcile_once(replace(self.deps, decisions=PreHistory()), self.config)
                self.cluster.adopt()
                self._lay_out_taken_over(taken)
            self.tick()
            self._next_forecast_at = now + timedelta(seconds=self.settings.forecast.interval_s)
            self._next_tick_at = now + timedelta(seconds=self.settings.reconcile.interval_s)

    def _lay_out_taken_over(self, taken: TickReport) -> None:
        """The fleet taken over was laid out for the plan that sized it: its nodes carry the
        layouts that plan needs (node actions of an idle fleet, done at once)."""
        limits = self.config.node_configs
        if limits is None or taken.placement is None:
            return
        observed = self.cluster.snapshot()
        idle = replace(observed, nodes=tuple(replace(n, gpu_pods=0, whole_gpus_in_use=0)
                                            for n in observed.nodes))
        nodes = node_config_plan(taken.placement, idle, self.config.pools, {}, GuardMemory(),
                                 replace(limits, one_per_pool=False), self.clock.now())
        for action in nodes.actions:
            if isinstance(action, RelayoutMig):
                self.cluster.lay_out_now(action.node, action.to_layout)
            else:
                self.cluster.apply_sharing(action.node, action.to_layout)
        self.cluster.adopt()  # the replicas those layouts hold were serving too

    @property
    def specs(self) -> tuple[ModelSpec, ...]:
        """The models in use: the models table's, as the last tick read it."""
        return self.models.specs

    def reload_models(self) -> None:
        """The models table's changes since the last tick, through ``serve``'s reload (a set
        its checks refuse is logged and the models in use stay): the loop sizes, and the
        simulated fleet runs, the models the table lists now."""
        with self.lock:
            change = self.models.reload_if_changed()
            if change is None or change.refused or not change.any:
                return
            self.config = change.in_use.config
            self.cluster.set_models(change.in_use.specs)

    def tick(self) -> TickReport:
        """One recorded tick, on the models table as it is now; a tick whose record could not
        be saved still counts (see ``controlplane.recorded_tick``)."""
        with self.lock:
            self.reload_models()
            run = run_tick(self.deps, self.config)
            self.ticks += 1
            if run.report.plan is not None and run.report.placement is not None:
                self.placements += len(run.report.placement.segments)
        if self.on_tick is not None:
            self.on_tick(run.report, run.saved)
        return run.report

    def refresh_forecasts(self) -> list[Forecast]:
        """Stored under the fencing token of the store lease's term (a term that ended
        meanwhile stores nothing)."""
        with self.lock:
            now = self.clock.now()
            made = refresh_forecasts(self.store, self.store, now, self.settings,
                                     fence=self.decisions.fence_token(now))
            self.forecasts += len(made)
            return made

    def prune(self) -> Pruned | None:
        with self.lock:
            return prune_store(self.store, self.clock.now(), self.settings)

    def advance(self, seconds: float, run_jobs: bool = True) -> None:
        """Move virtual time forward in sim steps; run due forecast and reconcile jobs if asked."""
        if run_jobs:
            self.start()
        step_s = self.settings.sim.step_s
        remaining_s = seconds
        while remaining_s > 1e-9:
            dt_s = min(step_s, remaining_s)
            remaining_s -= dt_s
            with self.lock:
                now = self.clock.advance(dt_s)
                self.cluster.step(now)
                self._account(dt_s)
            if run_jobs:
                self.run_due_jobs(now)

    def follow_wall(self, wall_now: datetime) -> None:
        """Bring virtual time up to ``wall_now`` when it is behind (never back): ``serve``'s
        simulated fleet runs in real time, so a store resumed after a stop, a start floored to
        the minute or a slow tick that held the lock past an advance does not leave its ticks
        stamped behind the wall clock (``headroom status`` would call a running loop stale)."""
        behind_s = (wall_now - self.clock.now()).total_seconds()
        if behind_s > 0:
            self.advance(behind_s, run_jobs=False)

    def run_due_jobs(self, now: datetime) -> None:
        if not self.leads():  # the fleet's lease lapsed: nothing is written until it is back
            return
        if now >= self._next_forecast_at:
            self.refresh_forecasts()
            self._next_forecast_at = now + timedelta(seconds=self.settings.forecast.interval_s)
        if now >= self._next_tick_at:
            self.tick()
            self._next_tick_at = now + timedelta(seconds=self.settings.reconcile.interval_s)
        if now >= self._next_prune_at:
            self.prune()
            self._next_prune_at = now + timedelta(seconds=self.settings.db.prune_interval_s)

    def _account(self, dt_s: float) -> None:
        gpu_share = {s.name: s.best_point().replica_gpu_share for s in self.specs}
        for model in self.cluster.snapshot().models:
            self.tally.demand_rs += model.demand_rps * dt_s
            self.tally.served_rs += min(model.demand_rps, model.capacity_rps) * dt_s
            self.tally.model_s += dt_s
            mine = self.tally.models.setdefault(model.name, ModelTally())
            mine.model_s += dt_s
            mine.gpu_s += (model.replicas_ready + model.replicas_pending) * dt_s * \
                gpu_share[model.name]
            if model.capacity_rps < model.demand_rps:
                self.tally.short_model_s += dt_s
                mine.short_s += dt_s
