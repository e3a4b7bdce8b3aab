"""One reconcile tick: observe -> forecast -> demand -> place -> desire -> plan -> apply -> record.

Demand, replicas and warm pools come from the autoscaling core (``controlplane.autoscaling``: the
policy of ``settings.autoscaling``, its warm-pool ladder, GPU budgets and guards), the same core
``headroom simulate`` measures; the scheduler's PlanFleet places the hot replicas. The forecasts'
upper tails are calibrated from their own recent errors, as in the simulator, from records kept
in the store (``controlplane.forecast_calibration``).

Level-triggered: every tick recomputes from the full snapshot and sets absolute targets, so running
it twice is harmless and a crash at any point is repaired by the next tick.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from controlplane.actuation import Actuators, apply_actions
from controlplane.autoscaling.core import (
    Budgets,
    FleetModel,
    TickDecision,
    budget_holds,
    settle,
    size,
)
from controlplane.autoscaling.hint_capacity import hints_capped
from controlplane.autoscaling.hints import hinted_inputs
from controlplane.autoscaling.issued import accuracy
from controlplane.autoscaling.live import ladder_warm, placement_demands
from controlplane.autoscaling.policies import ScalingPolicy
from controlplane.autoscaling.profile_correction import (
    CorrectionConfig,
    corrected_models,
    in_use,
    offline,
)
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.demand import PREDICTIVE
from controlplane.domain.desired import PoolSpec
from controlplane.domain.errors import PermanentError, TransientError
from controlplane.domain.forecast_accuracy import ACCURACY_WINDOW_S
from controlplane.domain.graceful_stop import graceful_stop_findings
from controlplane.domain.guards import GuardMemory
from controlplane.domain.model_replicas import model_replicas
from controlplane.domain.models import ModelSpec
from controlplane.domain.node_plan import NodeConfigLimits, node_config_plan
from controlplane.domain.observed import ObservedState
from controlplane.domain.pause import held, paused_hint_notes
from controlplane.domain.placement import FleetPlacement
from controlplane.domain.plan import Plan
from controlplane.domain.planner import held_for_surges, made
from controlplane.domain.profile import ProfileCorrection
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.domain.unplaced import no_pool_notes, unplaced_notes
from controlplane.domain.workload_slices import workload_slice_findings
from controlplane.forecast_calibration import CalibrationConfig, calibrated_latest
from controlplane.ports import (
    Clock,
    ClusterReader,
    DecisionStore,
    DemandHints,
    FleetPauses,
    ForecastLedger,
    ForecastReader,
    MigRelayoutActuator,
    ModelPauses,
    NodePoolActuator,
    PlacementClient,
    ProfileSamples,
    RateHistory,
    ReplicaActuator,
    SharingActuator,
)

log = logging.getLogger("headroom.reconcile")

SNAPSHOT_STALE = "snapshot_stale"
SNAPSHOT_UNSYNCED = "snapshot_unsynced"
SOURCE_UNREACHABLE = "source_unreachable"
SOURCE_REJECTED = "source_rejected"  # e.g. 403: the reader lacks RBAC to list the fleet


@dataclass(frozen=True, slots=True)
class ReconcileConfig:
    models: tuple[FleetModel, ...]  # spec, replica shape and ladder rungs per model
    pools: tuple[PoolSpec, ...]
    policy: ScalingPolicy
    budgets: Budgets
    max_staleness_s: float
    dry_run: bool
    calibration: CalibrationConfig
    node_configs: NodeConfigLimits | None = None  # None: replicas and pools only
    profile_correction: CorrectionConfig | None = None  # None: the offline profiles as they are
    hint_lead_s: float = 600.0  # demand hints floor the forecast from this long before they start
    mig_strategy: str = "mixed"  # the device plugin's (k8s.mig_strategy): the resource MIG asks

    @property
    def specs(self) -> tuple[ModelSpec, ...]:
        return tuple(m.spec for m in self.models)


@dataclass(frozen=True, slots=True)
class ReconcileDeps:
    clock: Clock
    reader: ClusterReader
    node_pools: NodePoolActuator
    replicas: ReplicaActuator
    placement: PlacementClient
    forecasts: ForecastReader
    decisions: DecisionStore
    history: RateHistory  # observed demand: volatility and outcomes of issued forecasts
    ledger: ForecastLedger  # issued forecasts and their outcomes (calibration)
    sharing: SharingActuator | None = None  # node layouts: with both, the loop lays nodes
    mig: MigRelayoutActuator | None = None  # out as the fleet plan needs
    samples: ProfileSamples | None = None  # observed load and latency: profile correction
    hints: DemandHints | None = None  # demand announced ahead: floors on the forecasts
    pauses: ModelPauses | None = None  # `headroom models pause`: replicas held, read each tick
    fleet_pause: FleetPauses | None = None  # `headroom fleet pause`: no change made, read each tick


def _skipped(deps: ReconcileDeps, observed: ObservedState, reason: str) -> TickReport:
    now = deps.clock.now()
    log.info("tick.skipped", extra={"reason": reason})
    return TickReport(now, now, TickStatus.SKIPPED, reason, observed, (), None, None, (),
                      deps.decisions.last_guard_memory())


def _unobserved(deps: ReconcileDeps, started_at: datetime, error: Exception) -> TickReport:
    """The fleet could not be read: an unreachable API skips the tick, a rejected read (403,
    404, ...) fails it; both name the API error and leave the fleet untouched."""
    transient = isinstance(error, TransientError)
    status = TickStatus.SKIPPED if transient else TickStatus.FAILED
    reason = SOURCE_UNREACHABLE if transient else SOURCE_REJECTED
    log.log(logging.WARNING if transient else logging.ERROR, f"tick.{status.value}",
            extra={"reason": reason, "error": str(error)})
    now = deps.clock.now()
    empty = ObservedState(started_at, (), (), (), synced=False, notes=(str(error),))
    return TickReport(now, now, status, reason, empty, (), None, None, (),
                      deps.decisions.last_guard_memory())


def _apply(deps: ReconcileDeps, plan: Plan) -> tuple[ActionOutcome, ...]:
    return apply_actions(plan.actions, Actuators(deps.node_pools, deps.replicas, deps.sharing,
                                                 deps.mig))


def noting_unserved(observed: ObservedState, specs: tuple[ModelSpec, ...]) -> ObservedState:
    """The snapshot with a note for each configured model no workload serves (on Kubernetes:
    no Deployment or StatefulSet labelled with it, e.g. deleted): its load is not read and its
    replicas cannot be set, which the tick's record would otherwise not say."""
    missing = [s.name for s in specs if observed.model(s.name) is None]
    if not missing:
        return observed
    return replace(observed, notes=(*observed.notes, *(
        f"model {name}: no workload serves it (no Deployment or StatefulSet labelled with it); "
        "its load is not read and its replicas cannot be set" for name in missing)))


