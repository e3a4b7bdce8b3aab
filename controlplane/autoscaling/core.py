"""One autoscaling decision, pure: observed state + forecasts -> plan and ladder targets.

The steps, through the same domain functions: ``size`` (``demand_from``: policy mode, forecast
quantile, fast path -> replicas per model -> replica bounds, paused models held (``bounds``) ->
warm-pool ladder (predictive only) -> GPU budgets),
a ``FleetPlacement`` of the hot replicas plus the ladder's warm GPUs, then ``settle``
(``desired_state`` + cluster budget -> ``planner.plan`` through the guards). ``decide`` sizes the
placement from per-replica profiles (``headroom simulate``); the reconcile loop (demo, serve)
asks the scheduler's PlanFleet for the hot replicas instead (``controlplane.autoscaling.live``).
The caller applies the plan's actions and the idle-rung targets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache, partial

from controlplane.autoscaling.bounds import (
    bound_tag,
    bounded_hot,
    bounded_idle,
    replica_reasons,
)
from controlplane.autoscaling.headroom import next_step_headroom
from controlplane.autoscaling.ladder import ModelLadder, Rung, RungSpec, size_ladder
from controlplane.autoscaling.nodepools import node_pool_targets
from controlplane.autoscaling.policies import ScalingPolicy
from controlplane.autoscaling.sizing import (
    CLUSTER_BUDGET,
    TENANT_BUDGET,
    ModelRequest,
    ReplicaShape,
    apply_gpu_budgets,
    budget_cuts,
    fleet_placement,
    tenant_budget_holds,
)
from controlplane.domain.budget_hold import FOR_DEMAND, FOR_PAUSE, BudgetHold
from controlplane.domain.demand import (
    FORECAST_P90,
    FORECAST_QUANTILE,
    HOT_HEADROOM,
    OBSERVED_ABOVE_FORECAST,
    PREDICTIVE,
    Demand,
    demand_from,
    refused_forecast,
    replicas_for,
)
from controlplane.domain.desired import DesiredState, DesiredTarget, PoolSpec
from controlplane.domain.forecast_accuracy import ForecastAccuracy
from controlplane.domain.guards import GuardMemory
from controlplane.domain.model_replicas import ModelReplicas
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedState
from controlplane.domain.placement import FleetPlacement
from controlplane.domain.plan import Plan
from controlplane.domain.planner import plan as make_plan
from controlplane.domain.profile import ProfileCorrection
from controlplane.domain.stranded import relieve_stranded
from controlplane.domain.unplaced import holding_unplaced
from forecaster.types import Forecast

#: Demand reasons of a fresh forecast, the fast path's included (headroom applies to these
#: only): load above the forecast must not drop the headroom the forecast alone would hold.
FORECAST_REASONS = frozenset({FORECAST_P90, FORECAST_QUANTILE, OBSERVED_ABOVE_FORECAST})


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
    profiles: tuple[ProfileCorrection, ...] = ()  # each model's profile it sized with
    accuracy: tuple[ForecastAccuracy, ...] = ()  # how each model's forecasts did lately
    notes: tuple[str, ...] = ()  # for the tick's record (e.g. a demand hint capacity capped)
    replicas: tuple[ModelReplicas, ...] = ()  # each model's target, warm, pause, bounds

    def idle_targets(self) -> dict[str, int]:
        return {r.model: r.idle for r in self.requests}

    def warm_replicas(self) -> dict[str, int]:
        """Model -> replicas its ladder keeps warm beyond the hot ones (idle + cached)."""
        return {r.model: r.idle + r.cached for r in self.requests}


@lru_cache(maxsize=512)
def _placement(requests: tuple[ModelRequest, ...],
               shapes: tuple[ReplicaShape, ...]) -> FleetPlacement:
    return fleet_placement(requests, {s.model: s for s in shapes})


def _ladder(model: FleetModel, policy: ScalingPolicy, forecast: Forecast | None,
            observed_rps: float, hot: int, now: datetime) -> ModelLadder | None:
    if policy.ladder is None:
        return None
    # A replica counts for what it serves at the policy's target utilization, on every rung.
    unit_rps = model.shape.per_replica_rps * policy.demand.target_utilization
    ladder_policy = policy.ladder.ladder_policy(model.replica_usd_per_h, unit_rps)
    return size_ladder(model.spec.name, forecast, observed_rps, now, unit_rps, hot, model.rungs,
                       ladder_policy)


@dataclass(frozen=True, slots=True)
class Sizing:
    """The policy's demand, ladders and replicas per rung (GPU budgets applied), and the shapes
    it sized with (where the replicas run: the planner keeps the nodes of kept replicas)."""

    demands: tuple[Demand, ...]
    ladders: tuple[ModelLadder, ...]
    requests: tuple[ModelRequest, ...]
    shapes: tuple[ReplicaShape, ...] = ()
    #: (model, budget reason) of each model whose serving replicas a GPU budget cut
    budget_cuts: tuple[tuple[str, str], ...] = ()
    #: (model, hot replicas before the cut) of each of those: what demand and bounds sized
    cut_from: tuple[tuple[str, int], ...] = ()
    #: (model, ``min_replicas:N`` | ``max_replicas:N``) of each model a replica bound set
    bounds: tuple[tuple[str, str], ...] = ()
    #: (model, replicas held, reason) of each paused model
    held: tuple[tuple[str, int, str], ...] = ()
    #: models a hint did not raise: sized without their hints they asked for more (e.g. the
    #: fast path on load above the forecaster's own forecast), and that sizing stands
    hint_outsized: tuple[str, ...] = ()


def size(
    observed: ObservedState,
    forecasts: Mapping[str, Forecast],
    models: Sequence[FleetModel],
    policy: ScalingPolicy,
    budgets: Budgets,
    now: datetime,
    pools: Sequence[PoolSpec] = (),
    hint_rps: Mapping[str, float] | None = None,
    held: Mapping[str, tuple[int, str]] | None = None,
    unhinted: Mapping[str, Forecast] | None = None,
) -> Sizing:
    """Demand -> hot replicas -> replica bounds -> warm-pool ladder (predictive only) -> GPU
    budgets (counted in the whole GPUs, and with ``pools`` the whole nodes, the replicas would
    take; ``controlplane.autoscaling.bounds`` says the order). ``hint_rps``: by model, the
    demand hints in force over the lookahead (``hint_floors``), for a model the predictive
    policy cannot size from a forecast. ``held``: model -> (replicas, reason) of each paused
    model (``domain.pause.held``), kept at those replicas, no ladder, never trimmed.
    ``unhinted``: the forecasts before the hints floored ``forecasts`` (``HintedInputs``); a
    hinted model's demand is the higher of its sizing with and without its hints
    (``_unhinted_demands``), so a hint never sizes fewer replicas than no hint."""
    held = held or {}
    specs = [m.spec for m in models]
    demands = demand_from(specs, forecasts, observed, policy.demand, now, hint_rps)
    plain = _unhinted_demands(specs, forecasts, unhinted, observed, policy, now, hint_rps)
    ladders: list[ModelLadder] = []
    requests: list[ModelRequest] = []
    sized: list[Demand] = []
    asked: dict[str, int] = {}
    outsized: list[str] = []
    for model, demand in zip(models, demands, strict=True):
        name = model.spec.name
        forecast = forecasts.get(name)
        demand = _with_headroom(demand, model, policy, forecast, now)
        if name in plain:
            alone = _with_headroom(plain[name], model, policy, (unhinted or {}).get(name), now)
            if alone.rate_rps > demand.rate_rps:
                demand = alone
                outsized.append(name)
        sized.append(demand)
        if name in held:
            requests.append(ModelRequest(name, held[name][0]))
            continue
        asked[name] = replicas_for(demand.rate_rps, model.shape.per_replica_rps)
        hot = bounded_hot(asked[name], model.spec)
        # the ladder warms replicas for the forecast only where the demand could size from it
        usable = None if forecast is None or refused_forecast(forecast, policy.demand, now) \
            else forecast
        ladder = _ladder(model, policy, usable, demand.observed_rps, hot, now)
        if ladder is not None:
            ladders.append(ladder)
        requests.append(ModelRequest(
            name, hot,
            idle=bounded_idle(hot, ladder.replicas(Rung.IDLE), model.spec) if ladder else 0,
            cached=ladder.replicas(Rung.CACHED) if ladder else 0))
    shapes = {m.shape.model: m.shape for m in models}
    trimmed = apply_gpu_budgets(requests, shapes, dict(budgets.tenant_gpus), budgets.cluster_gpus,
                                pools, frozenset(held))
    by_spec = {m.spec.name: m.spec for m in models}
    bounds = tuple((r.model, tag) for r, b in zip(trimmed, requests, strict=True)
                   if r.model in asked
                   and (tag := bound_tag(asked[r.model], b.hot, r.hot, by_spec[r.model])))
    return Sizing(tuple(sized), tuple(ladders), trimmed, tuple(shapes.values()),
                  budget_cuts(requests, trimmed),
                  tuple((b.model, b.hot) for b, r in zip(requests, trimmed, strict=True)
                        if r.hot < b.hot), bounds,
                  tuple((name, count, reason) for name, (count, reason) in held.items()),
                  tuple(outsized))


def _unhinted_demands(specs: Sequence[ModelSpec], forecasts: Mapping[str, Forecast],
                      unhinted: Mapping[str, Forecast] | None, observed: ObservedState,
                      policy: ScalingPolicy, now: datetime,
                      hint_rps: Mapping[str, float] | None) -> dict[str, Demand]:
    """By model, the predictive demand of each model its hints touch (a forecast they floored,
    a rate in force), sized as if there were none: the forecaster's own forecast decides the
    fast path. A hint raises a forecast, so the load can run above the unhinted forecast
    (observed x ``stale_headroom``) yet below the floored one, which then sized less."""
    if policy.demand.mode != PREDICTIVE:
        return {}
    before = forecasts if unhinted is None else unhinted
    touched = [s for s in specs if (hint_rps or {}).get(s.name, 0.0) > 0
               or before.get(s.name) is not forecasts.get(s.name)]
    if not touched:
        return {}
    return {d.model: d for d in demand_from(touched, before, observed, policy.demand, now)}


def budget_holds(sizing: Sizing, budgets: Budgets,
                 said: frozenset[str] = frozenset()) -> tuple[BudgetHold, ...]:
    """Each model a GPU budget or pool cut below what it was sized for (``budget_cuts``), as
    the tick's note says it: every tick the cut binds, not only one that changes replicas.
    ``said``: models another note already names the cut for (a capped demand hint)."""
    sized, held = dict(sizing.cut_from), {r.model: r.hot for r in sizing.requests}
    paused = {m for m, _, _ in sizing.held}
    tenant_of = {s.model: s.tenant for s in sizing.shapes}
    tenant_gpus = dict(budgets.tenant_gpus)

    def gpus(model: str, limit: str) -> float | None:
        if limit.startswith(f"{TENANT_BUDGET}:"):
            return tenant_gpus.get(tenant_of.get(model, ""))
        return float(budgets.cluster_gpus) if limit == CLUSTER_BUDGET and \
            budgets.cluster_gpus is not None else None

    return tuple(BudgetHold(model, sized[model], held.get(model, 0), limit, gpus(model, limit),
                            FOR_PAUSE if model in paused else FOR_DEMAND)
                 for model, limit in sizing.budget_cuts if model in sized and model not in said)


def _with_headroom(demand: Demand, model: FleetModel, policy: ScalingPolicy,
                   forecast: Forecast | None, now: datetime) -> Demand:
    """``demand`` raised to the hot headroom over the next forecast step when the policy prices
    short minutes and the forecast is fresh (reason ``HOT_HEADROOM`` when it raised it)."""
    ladder = policy.ladder
    if ladder is None or forecast is None or demand.reason not in FORECAST_REASONS:
        return demand
    util = policy.demand.target_utilization
    found = next_step_headroom(forecast, now, model.shape.per_replica_rps * util,
                               ladder.short_minute_cost_ratio)
    if found is None or found.rps / util <= demand.rate_rps:
        return demand
    return replace(demand, rate_rps=found.rps / util, reason=HOT_HEADROOM,
                   forecast_upper_rps=found.rps)


def settle(
    observed: ObservedState,
    sizing: Sizing,
    placement: FleetPlacement,
    pools: Sequence[PoolSpec],
    policy: ScalingPolicy,
    budgets: Budgets,
    memory: GuardMemory,
    now: datetime,
) -> TickDecision:
    """Placement (hot replicas placed, ladder warm GPUs) -> desired nodes and replicas within
    the cluster budget (a model a GPU budget cut says so in its replica target's reason; an
    unplaced model that serves holds its replicas: ``domain.unplaced``; a pool whose replicas
    of several GPUs no node has room for grows for them: ``domain.stranded``) -> a plan through the
    policy's guards, then the tenants' GPU budgets again: a scale-up that the replicas the
    guards keep (a scale-down held back) leave no room for is held back too
    (``tenant_budget_holds``, skipped as ``tenant_gpu_budget:<tenant>``)."""
    desired = node_pool_targets(placement, pools, sizing.demands, budgets.cluster_gpus,
                                sizing.shapes,
                                replica_reasons(sizing.demands, sizing.budget_cuts,
                                                sizing.bounds))
    desired = _holding(holding_unplaced(desired, observed), sizing.held)
    # replicas of several GPUs whose pods no node has room for: their pool grows to hold them
    relief = relieve_stranded(desired, observed, pools, memory, now, policy.stranded_grace_s,
                              budgets.cluster_gpus)
    desired = relief.desired
    # the replicas the guards keep are GPUs too: no scale-up takes a tenant over its budget
    holds = partial(tenant_budget_holds, sizing.requests, {s.model: s for s in sizing.shapes},
                    dict(budgets.tenant_gpus), held=frozenset(m for m, _, _ in sizing.held))
    made, memory = make_plan(observed, desired, relief.memory, policy.pool_limits,
                             policy.replica_limits, now,
                             holds if budgets.tenant_gpus else None)
    return TickDecision(sizing.demands, sizing.ladders, sizing.requests, placement, desired,
                        made, memory, notes=relief.notes)


def _holding(desired: DesiredState, held: Sequence[tuple[str, int, str]]) -> DesiredState:
    """``desired`` with each paused model's replica target at the replicas its pause holds,
    the pause as its reason (the planner's guards still pace the way to them)."""
    if not held:
        return desired
    by_model = {model: (count, reason) for model, count, reason in held}
    return replace(desired, replicas=tuple(
        DesiredTarget(t.target, *by_model[t.target]) if t.target in by_model else t
        for t in desired.replicas))


def decide(
    observed: ObservedState,
    forecasts: Mapping[str, Forecast],
    models: Sequence[FleetModel],
    pools: Sequence[PoolSpec],
    policy: ScalingPolicy,
    budgets: Budgets,
    memory: GuardMemory,
    now: datetime,
    hint_rps: Mapping[str, float] | None = None,
    held: Mapping[str, tuple[int, str]] | None = None,
) -> TickDecision:
    """One decision with the placement sized from per-replica profiles: ``size`` then
    ``decide_sized``. ``headroom simulate`` runs the two with ``hint_capacity.hints_capped``
    between them; the reconcile loop runs ``size`` and ``settle`` around the scheduler's
    PlanFleet instead."""
    sizing = size(observed, forecasts, models, policy, budgets, now, pools, hint_rps, held)
    return decide_sized(observed, sizing, models, pools, policy, budgets, memory, now)


def decide_sized(observed: ObservedState, sizing: Sizing, models: Sequence[FleetModel],
                 pools: Sequence[PoolSpec], policy: ScalingPolicy, budgets: Budgets,
                 memory: GuardMemory, now: datetime) -> TickDecision:
    """``decide`` from a ``sizing`` already made (and amended, e.g. by ``hints_capped``)."""
    placement = _placement(sizing.requests, tuple(m.shape for m in models))
    return settle(observed, sizing, placement, pools, policy, budgets, memory, now)
