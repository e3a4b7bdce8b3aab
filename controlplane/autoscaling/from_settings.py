"""The scaling policy the configured settings ask for (``Settings.autoscaling``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controlplane.autoscaling.core import Budgets
from controlplane.autoscaling.hint_capacity import KnownCapacity
from controlplane.autoscaling.policies import (
    ScaleDownGuards,
    ScalingPolicy,
    predictive_policy,
    reactive_policy,
    static_policy,
)
from controlplane.settings import Settings, pool_specs


def policy_from_settings(settings: Settings, cold_wake_s: float,
                         peak_rps: Mapping[str, float] | None = None,
                         next_wake_s: float | None = None) -> ScalingPolicy:
    """``cold_wake_s``: time a new node needs to serve (provisioning p90 + model load p90);
    ``peak_rps``: per model, for the static policy; ``next_wake_s``: wake time of the rung
    after hot (default ``autoscaling.idle_wake_s``; the reconcile loop, which keeps no idle
    replicas, passes the start on a warm node)."""
    return replace(_policy(settings, cold_wake_s, peak_rps, next_wake_s),
                   stranded_grace_s=settings.autoscaling.stranded_grace_s)


def _policy(settings: Settings, cold_wake_s: float, peak_rps: Mapping[str, float] | None,
            next_wake_s: float | None) -> ScalingPolicy:
    auto, reconcile, safety = settings.autoscaling, settings.reconcile, settings.safety
    scale_down = ScaleDownGuards(safety.scale_down_cooldown_s, safety.replica_disruption_budget,
                                 safety.node_disruption_budget, safety.disruption_window_s)
    if auto.policy == "reactive":
        return reactive_policy(target_utilization=auto.reactive_target_utilization,
                               replica_stabilization_s=safety.scale_down_stabilization_s,
                               max_node_step=safety.max_node_step,
                               max_replica_step=safety.max_replica_step,
                               queue_drain_s=reconcile.queue_drain_s,
                               kv_cache_target=reconcile.kv_cache_target,
                               scale_down=scale_down)
    if auto.policy == "static":
        if not peak_rps:
            raise ValueError("autoscaling.policy static needs the peak rate of every model")
        return static_policy(peak_rps)
    return predictive_policy(cold_wake_s=cold_wake_s, keep_s=auto.keep_s,
                             reaction_s=auto.reaction_s,
                             target_utilization=reconcile.target_utilization,
                             shortfall_cost_ratio=auto.shortfall_cost_ratio,
                             short_minute_cost_ratio=auto.short_minute_cost_ratio,
                             idle_wake_s=auto.idle_wake_s if next_wake_s is None
                             else next_wake_s,
                             max_forecast_age_s=reconcile.max_forecast_age_s,
                             stale_headroom=reconcile.stale_headroom,
                             queue_drain_s=reconcile.queue_drain_s,
                             kv_cache_target=reconcile.kv_cache_target,
                             node_stabilization_s=auto.node_stabilization_s,
                             max_node_step=safety.max_node_step,
                             max_replica_step=safety.max_replica_step,
                             scale_down=scale_down)


def budgets_from_settings(settings: Settings) -> Budgets:
    """The tenant GPU budgets (``autoscaling.tenant_gpu_budgets``) and the cluster's
    (``safety.cluster_gpu_budget``)."""
    return Budgets(tuple(sorted(settings.autoscaling.tenant_gpu_budgets.items())),
                   settings.safety.cluster_gpu_budget)


def known_capacity(settings: Settings) -> KnownCapacity:
    """What the loop of ``settings`` can ever scale a model to: its node pools, GPU budgets,
    the utilization it sizes for and whether it sizes on corrected profiles (a demand hint is
    checked against it as it is added)."""
    return KnownCapacity(pool_specs(settings), budgets_from_settings(settings),
                         settings.reconcile.target_utilization,
                         settings.autoscaling.profile_correction.enabled)