def noting_workload_slices(observed: ObservedState, placement: FleetPlacement,
                           mig_strategy: str) -> ObservedState:
    """The snapshot with a note, each tick until it is fixed, for every model whose workload's
    pods ask for another GPU resource than the slices ``placement`` puts its replicas on
    (``controlplane.domain.workload_slices``); each logged too."""
    found = workload_slice_findings(observed.models, placement, mig_strategy)
    for finding in found:
        log.warning("replicas.slice_mismatch", extra={"finding": finding})
    return replace(observed, notes=(*observed.notes, *found)) if found else observed


def noting_graceful_stops(observed: ObservedState, specs: tuple[ModelSpec, ...]) -> ObservedState:
    """The snapshot with a note, each tick until it is fixed, for every model workload whose
    pods may drop requests when a scale-down stops them (``domain.graceful_stop``); each
    logged too."""
    found = graceful_stop_findings(observed.models, {s.name: s for s in specs})
    for finding in found:
        log.warning("replicas.ungraceful_stop", extra={"finding": finding})
    return replace(observed, notes=(*observed.notes, *found)) if found else observed


def reconcile_once(deps: ReconcileDeps, config: ReconcileConfig) -> TickReport:
    """One tick, recorded; its report carries the wall seconds it took up to its record's
    save (``TickReport.duration_s``)."""
    began_s = time.perf_counter()
    started_at = deps.clock.now()
    try:
        observed = noting_unserved(deps.reader.snapshot(), config.specs)
    except (TransientError, PermanentError) as error:
        report = timed(_unobserved(deps, started_at, error), began_s)
        deps.decisions.save_tick(report)
        return report
    if not observed.synced:
        report = _skipped(deps, observed, SNAPSHOT_UNSYNCED)
    elif (started_at - observed.oldest_at).total_seconds() > config.max_staleness_s:
        report = _skipped(deps, observed, SNAPSHOT_STALE)
    else:
        deps.decisions.save_observed(observed)
        report = _decide_and_apply(deps, config, observed, started_at)
    report = timed(report, began_s)
    deps.decisions.save_tick(report)
    return report


