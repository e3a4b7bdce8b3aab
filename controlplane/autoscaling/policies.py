"""Scaling policies: one core, three settings (pure).

A policy is only data: which demand mode, which guards on replicas and node pools, and whether a
warm-pool ladder is kept. ``predictive`` (Headroom), ``reactive`` (KEDA/HPA target utilization with
Cluster-Autoscaler-like node pools) and ``static`` (provision for the peak) all run through the
same demand -> sizing -> desired state -> guards -> planner functions.

Prices are relative: ``shortfall_cost_ratio`` says what one replica's worth of unserved demand
costs per hour, as a multiple of what the replica costs. The newsvendor quantile of a rung is then
``1 - rung idle cost x reaction / (ratio x replica cost x (reaction + next rung's wake))``
(``controlplane.autoscaling.ladder``): with 1.5, a 60 s reaction and a 5.7-minute cold start, warm
GPUs cover the forecast's 88th percentile of the next minutes. ``short_minute_cost_ratio`` prices
a short model-minute (in replica-hours): the hot replicas then also cover the quantile of the
next forecast step that price pays for, per model (``controlplane.autoscaling.headroom``). Since
a minute counts as short as soon as a rise outruns the hot replicas, however fast the warm rungs
wake, that headroom carries the first-minute risk and the warm rungs the rest of a rise: on the
ServeGen benchmark the pair (1.5, 80) has ~30 % fewer short model-minutes than the ladder alone
at its former ratio 4, at the same GPU-hours (benchmarks/autoscaling/README.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from controlplane.autoscaling.cost_ratios import SHORT_MINUTE_COST_RATIO, SHORTFALL_COST_RATIO
from controlplane.autoscaling.ladder import LadderPolicy, Rung, RungSpec, critical_quantile
from controlplane.domain.demand import PREDICTIVE, REACTIVE, STATIC, DemandPolicy
from controlplane.domain.guards import GuardLimits

POLICY_NAMES = (PREDICTIVE, REACTIVE, STATIC)


@dataclass(frozen=True, slots=True)
class LadderSettings:
    reaction_s: float  # notice + act: reconcile interval + metric window
    shortfall_cost_ratio: float  # unserved replica-hour / replica-hour price
    idle_wake_s: float  # wake of a loaded-but-idle replica (vLLM sleep level 1, Triton load)
    keep_s: float = 0.0  # warm GPUs also cover this much longer: a node's provisioning time
    #: price of one short model-minute in replica-hours; > 0: hot replicas hold headroom over
    #: the next forecast step (``controlplane.autoscaling.headroom``), 0: no headroom
    short_minute_cost_ratio: float = 0.0

    def __post_init__(self) -> None:
        # NaN too: it would compare false everywhere; inf prices every quantile alike (as 0)
        if not (math.isfinite(self.shortfall_cost_ratio) and self.shortfall_cost_ratio > 1):
            raise ValueError("shortfall_cost_ratio must be a finite number > 1 (else nothing is "
                             f"worth keeping), got {self.shortfall_cost_ratio}")
        if not (math.isfinite(self.short_minute_cost_ratio) and self.short_minute_cost_ratio >= 0):
            raise ValueError(f"short_minute_cost_ratio must be a finite number >= 0, got "
                             f"{self.short_minute_cost_ratio}")

    def ladder_policy(self, replica_usd_per_h: float, per_replica_rps: float) -> LadderPolicy:
        price = max(replica_usd_per_h, 1e-9) * self.shortfall_cost_ratio / per_replica_rps
        return LadderPolicy(self.reaction_s, price, keep_s=self.keep_s)

    def warm_quantile(self, cold_wake_s: float) -> float:
        """Quantile the warm GPUs cover: a miss there lasts until a new node serves."""
        return critical_quantile(1.0, 1.0, LadderPolicy(self.reaction_s,
                                                        self.shortfall_cost_ratio), cold_wake_s)


@dataclass(frozen=True, slots=True)
class ScaleDownGuards:
    """The optional scale-down guards of replicas and node pools (``GuardLimits``), all off by
    default: ``cooldown_s`` after a target's last scale-up, and at most a budget of replicas per
    model / nodes per pool removed per ``disruption_window_s``."""

    cooldown_s: float = 0.0
    replica_disruption_budget: int | None = None
    node_disruption_budget: int | None = None
    disruption_window_s: float = 600.0

    def replicas(self, max_step: int, stabilization_s: float,
                 tolerance: float = 0.0) -> GuardLimits:
        return GuardLimits(max_step=max_step, stabilization_s=stabilization_s,
                           tolerance=tolerance, cooldown_s=self.cooldown_s,
                           disruption_budget=self.replica_disruption_budget,
                           disruption_window_s=self.disruption_window_s)

    def nodes(self, max_step: int, stabilization_s: float) -> GuardLimits:
        return GuardLimits(max_step=max_step, stabilization_s=stabilization_s,
                           cooldown_s=self.cooldown_s,
                           disruption_budget=self.node_disruption_budget,
                           disruption_window_s=self.disruption_window_s)


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    name: str
    demand: DemandPolicy
    replica_limits: GuardLimits
    pool_limits: GuardLimits
    ladder: LadderSettings | None = None
    #: a pool whose replicas of several GPUs no node has room for is raised for them once they
    #: have waited this long (``domain.stranded``)
    stranded_grace_s: float = 120.0


def ladder_rungs(replica_usd_per_h: float, idle_gpu_fraction: float, idle_wake_s: float,
                 cached_start_p90_s: float, cold_start_p90_s: float) -> tuple[RungSpec, ...]:
    """The four rungs for one model: wake times from the cold-start distributions, idle costs
    from the GPU share a replica keeps in that rung."""
    return (RungSpec(Rung.HOT, 0.0, replica_usd_per_h),
            RungSpec(Rung.IDLE, idle_wake_s, replica_usd_per_h * idle_gpu_fraction),
            RungSpec(Rung.CACHED, cached_start_p90_s, replica_usd_per_h),
            RungSpec(Rung.COLD, cold_start_p90_s, 0.0))


#: the predictive policy's default age past which a forecast counts as stale (the settings'
#: ``reconcile.max_forecast_age_s`` default)
MAX_FORECAST_AGE_S = 1800.0


def predictive_policy(*, cold_wake_s: float = 300.0, keep_s: float = 240.0,
                      reaction_s: float = 60.0,
                      shortfall_cost_ratio: float = SHORTFALL_COST_RATIO,
                      idle_wake_s: float = 2.0, target_utilization: float = 1.0,
                      max_forecast_age_s: float = MAX_FORECAST_AGE_S, stale_headroom: float = 1.3,
                      replica_stabilization_s: float = 60.0,
                      node_stabilization_s: float = 120.0, max_node_step: int = 16,
                      max_replica_step: int = 200, observed_lag_s: float = 0.0,
                      queue_drain_s: float = 0.0, kv_cache_target: float = 0.0,
                      short_minute_cost_ratio: float = SHORT_MINUTE_COST_RATIO,
                      scale_down: ScaleDownGuards = ScaleDownGuards()) -> ScalingPolicy:
    """Headroom: the ladder keeps idle and cached (warm GPU) capacity for the windows until the
    next rung could serve; hot replicas cover, over the next ``reaction_s`` + idle wake, the same
    quantile as the warm GPUs (a warm GPU costs the same whether a replica runs on it or not), so
    a rise the forecast expects is served from its first minute. ``cold_wake_s`` is the time a
    new node needs to serve (provisioning p90 + model load p90). Nodes scale down only after a
    stabilization window on fresh data. ``observed_lag_s``: the load metric's window; a load
    the forecast expected over it (a predicted fall) does not trigger the fast path.
    ``queue_drain_s`` > 0: a model's queued requests count as observed load served within it;
    ``kv_cache_target`` > 0: the observed load is at least what sizes the model's replicas to
    that KV cache usage.
    ``short_minute_cost_ratio`` > 0: hot replicas also cover the next forecast step's quantile
    chosen per model at that price of a short model-minute (``headroom``)."""
    ladder = LadderSettings(reaction_s, shortfall_cost_ratio, idle_wake_s, keep_s,
                            short_minute_cost_ratio)
    demand = DemandPolicy(target_utilization=target_utilization,
                          lookahead_s=reaction_s + idle_wake_s,
                          max_forecast_age_s=max_forecast_age_s, stale_headroom=stale_headroom,
                          mode=PREDICTIVE, upper_quantile=ladder.warm_quantile(cold_wake_s),
                          observed_lag_s=observed_lag_s, queue_drain_s=queue_drain_s,
                          kv_cache_target=kv_cache_target)
    return ScalingPolicy(
        PREDICTIVE, demand,
        replica_limits=scale_down.replicas(max_replica_step, replica_stabilization_s),
        pool_limits=scale_down.nodes(max_node_step, node_stabilization_s),
        ladder=ladder)


def reactive_policy(*, target_utilization: float = 0.8, tolerance: float = 0.1,
                    replica_stabilization_s: float = 300.0, node_stabilization_s: float = 600.0,
                    max_node_step: int = 10, max_replica_step: int = 200,
                    queue_drain_s: float = 0.0, kv_cache_target: float = 0.0,
                    scale_down: ScaleDownGuards = ScaleDownGuards()) -> ScalingPolicy:
    """KEDA/HPA: replicas = observed / (per-replica rps x target utilization) with a 10 %
    tolerance and a 5-minute scale-down window; node pools follow the replicas like Cluster
    Autoscaler (no warm pool, a node leaves after 10 minutes unneeded). ``queue_drain_s`` and
    ``kv_cache_target`` as for the predictive policy."""
    demand = DemandPolicy(target_utilization=target_utilization, lookahead_s=0.0,
                          max_forecast_age_s=1.0, stale_headroom=1.0, mode=REACTIVE,
                          queue_drain_s=queue_drain_s, kv_cache_target=kv_cache_target)
    return ScalingPolicy(
        REACTIVE, demand,
        replica_limits=scale_down.replicas(max_replica_step, replica_stabilization_s, tolerance),
        pool_limits=scale_down.nodes(max_node_step, node_stabilization_s))


def static_policy(peak_rps: Mapping[str, float], *, target_utilization: float = 1.0
                  ) -> ScalingPolicy:
    """Provision every model for its peak, all the time."""
    demand = DemandPolicy(target_utilization=target_utilization, lookahead_s=0.0,
                          max_forecast_age_s=1.0, stale_headroom=1.0, mode=STATIC,
                          static_rps=tuple(sorted(peak_rps.items())))
    big = GuardLimits(max_step=10_000, stabilization_s=0.0)
    return ScalingPolicy(STATIC, demand, replica_limits=big, pool_limits=big)
