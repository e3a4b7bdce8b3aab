"""The replay engine: one policy over one trace on the simulated fleet, minute by minute.

Every ``tick_s`` the engine moves the fleet's clock, refreshes forecasts when due (through
``forecaster.api.forecast``, from data before now only), asks the pure core for a decision and
applies it: node pools and replicas through the same ports the reconcile loop uses, then the idle
rung. Each minute yields one row per model for the timeline.

``ready_replicas`` of a minute counts the replicas that served during the *whole* minute: the
fewest ready at its start or right after any of its ticks (between ticks replicas only become
ready). A replica that wakes a few seconds into a minute does not count for that minute.
``gpus_billed`` is the fleet's GPUs (all node pools, warm capacity and nodes still provisioning
included), time-averaged over the minute. ``per_replica_rps`` is what a replica really serves
(the models file's ``true_per_replica_rps``, else its profile); the policies size with the
profile, the predictive one corrected online with ``SimOptions.profile_correction``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from controlplane.autoscaling.calibration import ForecastErrors, calibrated, recent_volatility
from controlplane.autoscaling.core import Budgets, FleetModel, TickDecision, decide_sized, size
from controlplane.autoscaling.hint_capacity import CappedTicks, hints_capped
from controlplane.autoscaling.hints import hinted_inputs
from controlplane.autoscaling.policies import ScalingPolicy, ladder_rungs
from controlplane.autoscaling.profile_correction import CorrectionConfig, corrected_models, in_use
from controlplane.domain.actions import ScaleNodePool, SetReplicas
from controlplane.domain.demand import (
    CALIBRATION_GRID,
    PREDICTIVE,
    calibrated_ratio,
    one_request_rps,
)
from controlplane.domain.desired import PoolSpec
from controlplane.domain.guards import GuardMemory
from controlplane.domain.hints import DemandHint
from controlplane.domain.models import ColdStart, Engine, ModelSpec, ProfilePoint
from controlplane.domain.profile import ProfileSample
from controlplane.sim.latency import queue_latency_ms
from controlplane.simulation.fleet import SimFleet
from controlplane.simulation.replay import DemandReplay
from controlplane.simulation.sim_config import SimConfig, SimModel
from forecaster.api import forecast
from forecaster.types import Forecast

#: Method name of the benchmark-only perfect-foresight forecasts (``SimOptions.oracle_forecast``).
ORACLE = "oracle_perfect_foresight"


@dataclass(frozen=True, slots=True)
class SimOptions:
    tick_s: float = 30.0
    forecast_interval_s: float = 300.0
    forecast_horizon_s: int = 1200
    forecast_history_s: int = 7 * 86400
    forecast_method: str = "auto"
    seed: int = 1
    observe_window_s: float = 30.0  # the fleet's load metric: rate over the last this many s
    #: BENCHMARK ONLY, never a default: forecasts are the trace's own future (p50 = p90 = the
    #: true rate of every coming minute). Measures the floor that node granularity, whole
    #: replicas and cold starts leave for a policy that knows the future exactly.
    oracle_forecast: bool = False
    #: the predictive policy corrects each model's per-replica throughput online from per-tick
    #: samples, as the live loop does (``--profile-correction``); None: the offline profile
    profile_correction: CorrectionConfig | None = None
    #: demand announced ahead (``--hints``): floors on the predictive policy's forecasts, each
    #: from ``hint_lead_s`` before its start, as the live loop applies them
    hints: tuple[DemandHint, ...] = ()
    hint_lead_s: float = 600.0

    def __post_init__(self) -> None:
        ticks_per_minute = 60 / self.tick_s if math.isfinite(self.tick_s) and self.tick_s > 0 else 0
        if ticks_per_minute < 1 or abs(ticks_per_minute - round(ticks_per_minute)) > 1e-9 * (
                ticks_per_minute):  # 60 / 0.1 is 600 ticks; float 60 % 0.1 is not 0
            raise ValueError(f"--tick-s must divide a minute into whole ticks (60 / tick_s a whole "
                             f"number: 60, 30, 15, 1, 0.5, 0.1, ...), got {self.tick_s}")
        if not self.forecast_interval_s >= 60:  # NaN too
            raise ValueError(f"--forecast-interval-s must be >= 60, got {self.forecast_interval_s}")
        if not 0 < self.observe_window_s <= 600:
            raise ValueError("observe_window_s must be in (0, 600]")


@dataclass(frozen=True, slots=True)
class MinuteRow:
    minute_at: datetime
    model: str
    demand_rps: float
    ready_replicas: int
    idle_replicas: int
    per_replica_rps: float
    gpu_per_replica: float
    gpus_billed: float
    #: the model's GPU product, and the GPUs its node pool billed in the minute (warm pool and
    #: provisioning nodes included): ``gpus_billed`` is their sum over the fleet's products
    gpu_product: str
    product_gpus_billed: float


@dataclass(slots=True)
class RunStats:
    ticks: int = 0
    actions: int = 0
    forecasts: int = 0
    forecast_methods: Counter[str] = field(default_factory=Counter)
    #: forecasts by the forecaster's fallback reason (``short_history``, ...), those that fell back
    forecast_fallbacks: Counter[str] = field(default_factory=Counter)
    #: forecasts issued without a calibrated upper tail (fewer than ``MIN_ERRORS`` errors scored,
    #: or an unmeasured volatility): their high quantiles come from the forecast's own p90 shape
    uncalibrated_forecasts: int = 0
    demand_reasons: Counter[str] = field(default_factory=Counter)
    skipped_reasons: Counter[str] = field(default_factory=Counter)
    gpu_hours_by_product: dict[str, float] = field(default_factory=dict)
    #: with profile correction: the per-replica throughput each model is sized with at the end
    profile_rps: dict[str, float] = field(default_factory=dict)
    #: with profile correction: the lowest and highest value each model was sized with, and in
    #: how many ticks it was sized with a value other than its offline profile
    profile_rps_range: dict[str, tuple[float, float]] = field(default_factory=dict)
    profile_corrected_ticks: Counter[str] = field(default_factory=Counter)
    #: the predictive policy's ticks at which a GPU budget or the pool kept a model below the
    #: demand hint in force, by model
    hints_capped: defaultdict[str, CappedTicks] = field(
        default_factory=lambda: defaultdict(CappedTicks))


@dataclass(frozen=True, slots=True)
class PolicyRun:
    policy: str
    rows: tuple[MinuteRow, ...]
    stats: RunStats
    seed: int


def pool_specs(config: SimConfig) -> tuple[PoolSpec, ...]:
    products = sorted({m.shape.product for m in config.models})
    shapes = {p: config.fleet.pool(p) for p in products}
    return tuple(PoolSpec(s.name, p, s.gpus_per_node, s.min_nodes, s.max_nodes,
                          config.fleet.prices[p]) for p, s in shapes.items())


def fleet_models(config: SimConfig) -> tuple[FleetModel, ...]:
    out = []
    for m in config.models:
        shape = m.shape
        price = config.fleet.prices[shape.product] * shape.gpu_share
        cold_p90_s = (config.fleet.node_provision.quantile(0.9)
                      + m.cold_start.uncached.quantile(0.9))
        rungs = ladder_rungs(price, shape.idle_gpu_fraction, config.fleet.idle_wake_s,
                             m.cold_start.cached.quantile(0.9), cold_p90_s)
        out.append(FleetModel(_spec(m), shape, rungs, price))
    return tuple(out)


def cold_wake_s(config: SimConfig) -> float:
    """Time a new node needs to serve: provisioning p90 + the slowest model's uncached load p90."""
    return config.fleet.node_provision.quantile(0.9) + max(
        m.cold_start.uncached.quantile(0.9) for m in config.models)