def timed(report: TickReport, began_s: float) -> TickReport:
    """``report`` with the wall seconds since ``began_s`` (a ``time.perf_counter`` reading)."""
    return replace(report, duration_s=max(0.0, time.perf_counter() - began_s))


def _profiles(deps: ReconcileDeps, config: ReconcileConfig, memory: GuardMemory,
              now: datetime) -> tuple[tuple[FleetModel, ...], tuple[ProfileCorrection, ...]]:
    """The models with their profiles corrected from the observed samples (the offline ones
    when correction is off or nothing provides samples)."""
    correction = config.profile_correction
    if correction is None or deps.samples is None:
        return config.models, tuple(offline(m.spec.name, m.shape.per_replica_rps)
                                    for m in config.models)
    samples = deps.samples.profile_samples(now - timedelta(seconds=correction.window_s), now)
    models, profiles = corrected_models(config.models, samples, dict(memory.profile_rps), now,
                                        correction)
    for p in profiles:
        if p.is_corrected:
            log.info("profile.corrected", extra={"model": p.model, "offline_rps": p.offline_rps,
                                                 "corrected_rps": round(p.corrected_rps, 3),
                                                 "reason": p.reason})
    return models, profiles


@functools.cache
def _warn_hints_unread(mode: str) -> None:
    """Log once per process (and policy mode) that the stored hints shape nothing: only the
    predictive policy reads them."""
    log.warning("hints.unread", extra={
        "policy": mode, "error": f"demand hints are stored but the {mode} policy never reads "
                                 "them: they only shape the predictive policy's demand"})


