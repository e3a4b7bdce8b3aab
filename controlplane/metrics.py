"""Prometheus metrics of the reconcile loop (prometheus-client), from each tick's report.

``headroom serve`` and ``headroom demo`` record every ``TickReport`` here, on the registry that
already serves the placement API's metrics (``placement.metrics_listen``), so one ``/metrics``
shows both: ticks by status and their wall time, ticks whose record could not be saved, the
actions planned by kind and those held back by a guard, applied actions that failed, Deployment
scale-downs by how their replicas were chosen, and, as of the last tick that observed the fleet,
each model's load, capacity and provisioned demand, the forecast it was sized from (over the
loop's lookahead: ``MODEL_RPS_HELP``) and where each model's demand came from (a counter by
reason: the forecast, the fast path above it, or a stale / missing forecast), whether its load
could be measured, the requests waiting in its queues and its KV cache usage, how its forecasts
did over the last hour (WAPE of p50, p90 coverage: what to alert on), its profile's throughput
(offline and corrected), each model's replicas (ready as observed; the replica target the last
deciding tick wanted and the replicas its warm-pool ladder keeps warm beside them), whether a
pause holds it and since when, its replica bounds where its spec sets them, and each pool's nodes
(ready, pending, target) and what its billed nodes cost per hour at the configured GPU price.
Those per-model and per-pool gauges are the leader's only: a replica that follows exports none
(``forget_fleet``), a model or pool a tick no longer sees loses its samples, and
``headroom_leader`` says which replica leads (1) and which follow (0). Against Kubernetes, the
leader's loading guard (``metrics_loading_guard``) adds the model pods it holds from voluntary
disruption while they load, and what it guarded and released, by reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controlplane.adapters.clock import WallClock
from controlplane.domain.actions import STEERING
from controlplane.domain.cost import FleetSnapshot, GpuPrice, PriceTable, billed_rate
from controlplane.domain.demand import Demand
from controlplane.domain.desired import PoolSpec
from controlplane.domain.model_replicas import ModelReplicas
from controlplane.domain.observed import ObservedPool
from controlplane.domain.pause import paused_since_wall_s
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.metrics_loading_guard import LoadingGuardMetrics
from controlplane.ports import Clock

#: A tick is a few milliseconds on the simulator, seconds against a large cluster.
TICK_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: ``headroom_model_rps`` kinds read from the observed fleet, and from each tick's demands
OBSERVED_KINDS = ("observed", "finished", "capacity")
DEMAND_KINDS = ("provisioned", "forecast_p90", "forecast_upper")
#: What each kind of ``headroom_model_rps`` is, and over which horizon its forecast kinds are
#: read: the loop's lookahead (what sizing reads), not ``headroom status``'s step 20 min ahead.
MODEL_RPS_HELP = (
    "Requests/s per model by kind: observed = the load the last observing tick saw (the "
    "requests that arrived: those that finished plus how fast those its replicas hold grew); "
    "finished = the requests its replicas finished then (below observed while a queue grows, "
    "above it while one drains); capacity = "
    "what its ready replicas serve; provisioned = the capacity the last deciding tick sized for "
    "(demand / target utilization); forecast_p90 = the highest p90 of the forecast that tick "
    "sized from (calibrated, demand hints' floors applied) over the steps from the tick to the "
    "loop's lookahead ahead (autoscaling.reaction_s + autoscaling.cached_start_p90_s), not the "
    "p90 of the step 20 minutes ahead that headroom status shows; forecast_upper = the upper "
    "quantile that tick covered over the same lookahead (the next forecast step's when "
    "hot_headroom raised it). The forecast kinds only under the predictive policy, while the "
    "forecast is fresh.")
PROFILE_SOURCES = ("offline", "corrected")
POOL_STATES = ("ready", "pending", "target")
#: ``headroom_model_replicas`` kinds read from the observed fleet, and from each deciding tick
OBSERVED_REPLICAS = ("ready", "unscheduled")
DECIDED_REPLICAS = ("target", "warm")
BOUNDS = ("min", "max")


class ControlPlaneMetrics:
    """Reconcile-loop metrics on ``registry``; ``record`` takes one tick's report. ``pools``:
    the configured node pools, whose GPU prices cost the billed nodes (none: no cost gauge).
    ``wall_clock``: the clock the pauses' starts are exported on (the wall clock's, even where
    the loop runs on a simulated one)."""

    def __init__(self, registry: CollectorRegistry, pools: Sequence[PoolSpec] = (),
                 wall_clock: Clock | None = None) -> None:
        self._wall_clock = wall_clock if wall_clock is not None else WallClock()
        self.ticks = Counter("headroom_reconcile_ticks", "Reconcile ticks by status.",
                             ["status"], registry=registry)
        self.tick_seconds = Histogram("headroom_reconcile_tick_seconds",
                                      "Wall time of one reconcile tick.", buckets=TICK_BUCKETS_S,
                                      registry=registry)
        self.actions = Counter("headroom_plan_actions", "Actions planned, by kind.", ["kind"],
                               registry=registry)
        self.held = Counter("headroom_plan_actions_held", "Changes a guard held back, by reason.",
                            ["reason"], registry=registry)
        self.failures = Counter("headroom_action_failures", "Applied actions that failed, by "
                                "whether a retry may help.", ["retryable"], registry=registry)
        self.steering = Counter("headroom_scale_down_steering", "Deployment scale-downs applied, "
                                "by how their replicas were chosen: steered (pod-deletion-costs "
                                "written so those on the emptiest nodes go), ranked (the costs "
                                "already did), unsteered (the pods could not be read or "
                                "annotated: the ReplicaSet chose).", ["result"],
                                registry=registry)
        self.model_rps = Gauge("headroom_model_rps", MODEL_RPS_HELP, ["model", "kind"],
                               registry=registry)
        self.unsaved = Counter("headroom_reconcile_unsaved_ticks", "Ticks that acted but whose "
                               "record could not be saved (kept in process, saved again before "
                               "the next one).", registry=registry)
        self.demand_ticks = Counter("headroom_model_demand", "Deciding ticks per model by where "
                                    "its demand came from (the forecast: forecast_p90, "
                                    "forecast_upper_quantile; hot_headroom; "
                                    "observed_above_forecast: the fast path; observed_load: "
                                    "reactive; static_peak: static; stale_forecast, "
                                    "future_forecast, no_forecast, no_static_peak, "
                                    "demand_unmeasured: not fresh, so no scale-down; "
                                    "+demand_hint: a demand hint raised it).",
                                    ["model", "reason"],
                                    registry=registry)
        self.forecast_wape = Gauge("headroom_forecast_wape_ratio", "Per model, over the forecast "
                                   "steps scored in the last hour (each forecast's first step "
                                   "against the mean load observed over it): sum |observed - "
                                   "p50| / sum observed.", ["model"], registry=registry)
        self.forecast_coverage = Gauge("headroom_forecast_p90_coverage_ratio", "Per model, the "
                                       "share of those steps observed at or below p90 (~0.9 "
                                       "when the calibrated tail holds).", ["model"],
                                       registry=registry)
        self.load_unmeasured = Gauge("headroom_model_load_unmeasured", "1 when the last "
                                     "observing tick could not measure the model's load (its "
                                     "metrics source failed or had no series: no observed "
                                     "rps sample, sizing holds its capacity), else 0.",
                                     ["model"], registry=registry)
        self.queued = Gauge("headroom_model_queued_requests", "Requests waiting in the "
                            "model's replicas' queues as of the last observing tick (Triton's "
                            "pending, vLLM's waiting; summed over its replicas); no sample "
                            "when not measured.", ["model"], registry=registry)
        self.kv_cache = Gauge("headroom_model_kv_cache_usage", "KV cache usage (0-1) of the "
                              "model's replicas as of the last observing tick (vLLM's "
                              "kv_cache_usage_perc or SGLang's token_usage, their mean); no "
                              "sample when not measured.",
                              ["model"], registry=registry)
        self.latency = Gauge("headroom_model_latency_ms", "Request latency of the model as of "
                             "the last observing tick (the mean, prometheus.latency_quantile's "
                             "quantile, or time to first token with prometheus.latency: ttft); "
                             "no sample when not measured.", ["model"], registry=registry)
        self.latency_slo = Gauge("headroom_model_latency_slo_ms", "The model's latency SLO "
                                 "(the models file's latency_slo_ms), as of the last deciding "
                                 "tick.", ["model"], registry=registry)
        self.pool_nodes = Gauge("headroom_pool_nodes", "Nodes per pool as of the last observing "
                                "tick.", ["pool", "state"], registry=registry)
        self.profile_rps = Gauge("headroom_profile_throughput_rps", "Throughput per replica at "
                                 "the latency SLO as of the last deciding tick: the offline "
                                 "profile and the one corrected from observed metrics (what "
                                 "the loop sized with).", ["model", "source"], registry=registry)
        self.model_replicas = Gauge("headroom_model_replicas", "Replicas per model: ready, and "
                                    "unscheduled (pods no node has bound; where the fleet "
                                    "reports them), as "
                                    "of the last observing tick; the replica target the last "
                                    "deciding tick wanted (before the guards pace the way "
                                    "there) and the replicas its warm-pool ladder keeps warm "
                                    "beyond it (idle and cached rungs).", ["model", "kind"],
                                    registry=registry)
        self.model_paused = Gauge("headroom_model_paused", "1 while a pause holds the model's "
                                  "replicas (headroom models pause), else 0, as of the last "
                                  "deciding tick.", ["model"], registry=registry)
        self.model_paused_since = Gauge("headroom_model_paused_since_timestamp_seconds",
                                        "When the pause that holds the model began (Unix "
                                        "seconds on this process's wall clock: now less the "
                                        "pause's age on the store's clock, which a simulated "
                                        "fleet runs on its own); no sample while it is not "
                                        "paused.",
                                        ["model"], registry=registry)
        self.fleet_paused_since = Gauge("headroom_fleet_paused_since_timestamp_seconds",
                                        "When the fleet's pause (headroom fleet pause: ticks "
                                        "plan a dry run and change nothing) began, Unix "
                                        "seconds as the model pause's, by who paused it (\"\" "
                                        "unknown); no sample while the last deciding tick "
                                        "found the fleet not paused.", ["paused_by"],
                                        registry=registry)
        self.replica_bounds = Gauge("headroom_model_replica_bounds", "The model's min_replicas "
                                    "/ max_replicas (bound min / max) where its spec sets them.",
                                    ["model", "bound"], registry=registry)
        # every status and retryable value exists at 0 from the start: increase() over a series'
        # first sample counts nothing, so a first failed action or tick would never alert
        for status in TickStatus:
            self.ticks.labels(status.value)
        for retryable in ("true", "false"):
            self.failures.labels(retryable)
        for result in STEERING:
            self.steering.labels(result)
        self.pool_cost = Gauge("headroom_fleet_cost_usd_per_hour", "Per pool as of the last "
                               "observing tick: the GPUs its billed nodes (ready and "
                               "provisioning) report x its configured price per GPU-hour.",
                               ["pool"],
                               registry=registry)
        self._pools = {p.name: p for p in pools}
        self._prices = PriceTable(tuple(GpuPrice(p.product, p.price_per_gpu_hour,
                                                 f"settings pools[{p.name}]", "")
                                        for p in pools))
        #: the models / pools each group of gauges has a sample for (what a tick that no
        #: longer sees one removes, rather than leave its last value standing)
        self._seen: dict[str, set[str]] = {"observed": set(), "demand": set(), "replicas": set(),
                                           "profile": set(), "accuracy": set(), "pool": set()}
        self.loading_guard = LoadingGuardMetrics(registry)
        self.leader = Gauge("headroom_leader", "1 while this replica leads the reconcile loop "
                            "(its per-model and per-pool gauges are the fleet's), 0 while it "
                            "follows (it exports none of them).", registry=registry)

    def record(self, report: TickReport, saved: bool = True) -> None:
        """Count one tick (``saved`` False: its record could not be saved); refresh the
        per-model and per-pool gauges when it observed the fleet. Only a leader ticks."""
        self.leader.set(1)
        self.ticks.labels(report.status.value).inc()
        if not saved:
            self.unsaved.inc()
        self.tick_seconds.observe(tick_seconds(report))
        if report.plan is not None:
            for action in report.plan.actions:
                self.actions.labels(action.kind).inc()
            for held in report.plan.skipped:
                # a reason's detail (after ':', e.g. the node a pool waits for) is no label
                self.held.labels(held.reason.partition(":")[0]).inc()
        for outcome in report.outcomes:
            if not outcome.ok:
                self.failures.labels(str(outcome.retryable).lower()).inc()
            if outcome.steering:
                self.steering.labels(outcome.steering).inc()
        if not report.observed.synced:
            return
        if report.plan is not None:  # a deciding tick: it read the fleet's pause
            self._fleet_pause(report)
        observed = {model.name for model in report.observed.models}
        self._forget("observed", observed, (self.model_rps, OBSERVED_KINDS),
                     (self.model_replicas, OBSERVED_REPLICAS), (self.load_unmeasured, ()),
                     (self.queued, ()), (self.kv_cache, ()), (self.latency, ()))
        for model in report.observed.models:
            self.model_replicas.labels(model.name, "ready").set(model.replicas_ready)
            if model.replicas_unscheduled is not None:
                self.model_replicas.labels(model.name, "unscheduled").set(
                    model.replicas_unscheduled)
            else:  # not read: no sample, rather than a 0
                with suppress(KeyError):
                    self.model_replicas.remove(model.name, "unscheduled")
            self.load_unmeasured.labels(model.name).set(0 if model.demand_measured else 1)
            for kind, rps in (("observed", model.arrivals_rps), ("finished", model.demand_rps)):
                if model.demand_measured:
                    self.model_rps.labels(model.name, kind).set(rps)
                else:  # unknown this tick: no sample, rather than a 0 or the last value
                    with suppress(KeyError):
                        self.model_rps.remove(model.name, kind)
            self.model_rps.labels(model.name, "capacity").set(model.capacity_rps)
            for gauge, value in ((self.queued, model.queued_requests),
                                 (self.kv_cache, model.kv_cache_usage),
                                 (self.latency, model.latency_ms)):
                if value is not None:
                    gauge.labels(model.name).set(value)
                else:
                    with suppress(KeyError):
                        gauge.remove(model.name)
        if report.plan is not None:  # a deciding tick: the models it sized are all there are
            self._forget("demand", {d.model for d in report.demands},
                         (self.model_rps, DEMAND_KINDS))
            self._forget("profile", {p.model for p in report.profiles},
                         (self.profile_rps, PROFILE_SOURCES))
            self._forget("replicas", {r.model for r in report.replicas},
                         (self.model_replicas, DECIDED_REPLICAS), (self.model_paused, ()),
                         (self.model_paused_since, ()), (self.replica_bounds, BOUNDS),
                         (self.latency_slo, ()))
        for replicas in report.replicas:
            self._replicas(replicas, report)
        for demand in report.demands:
            self._seen["demand"].add(demand.model)
            self.model_rps.labels(demand.model, "provisioned").set(demand.rate_rps)
            self.demand_ticks.labels(demand.model, demand.reason).inc()
            self._forecast_rps(demand)
        self._accuracy(report)
        for profile in report.profiles:
            self._seen["profile"].add(profile.model)
            self.profile_rps.labels(profile.model, "offline").set(profile.offline_rps)
            self.profile_rps.labels(profile.model, "corrected").set(profile.corrected_rps)
        self._forget("pool", {pool.name for pool in report.observed.pools},
                     (self.pool_nodes, POOL_STATES), (self.pool_cost, ()))
        for pool in report.observed.pools:
            for state, nodes in zip(POOL_STATES, (pool.nodes_ready, pool.nodes_pending,
                                                  pool.target_nodes), strict=True):
                self.pool_nodes.labels(pool.name, state).set(nodes)
            self._cost(pool, report)

    def _fleet_pause(self, report: TickReport) -> None:
        self.fleet_paused_since.clear()
        pause = report.fleet_pause
        if pause is not None:
            self.fleet_paused_since.labels(pause.paused_by).set(paused_since_wall_s(
                pause.paused_at, report.finished_at, self._wall_clock.now()))

    def _forget(self, group: str, now: set[str], *gauges: tuple[Gauge, tuple[str, ...]]
                ) -> None:
        """Remove each gauge's samples (one per kind; kinds ``()``: its one sample per name) of
        the models / pools of ``group`` that a tick no longer sees (a model whose workloads are
        gone, a pool no longer configured): no sample, rather than its last value frozen
        forever; ``now`` is what it sees."""
        for name in self._seen[group] - now:
            for gauge, kinds in gauges:
                for labels in [(name, kind) for kind in kinds] if kinds else [(name,)]:
                    with suppress(KeyError):
                        gauge.remove(*labels)
        self._seen[group] = now

    def _replicas(self, replicas: ModelReplicas, report: TickReport) -> None:
        """A sized model's replica target and warm replicas, its pause (1 and since when, on
        the wall clock's scale: ``paused_since_wall_s`` from the tick's end on the store's
        clock; or 0 and no start), the bounds its spec sets (an unset one: no sample) and its
        latency SLO (no spec: no sample)."""
        model = replicas.model
        if replicas.latency_slo_ms is not None:
            self.latency_slo.labels(model).set(replicas.latency_slo_ms)
        else:
            with suppress(KeyError):
                self.latency_slo.remove(model)
        self.model_replicas.labels(model, "target").set(replicas.target)
        self.model_replicas.labels(model, "warm").set(replicas.warm)
        self.model_paused.labels(model).set(1 if replicas.paused_at is not None else 0)
        if replicas.paused_at is not None:
            self.model_paused_since.labels(model).set(paused_since_wall_s(
                replicas.paused_at, report.finished_at, self._wall_clock.now()))
        else:
            with suppress(KeyError):
                self.model_paused_since.remove(model)
        for bound, value in zip(BOUNDS, (replicas.min_replicas, replicas.max_replicas),
                                strict=True):
            if value is None:
                with suppress(KeyError):
                    self.replica_bounds.remove(model, bound)
            else:
                self.replica_bounds.labels(model, bound).set(value)

    def _cost(self, pool: ObservedPool, report: TickReport) -> None:
        """What the pool's billed GPUs cost per hour at its configured price (the Cost page's
        billed rate); no sample for a pool that is not configured here."""
        spec = self._pools.get(pool.name)
        if spec is None:
            with suppress(KeyError):
                self.pool_cost.remove(pool.name)
            return
        billed = FleetSnapshot(report.observed.synced_at, {spec.product: pool.gpus_billed}, {},
                               ())
        self.pool_cost.labels(pool.name).set(billed_rate(billed, self._prices))

    def forget_fleet(self) -> None:
        """A replica that does not lead (it lost the Lease, or hands it back): no per-model or
        per-pool gauges, rather than its last tick's values frozen beside the leader's (the
        alerts on them, per replica, would fire on those), and ``headroom_leader`` 0. The
        counters stay: they do not move while it follows."""
        self.leader.set(0)
        self.loading_guard.forget()
        for gauge in (self.model_rps, self.load_unmeasured, self.queued, self.kv_cache,
                      self.latency, self.latency_slo, self.forecast_wape,
                      self.forecast_coverage,
                      self.pool_nodes, self.profile_rps, self.model_replicas, self.model_paused,
                      self.model_paused_since, self.fleet_paused_since, self.replica_bounds,
                      self.pool_cost):
            gauge.clear()
        for seen in self._seen.values():
            seen.clear()

    def _forecast_rps(self, demand: Demand) -> None:
        """The forecast the tick sized from (its p90 and the upper quantile it covered over the
        look-ahead); no sample when it had none fresh, rather than the last one's."""
        for kind, rps in (("forecast_p90", demand.forecast_p90_rps),
                          ("forecast_upper", demand.forecast_upper_rps)):
            if demand.is_fresh and rps > 0:
                self.model_rps.labels(demand.model, kind).set(rps)
            else:
                with suppress(KeyError):
                    self.model_rps.remove(demand.model, kind)

    def _accuracy(self, report: TickReport) -> None:
        """Each model's recent forecast accuracy; no sample for a model with none scored (or,
        for WAPE, nothing observed), rather than an old value."""
        found = {a.model: a for a in report.accuracy}
        deciding = report.plan is not None  # scored every model there is: the others go
        scored = {d.model for d in report.demands} | set(found)
        for model in (scored | self._seen["accuracy"]) if deciding else scored:
            seen = found.get(model)
            for gauge, value in ((self.forecast_wape, seen.wape if seen else None),
                                 (self.forecast_coverage, seen.p90_coverage if seen else None)):
                if value is None:
                    with suppress(KeyError):
                        gauge.remove(model)
                else:
                    gauge.labels(model).set(value)
        self._seen["accuracy"] = set(found) if deciding else self._seen["accuracy"] | set(found)


def tick_seconds(report: TickReport) -> float:
    """The wall seconds a tick took: measured by its loop, or else (a report built elsewhere)
    the span of its clock's readings."""
    if report.duration_s is not None:
        return report.duration_s
    return max(0.0, (report.finished_at - report.started_at).total_seconds())