def _spec(model: SimModel) -> ModelSpec:
    shape = model.shape
    slices = round(shape.gpu_share * 7) if abs(shape.gpu_share * 7 - round(
        shape.gpu_share * 7)) < 1e-3 and shape.gpu_share < 1 else 0
    point = ProfilePoint(shape.product, slices, 1, 1, shape.per_replica_rps, 0.0, 0,
                         shape.whole_gpus)
    cold = model.cold_start.uncached
    return ModelSpec(shape.model, shape.tenant, model.isolation, Engine.VLLM,
                     model.latency_slo_ms, (point,),
                     ColdStart(cold.quantile(0.5), cold.quantile(0.9)),
                     model.min_replicas, model.max_replicas)


class ForecastCache:
    """Forecasts per (model, minute) of one replay and options. They depend only on the trace
    (and the calibration only on earlier forecasts and the trace), so every policy and seed
    replays the same ones: the first run computes them, the others reuse them."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, int], Forecast] = {}

    def get(self, model: str, minute: int) -> Forecast | None:
        return self._made.get((model, minute))

    def put(self, model: str, minute: int, made: Forecast) -> None:
        self._made[(model, minute)] = made


class _Run:
    def __init__(self, replay: DemandReplay, config: SimConfig, policy: ScalingPolicy,
                 options: SimOptions, cache: ForecastCache | None = None) -> None:
        self.cache = cache if cache is not None else ForecastCache()
        self.replay, self.config, self.policy, self.options = replay, config, policy, options
        self.start_at = replay.trace.start_at
        self.pools = pool_specs(config)
        self.models = fleet_models(config)
        self.budgets = Budgets(tuple(sorted(config.fleet.tenant_gpu_budgets.items())),
                               config.fleet.cluster_gpu_budget)
        self.fleet = SimFleet(config, self.pools, replay.observed_rps, self.start_at,
                              options.seed)
        self.memory = GuardMemory()
        self.forecasts: dict[str, Forecast] = {}
        self.pending: dict[str, list[tuple[int, int, float, float]]] = {
            m.spec.name: [] for m in self.models}
        self.stats = RunStats()
        self.correction = (options.profile_correction if policy.name == PREDICTIVE
                           else None)  # reactive and static size with the offline profile
        self.samples: dict[str, list[ProfileSample]] = {m.spec.name: [] for m in self.models}
        self.forecast_step_s = max(60, replay.trace.step_s // 60 * 60)
        self.errors: dict[str, ForecastErrors] = {
            m.spec.name: ForecastErrors(min_p50_rps=one_request_rps(self.forecast_step_s))
            for m in self.models}

    def at(self, t_s: float) -> datetime:
        return self.start_at + timedelta(seconds=t_s)

    def refresh_forecasts(self, t_s: float) -> None:
        """Score earlier forecasts whose first step is now observed, then forecast again from
        the minutes before now and attach the calibrated upper tail."""
        minute = int(t_s // 60)
        for m in self.models:
            name = m.spec.name
            known = self.cache.get(name, minute)
            if known is not None:
                self.forecasts[name] = known
                self.count(known)
                continue
            self.score_pending(name, minute)
            series = self.replay.history(name, minute, self.forecast_step_s,
                                         self.options.forecast_history_s)
            if series is None:
                continue
            made = (self.oracle(name, minute) if self.options.oracle_forecast
                    else forecast(series, self.options.forecast_horizon_s,
                                  self.options.forecast_method))
            sigma = recent_volatility(series)
            self.forecasts[name] = calibrated(made, self.errors[name], sigma)
            self.cache.put(name, minute, self.forecasts[name])
            first = round((made.origin_at - self.start_at).total_seconds() / 60)
            if made.p50:
                self.pending[name].append((first, first + made.step_s // 60, made.p50[0], sigma))
            self.count(self.forecasts[name])

    def count(self, issued: Forecast) -> None:
        """One forecast issued: its method, its fallback reason, whether its tail is calibrated."""
        self.stats.forecasts += 1
        self.stats.forecast_methods[issued.method] += 1
        if issued.fallback_reason:
            self.stats.forecast_fallbacks[issued.fallback_reason] += 1
        if calibrated_ratio(issued.diagnostics, CALIBRATION_GRID[-1]) is None:
            self.stats.uncalibrated_forecasts += 1

    def oracle(self, name: str, minute: int) -> Forecast:
        """Benchmark only: the true rate of each minute of the horizon (perfect foresight)."""
        steps = range(minute, minute + max(1, self.options.forecast_horizon_s // 60))
        future = tuple(self.replay.rate(name, m) for m in steps)
        return Forecast(name, self.at(minute * 60.0), 60, future, future, ORACLE)

    def score_pending(self, name: str, minute: int) -> None:
        keep = []
        for first, end, p50, sigma in self.pending[name]:
            if end <= minute:
                actual = self.replay.mean_rate(name, first, end)
                self.errors[name] = self.errors[name].observe(p50, actual, sigma)
            else:
                keep.append((first, end, p50, sigma))
        self.pending[name] = keep

    def sample(self, t_s: float, window_s: float) -> None:
        """Each model's evidence of this tick: observed demand per ready replica and the mean
        latency the latency model gives at it (none with no replica ready); samples older than
        ``window_s`` are dropped."""
        now_at, since_at = self.at(t_s), self.at(t_s - window_s)
        for name, kept in self.samples.items():
            model = self.config.model(name)
            ready = self.fleet.ready_replicas(name)
            demand_rps = self.replay.observed_rps(name, t_s)
            latency_ms = queue_latency_ms(model.latency_ms, model.latency_slo_ms,
                                          model.true_per_replica_rps, demand_rps, ready)
            if latency_ms is not None:
                kept.append(ProfileSample(now_at, demand_rps / ready, latency_ms))
            while kept and kept[0].at <= since_at:
                kept.pop(0)

    def decide(self, t_s: float) -> TickDecision:
        models = self.models
        if self.correction is not None:
            self.sample(t_s, self.correction.window_s)
            models, profiles = corrected_models(self.models, self.samples,
                                                dict(self.memory.profile_rps), self.at(t_s),
                                                self.correction)
        now = self.at(t_s)
        hinted = hinted_inputs(self.forecasts, self.options.hints, now,
                               self.options.hint_lead_s, self.policy.demand.lookahead_s)
        observed = self.fleet.snapshot()
        sizing = size(observed, hinted.forecasts, models, self.policy, self.budgets, now,
                      self.pools, hinted.floors, unhinted=hinted.calibrated)
        # the reasons say which demands a hint raised, and a hint the fleet's capacity capped
        sizing, capped = hints_capped(sizing, hinted, models, self.policy.demand)
        decision = decide_sized(observed, sizing, models, self.pools, self.policy, self.budgets,
                                self.memory, now)
        for cap in capped:
            self.stats.hints_capped[cap.model] = self.stats.hints_capped[cap.model].add(cap)
        self.memory = decision.memory
        if self.correction is not None:
            self.memory = replace(self.memory, profile_rps=in_use(profiles))
            self.stats.profile_rps = {p.model: p.corrected_rps for p in profiles}
            for p in profiles:
                low, high = self.stats.profile_rps_range.get(p.model, (p.corrected_rps,) * 2)
                self.stats.profile_rps_range[p.model] = (min(low, p.corrected_rps),
                                                         max(high, p.corrected_rps))
                self.stats.profile_corrected_ticks[p.model] += p.is_corrected
        self.stats.ticks += 1
        self.stats.demand_reasons.update(d.reason for d in decision.demands)
        self.stats.skipped_reasons.update(s.reason for s in decision.plan.skipped)
        return decision

    def apply(self, decision: TickDecision) -> None:
        for action in decision.plan.actions:
            if isinstance(action, ScaleNodePool):
                outcome = self.fleet.set_size(action.pool, action.to_nodes)
            elif isinstance(action, SetReplicas):
                outcome = self.fleet.set_replicas(action.model, action.to_replicas)
            else:  # the replay's fleet has no node layouts, and its core plans no node changes
                raise RuntimeError(f"simulate cannot apply {action.render()}")
            if not outcome.ok:
                raise RuntimeError(f"simulated fleet refused {action.render()}: {outcome.message}")
            self.stats.actions += 1
        if self.policy.ladder is not None:
            for model, idle in decision.idle_targets().items():
                self.fleet.set_idle_replicas(model, idle)

    def start(self) -> None:
        """The fleet starts as the policy wants it for the first minute, ready and cached."""
        first = self.decide(0.0)
        self.fleet.materialize({t.target: t.value for t in first.desired.pools},
                               {t.target: t.value for t in first.desired.replicas})
        if self.policy.ladder is not None:
            for model, idle in first.idle_targets().items():
                self.fleet.set_idle_replicas(model, idle)


def run_policy(replay: DemandReplay, config: SimConfig, policy: ScalingPolicy,
               options: SimOptions, on_minute: Callable[[int], None] | None = None,
               cache: ForecastCache | None = None) -> PolicyRun:
    """Replay the whole trace under ``policy``; ``cache`` shares forecasts between runs."""
    run = _Run(replay, config, policy, options, cache)
    run.start()
    names = [m.spec.name for m in run.models]
    shapes = {m.spec.name: m.shape for m in run.models}
    true_rps = {m.name: m.true_per_replica_rps for m in config.models}  # what replicas serve
    ticks_per_minute = round(60 / options.tick_s)
    next_forecast_s = 60.0
    rows: list[MinuteRow] = []
    for minute in range(replay.trace.minutes):
        gpu_s = 0.0
        product_gpu_s = dict.fromkeys((pool.product for pool in run.pools), 0.0)
        fewest = dict.fromkeys(names, math.inf)
        for k in range(ticks_per_minute):
            t_s = minute * 60 + k * options.tick_s
            run.fleet.advance(t_s)
            for name in names:
                fewest[name] = min(fewest[name], run.fleet.ready_replicas(name))
            if t_s >= next_forecast_s:
                run.refresh_forecasts(t_s)
                next_forecast_s += options.forecast_interval_s
            run.apply(run.decide(t_s))
            for name in names:
                fewest[name] = min(fewest[name], run.fleet.ready_replicas(name))
            gpu_s += run.fleet.billed_gpus() * options.tick_s
            for pool in run.pools:
                pool_gpu_s = run.fleet.billed_gpus(pool.name) * options.tick_s
                product_gpu_s[pool.product] += pool_gpu_s
                hours = run.stats.gpu_hours_by_product
                hours[pool.product] = hours.get(pool.product, 0.0) + pool_gpu_s / 3600
        minute_at = replay.trace.minute_at(minute)
        for name in names:
            product = shapes[name].product
            rows.append(MinuteRow(minute_at, name, replay.rate(name, minute), int(fewest[name]),
                                  run.fleet.idle_replicas(name), true_rps[name],
                                  shapes[name].gpu_share, gpu_s / 60, product,
                                  product_gpu_s[product] / 60))
        if on_minute is not None:
            on_minute(minute)
    return PolicyRun(policy.name, tuple(rows), run.stats, options.seed)