def decide(deps: ReconcileDeps, config: ReconcileConfig, observed: ObservedState,
           now: datetime) -> TickDecision:
    """Calibrated forecasts floored by the demand hints, each model's profile corrected from
    observed metrics, the core's sizing (replica bounds, paused models held), PlanFleet for the
    hot replicas, the ladder's warm GPUs, the guards."""
    calibrated = calibrated_latest(deps.forecasts.latest_forecasts(), deps.ledger, deps.history,
                                   config.calibration, now)
    hints = () if deps.hints is None else deps.hints.active_hints(now)
    demand_policy = config.policy.demand
    if hints and demand_policy.mode != PREDICTIVE:
        _warn_hints_unread(demand_policy.mode)
    hinted = hinted_inputs(calibrated, hints, now, config.hint_lead_s, demand_policy.lookahead_s)
    memory = deps.decisions.last_guard_memory()
    models, profiles = _profiles(deps, config, memory, now)
    pauses = () if deps.pauses is None else deps.pauses.paused_models()
    sizing = size(observed, hinted.forecasts, models, config.policy, config.budgets, now,
                  config.pools, hinted.floors, held(pauses, observed), hinted.calibrated)
    # the replica targets say which demands a hint raised, and a hint capped: served of announced
    sizing, capped = hints_capped(sizing, hinted, models, demand_policy)
    deps.placement.sync_inventory(observed)
    # the ladder's warm GPUs go with the request: the plan PlanFleet stores and serves under
    # its revision is the one this tick records and bills
    placement = deps.placement.plan_fleet(placement_demands(sizing, models),
                                          tuple(m.spec for m in models), config.pools,
                                          ladder_warm(sizing, models))
    decision = settle(observed, sizing, placement, config.pools, config.policy, config.budgets,
                      memory, now)
    if config.node_configs is not None and deps.mig is not None and deps.sharing is not None:
        nodes = node_config_plan(decision.placement, observed, config.pools,
                                 deps.mig.in_flight(), decision.memory, config.node_configs, now)
        decision = replace(decision, memory=nodes.memory,
                           plan=decision.plan.with_node_actions(nodes.actions, nodes.skipped))
    if deps.mig is not None:  # a pool keeps its running re-layout's surge nodes
        plan, memory = held_for_surges(decision.plan, decision.memory, deps.mig.surge_floors())
        decision = replace(decision, plan=plan, memory=memory)
    since_at = now - timedelta(seconds=ACCURACY_WINDOW_S)
    unplaced = (*unplaced_notes(decision.desired, decision.placement),
                *no_pool_notes(config.specs, config.pools, decision.placement))
    for line in unplaced:
        log.warning("model.unplaced", extra={"finding": line})
    for line in decision.notes:  # settle's: replicas of several GPUs no node has room for
        log.warning("model.stranded", extra={"finding": line})
    return replace(decision, profiles=profiles,
                   memory=replace(decision.memory, profile_rps=in_use(profiles)),
                   # the models managed now: a removed model's records stay, as history
                   accuracy=tuple(a for a in accuracy(deps.ledger.issued_since(since_at), since_at)
                                  if a.model in {m.name for m in config.specs}),
                   notes=(*(c.note() for c in capped), *(h.note() for h in budget_holds(
                       sizing, config.budgets, frozenset(c.model for c in capped))),
                       *paused_hint_notes(pauses, observed, hinted.floors), *unplaced,
                       *decision.notes),
                   replicas=model_replicas(decision.desired, decision.warm_replicas(),
                                           config.specs, pauses))


def _decide_and_apply(deps: ReconcileDeps, config: ReconcileConfig, observed: ObservedState,
                      started_at: datetime) -> TickReport:
    now = started_at
    decision = decide(deps, config, observed, now)
    plan = decision.plan
    log.info("plan.created", extra={"actions": len(plan.actions), "skipped": len(plan.skipped)})
    observed = noting_workload_slices(observed, decision.placement, config.mig_strategy)
    observed = noting_graceful_stops(observed, config.specs)
    if decision.notes:  # e.g. a demand hint the pools or GPU budgets capped
        observed = replace(observed, notes=(*observed.notes, *decision.notes))
    outcomes: tuple[ActionOutcome, ...] = ()
    status = TickStatus.DRY_RUN
    # read after deciding, as the last thing before acting: a pause set while the tick decided
    # holds it
    paused = None if deps.fleet_pause is None else deps.fleet_pause.fleet_pause()
    if paused is not None:
        log.warning("tick.fleet_paused", extra={"reason": paused.tick_reason(),
                                                "actions": len(plan.actions)})
    elif not config.dry_run:
        # saved before acting: a tick killed between acting and saving its record still holds
        # the cooldowns and disruption budget of every change it planned
        deps.decisions.save_intent(now, decision.memory)
        outcomes = _apply(deps, plan)
        status = TickStatus.APPLIED
    # the next tick's guards count only the changes made (none in a dry run: a faithful
    # preview), and remember every recommendation (what was wanted, made or not)
    return TickReport(now, deps.clock.now(), status,
                      "" if paused is None else paused.tick_reason(), observed, decision.demands,
                      decision.placement, plan, outcomes, made(decision.memory, plan, outcomes),
                      decision.profiles, decision.accuracy, replicas=decision.replicas,
                      fleet_pause=paused)
