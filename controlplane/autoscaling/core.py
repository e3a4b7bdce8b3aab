"""One autoscaling decision, pure: observed state + forecasts -> plan and ladder targets.

The steps are the reconcile tick's, through the same domain functions: ``demand_from`` (policy
mode, forecast quantile, fast path) -> replicas per model -> warm-pool ladder (predictive only) ->
GPU budgets -> a ``FleetPlacement`` (sized from per-replica profiles instead of PlanFleet) ->
``desired_state`` + cluster budget -> ``planner.plan`` through the guards. The caller applies the
plan's actions and the idle-rung targets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from controlplane.autoscaling.ladder import ModelLadder, Rung, RungSpec, size_ladder
from controlplane.autoscaling.nodepools import node_pool_targets
from controlplane.autoscaling.policies import ScalingPolicy
from controlplane.autoscaling.sizing import (
    ModelRequest,
    ReplicaShape,
    apply_gpu_budgets,
    fleet_placement,
)
from controlplane.domain.demand import Demand, demand_from, replicas_for
from controlplane.domain.desired import DesiredState, PoolSpec
from controlplane.domain.guards import GuardMemory
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedState
from controlplane.domain.placement import FleetPlacement
from controlplane.domain.plan import Plan
from controlplane.domain.planner import plan as make_plan
from forecaster.types import Forecast


@dataclass(frozen=True, slots=True)
class FleetModel:
    """What the core needs to know about one model."""

    spec: ModelSpec
    shape: ReplicaShape
    rungs: tuple[RungSpec, ...]  # hot .. cold, wake times from its cold-start distribution
    replica_usd_per_h: float


@dataclass(frozen=True, slots=True)
class Budgets:
    tenant_gpus: tuple[tuple[str, float], ...] = ()
    cluster_gpus: int | None = None


@dataclass(frozen=True, slots=True)
class TickDecision:
    demands: tuple[Demand, ...]
    ladders: tuple[ModelLadder, ...]
    requests: tuple[ModelRequest, ...]
    placement: FleetPlacement
    desired: DesiredState
    plan: Plan
    memory: GuardMemory

    def idle_targets(self) -> dict[str, int]:
        return {r.model: r.idle for r in self.requests}


@lru_cache(maxsize=512)
def _placement(requests: tuple[ModelRequest, ...],
               shapes: tuple[ReplicaShape, ...]) -> FleetPlacement:
    return fleet_placement(requests, {s.model: s for s in shapes})


def _ladder(model: FleetModel, policy: ScalingPolicy, forecast: Forecast | None,
            observed_rps: float, hot: int, now: datetime) -> ModelLadder | None:
    if policy.ladder is None:
        return None
    ladder_policy = policy.ladder.ladder_policy(model.replica_usd_per_h,
                                                model.shape.per_replica_rps)
    return size_ladder(model.spec.name, forecast, observed_rps, now, model.shape.per_replica_rps,
                       hot, model.rungs, ladder_policy)


def decide(
    observed: ObservedState,
    forecasts: Mapping[str, Forecast],
    models: Sequence[FleetModel],
    pools: Sequence[PoolSpec],
    policy: ScalingPolicy,
    budgets: Budgets,
    memory: GuardMemory,
    now: datetime,
) -> TickDecision:
    specs = [m.spec for m in models]
    demands = demand_from(specs, forecasts, observed, policy.demand, now)
    ladders: list[ModelLadder] = []
    requests: list[ModelRequest] = []
    for model, demand in zip(models, demands, strict=True):
        hot = replicas_for(demand.rate_rps, model.shape.per_replica_rps)
        ladder = _ladder(model, policy, forecasts.get(model.spec.name), demand.observed_rps,
                         hot, now)
        if ladder is not None:
            ladders.append(ladder)
        requests.append(ModelRequest(
            model.spec.name, hot,
            idle=ladder.replicas(Rung.IDLE) if ladder else 0,
            cached=ladder.replicas(Rung.CACHED) if ladder else 0))
    shapes = {m.shape.model: m.shape for m in models}
    trimmed = apply_gpu_budgets(requests, shapes, dict(budgets.tenant_gpus), budgets.cluster_gpus)
    placement = _placement(trimmed, tuple(m.shape for m in models))
    desired = node_pool_targets(placement, pools, demands, budgets.cluster_gpus)
    made, memory = make_plan(observed, desired, memory, policy.pool_limits,
                             policy.replica_limits, now)
    return TickDecision(demands, tuple(ladders), trimmed, placement, desired, made, memory)
