"""Running ``headroom simulate``: policies by name, one replay per policy, timelines, summaries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from controlplane.autoscaling.cost_ratios import SHORT_MINUTE_COST_RATIO, SHORTFALL_COST_RATIO
from controlplane.autoscaling.policies import (
    MAX_FORECAST_AGE_S,
    POLICY_NAMES,
    ScaleDownGuards,
    ScalingPolicy,
    predictive_policy,
    reactive_policy,
    static_policy,
)
from controlplane.files import write_all_atomically
from controlplane.simulation.engine import (
    ForecastCache,
    PolicyRun,
    SimOptions,
    cold_wake_s,
    run_policy,
)
from controlplane.simulation.replay import DemandReplay
from controlplane.simulation.sim_config import SimConfig
from controlplane.simulation.timeline import summarize, timeline_paths, write_timeline
from controlplane.simulation.trace import Trace
from scheduler.domain.validate import MAX_POOL_GPUS


@dataclass(frozen=True, slots=True)
class PolicyKnobs:
    """The one knob per policy a user turns most, and the guards and knobs an operator's
    settings set (``simulate --config``; None keeps the policy's own default)."""

    #: predictive: unserved replica-hour / replica-hour price
    shortfall_cost_ratio: float = SHORTFALL_COST_RATIO
    short_minute_cost_ratio: float = SHORT_MINUTE_COST_RATIO  # predictive: hot headroom price
    reactive_target_utilization: float = 0.8  # reactive: KEDA/HPA target
    static_target_utilization: float = 1.0  # static: peak / this
    #: predictive and reactive: scale-down cooldown and disruption budgets (all off by default)
    scale_down: ScaleDownGuards = field(default_factory=ScaleDownGuards)
    max_node_step: int | None = None  # predictive and reactive
    max_replica_step: int | None = None  # predictive and reactive
    reactive_stabilization_s: float | None = None  # reactive: replica scale-down window
    node_stabilization_s: float | None = None  # predictive: node scale-down window
    keep_s: float | None = None  # predictive
    reaction_s: float | None = None  # predictive (default: tick + the load metric's window)
    predictive_target_utilization: float | None = None  # predictive
    max_forecast_age_s: float | None = None  # predictive
    stale_headroom: float | None = None  # predictive


def _given(**values: Any) -> dict[str, Any]:
    """The keyword arguments that are set (None: the policy's own default)."""
    return {k: v for k, v in values.items() if v is not None}


def build_policy(name: str, trace: Trace, config: SimConfig, knobs: PolicyKnobs,
                 options: SimOptions) -> ScalingPolicy:
    if name == "predictive":
        reaction_s = (options.tick_s + options.observe_window_s if knobs.reaction_s is None
                      else knobs.reaction_s)
        return predictive_policy(cold_wake_s=cold_wake_s(config), reaction_s=reaction_s,
                                 shortfall_cost_ratio=knobs.shortfall_cost_ratio,
                                 idle_wake_s=config.fleet.idle_wake_s,
                                 observed_lag_s=options.observe_window_s,
                                 short_minute_cost_ratio=knobs.short_minute_cost_ratio,
                                 scale_down=knobs.scale_down, **_given(
                                     keep_s=knobs.keep_s,
                                     target_utilization=knobs.predictive_target_utilization,
                                     max_forecast_age_s=knobs.max_forecast_age_s,
                                     stale_headroom=knobs.stale_headroom,
                                     node_stabilization_s=knobs.node_stabilization_s,
                                     max_node_step=knobs.max_node_step,
                                     max_replica_step=knobs.max_replica_step))
    if name == "reactive":
        return reactive_policy(target_utilization=knobs.reactive_target_utilization,
                               scale_down=knobs.scale_down, **_given(
                                   replica_stabilization_s=knobs.reactive_stabilization_s,
                                   max_node_step=knobs.max_node_step,
                                   max_replica_step=knobs.max_replica_step))
    if name == "static":
        return static_policy({m: trace.peak_rps(m) for m in trace.models},
                             target_utilization=knobs.static_target_utilization)
    raise ValueError(f"--policy must be one of {', '.join(POLICY_NAMES)}, got {name!r}")


def check_policies(names: Sequence[str], trace: Trace, config: SimConfig, knobs: PolicyKnobs,
                   options: SimOptions) -> None:
    """Refuse unknown or repeated policy names, knobs out of range and a demand no fleet can
    be sized for (ValueError)."""
    if len(set(names)) != len(names):
        raise ValueError(f"--policy given twice: {list(names)}")
    for name in names:
        build_policy(name, trace, config, knobs, options)
    if "predictive" in names:
        check_forecast_age(options, knobs)
    for name in names:
        check_demand_fits(trace, config, *policy_utilization(name, knobs))


def check_forecast_age(options: SimOptions, knobs: PolicyKnobs) -> None:
    """Refuse forecasts refreshed less often than the predictive policy's age limit allows
    (ValueError), as ``serve`` refuses ``forecast.interval_s`` above
    ``reconcile.max_forecast_age_s``: each forecast would count as stale before the next one
    came, and the policy would run on its stale fallback for part of every interval."""
    age_s = (MAX_FORECAST_AGE_S if knobs.max_forecast_age_s is None
             else knobs.max_forecast_age_s)
    if options.forecast_interval_s > age_s:
        raise ValueError(
            f"--forecast-interval-s must be <= reconcile.max_forecast_age_s ({age_s:g} s), got "
            f"{options.forecast_interval_s:g}: forecasts refreshed that seldom would count as "
            "stale before the next one is due")


def policy_utilization(name: str, knobs: PolicyKnobs) -> tuple[float, str]:
    """The target utilization ``name`` sizes replicas for, and the option that set it."""
    if name == "reactive":
        return knobs.reactive_target_utilization, "--reactive-target"
    if name == "static":
        return knobs.static_target_utilization, "static target utilization"
    if knobs.predictive_target_utilization is not None:
        return knobs.predictive_target_utilization, "reconcile.target_utilization"
    return 1.0, ""


def check_demand_fits(trace: Trace, config: SimConfig, target_utilization: float = 1.0,
                      source: str = "") -> None:
    """Refuse (ValueError) a model whose peak rate, at ``target_utilization`` of each
    replica's throughput, needs more GPUs than a pool may hold (``MAX_POOL_GPUS``, PlanFleet's
    bound): a rate in the wrong unit, an impossible throughput or a tiny target utilization
    (named by ``source``), which would otherwise size millions of replicas until memory runs
    out."""
    for model in config.models:
        shape = model.shape
        peak = trace.peak_rps(model.name)
        gpus = peak / (shape.per_replica_rps * target_utilization) * shape.gpu_share
        if gpus > MAX_POOL_GPUS:
            at = (f" at {source} {target_utilization:g}" if source else "")
            check = (f"check {source}, " if source else "check ")
            raise ValueError(
                f"{trace.source}: model {model.name!r}: its peak of {peak:.6g} rps needs "
                f"{gpus:.6g} GPUs at per_replica_rps {shape.per_replica_rps:g} and "
                f"gpu_per_replica {shape.gpu_share:g}{at}, more than the {MAX_POOL_GPUS:,} "
                f"GPUs of a pool; {check}the rates' unit (--value-unit) and the models file")


@dataclass(frozen=True, slots=True)
class SimulationResult:
    policies: tuple[ScalingPolicy, ...]  # as built, one per run
    runs: tuple[PolicyRun, ...]
    summaries: tuple[dict[str, Any], ...]
    timelines: dict[str, Path]


def simulate(trace: Trace, config: SimConfig, policies: Sequence[str], timeline_out: Path,
             options: SimOptions, knobs: PolicyKnobs,
             on_minute: Callable[[str, int], None] | None = None) -> SimulationResult:
    """Replay ``trace`` once per policy (forecasts shared) and write one timeline per policy."""
    check_policies(policies, trace, config, knobs, options)
    built = [build_policy(p, trace, config, knobs, options) for p in policies]
    replay = DemandReplay(trace, options.observe_window_s)
    paths = timeline_paths(timeline_out, list(policies))
    cache = ForecastCache()
    runs, summaries = [], []
    for policy in built:
        def tick(minute: int, name: str = policy.name) -> None:
            if on_minute is not None:
                on_minute(name, minute)
        run = run_policy(replay, config, policy, options, tick, cache)
        runs.append(run)
        summaries.append(summarize(run, config))
    # every timeline or none: a failed run or write leaves no file of this simulation behind
    write_all_atomically({paths[policy.name]: partial(write_timeline, rows=run.rows)
                          for policy, run in zip(built, runs, strict=True)})
    return SimulationResult(tuple(built), tuple(runs), tuple(summaries), paths)
