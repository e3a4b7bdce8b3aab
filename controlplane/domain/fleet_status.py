"""What ``headroom status`` shows: the store's picture of the fleet and the loop (pure values),
and whether the loop is healthy at a given wall time (a pure judgement: ``now`` comes in).

The values are what the store records, no more: the last tick's observed state (or, when the
last tick could not read the fleet, the newest one that could, named by its tick), each model's
newest forecast, the newest plan with its actions and held-back changes, the fleet lease and
the MIG re-layouts in flight. ``controlplane.store.status_reader`` reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from controlplane.domain.failing_actions import FailingAction
from controlplane.domain.fleet_pause import FleetPause
from controlplane.domain.forecast_accuracy import ForecastAccuracy
from controlplane.domain.hints import DemandHint
from controlplane.domain.observed import ObservedPool
from controlplane.domain.pause import ModelPause
from controlplane.domain.plan import KeptReplicas
from controlplane.domain.profile import ProfileCorrection
from controlplane.domain.tick_writers import LeadershipChange

#: the forecast point shown per model: the step ending this long after the forecast's origin
FORECAST_AHEAD_S = 1200


@dataclass(frozen=True, slots=True)
class TickSummary:
    tick_id: int
    started_at: datetime
    finished_at: datetime
    status: str  # applied | dry_run | skipped | failed
    reason: str
    gpus_ready: int
    demand_rps: float
    capacity_rps: float
    synced: bool
    notes: tuple[str, ...]
    ticks: int  # ticks the store holds
    writer: str | None = None  # the process that wrote it (domain.tick_writers); None: unknown


@dataclass(frozen=True, slots=True)
class ForecastPoint:
    method: str
    fallback_reason: str
    computed_at: datetime
    origin_at: datetime
    target_at: datetime  # start of the step shown
    ahead_s: int  # from the origin to the end of the step shown
    p50_rps: float
    p90_rps: float
    #: what was done to the model's history on the way (``Forecast.notes``), one line each
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelStatus:
    name: str
    tenant: str
    observed: bool  # the last tick saw the model
    demand_measured: bool
    # the requests that arrived per second (ObservedModel.arrivals_rps); None: not seen, or its
    # load could not be measured
    observed_rps: float | None
    replicas_ready: int | None
    replicas_pending: int | None
    replicas_target: int | None  # the target the fleet reported (e.g. a Deployment's replicas)
    capacity_rps: float | None
    forecast: ForecastPoint | None
    pause: ModelPause | None = None  # `headroom models pause`: its replicas held
    # the replica target that tick wanted (what headroom_model_replicas{kind="target"} says),
    # before the guards pace the way there; None: not recorded (the tick decided nothing or
    # did not size the model)
    replicas_desired: int | None = None
    # the demand hints' floor on the forecast step shown (``autoscaling.hints.status_floors``)
    # when above its p50 or p90: the loop sizes from the floor; None: no hint raises it
    hint_floor_rps: float | None = None
    listed: bool = True  # False: not in the models table, only seen in the fleet's tick
    # requests waiting in its replicas' queues as that tick read them; None: not read
    queued_requests: float | None = None
    # the KV cache usage (0-1) of its replicas as that tick read it; None: not read
    kv_cache_usage: float | None = None
    # its request latency as that tick read it (the mean, a quantile or time to first token, as
    # configured); None: not read
    latency_ms: float | None = None
    latency_slo_ms: float | None = None  # the models table's; None: not listed
    # of its pending replicas, those whose pods no node has bound as the tick read them; None:
    # not read (a fleet that does not report pods)
    replicas_unscheduled: int | None = None


@dataclass(frozen=True, slots=True)
class PoolStatus:
    pool: ObservedPool  # as the tick saw it: nodes ready, pending and its target
    price_per_gpu_hour: float | None  # None: the store has no price of its product
    price_source: str


@dataclass(frozen=True, slots=True)
class FleetBill:
    """What the pools bill as the tick saw them: GPUs of their ready and provisioning nodes, at
    their products' prices (the ``headroom_fleet_cost_usd_per_hour`` gauges' sum, the
    dashboard's "$ / h now"); a plan's $/h is only the GPUs it places and keeps warm."""

    gpus: int
    usd_per_hour: float  # of the priced pools
    unpriced: tuple[str, ...]  # pools billing GPUs whose product the store has no price of


def fleet_bill(pools: Sequence[PoolStatus]) -> FleetBill:
    priced = [p for p in pools if p.price_per_gpu_hour is not None]
    return FleetBill(
        sum(p.pool.gpus_billed for p in pools),
        round(sum(p.pool.gpus_billed * (p.price_per_gpu_hour or 0.0) for p in priced), 6),
        tuple(p.pool.name for p in pools if p.price_per_gpu_hour is None and p.pool.gpus_billed))


@dataclass(frozen=True, slots=True)
class PlannedAction:
    kind: str
    target: str
    from_value: int
    to_value: int
    reason: str
    ok: bool | None  # None: no outcome recorded (a dry run, or not applied)
    message: str


@dataclass(frozen=True, slots=True)
class HeldChange:
    target: str
    kept: int
    wanted: int
    reason: str


@dataclass(frozen=True, slots=True)
class PlanStatus:
    plan_id: int
    tick_id: int
    created_at: datetime
    revision: int
    dry_run: bool
    # the price of the GPUs the plan counts: placed, warm and those of ``kept``
    cost_per_hour: float
    gpus_placed: int
    warm_gpus: int
    unplaced: tuple[str, ...]
    actions: tuple[PlannedAction, ...]
    held: tuple[HeldChange, ...]
    # replicas running beyond the placement (kept by a guard over the target, or held while
    # unplaced); none on a plan stored before migration 0024
    kept: tuple[KeptReplicas, ...] = ()

    @property
    def kept_gpus(self) -> float:
        return sum(k.gpus for k in self.kept)


@dataclass(frozen=True, slots=True)
class LeaseStatus:
    name: str
    holder: str  # "" = released
    acquired_at: datetime | None
    renewed_at: datetime | None
    duration_s: int
    transitions: int


@dataclass(frozen=True, slots=True)
class PlacementStatus:
    """The store's placement journal: what every placement server on the store follows."""

    bindings: int  # workloads bound now
    nodes: int  # the nodes they are bound on
    version: int  # raised by every change (Place, Release, drops, PlanFleet)
    plan_revision: int  # of the current fleet plan (0: none)
    changed_by: str  # the process that changed it last ("" = never changed)
    changed_at: datetime | None


@dataclass(frozen=True, slots=True)
class RelayoutStatus:
    relayout_id: str
    node: str
    pool: str
    product: str
    from_config: str
    to_config: str
    phase: str
    started_at: datetime
    updated_at: datetime
    deadline_at: datetime | None
    wait_reason: str
    alert: str


@dataclass(frozen=True, slots=True)
class FleetStatus:
    store: str  # the redacted URL
    last_tick: TickSummary | None
    # the tick whose observed fleet the models and pools show: the last one, or when it could
    # not read the fleet (failed, unsynced) the newest one before it that could
    fleet_tick_id: int | None
    fleet_at: datetime | None
    lease: LeaseStatus | None
    models: tuple[ModelStatus, ...]
    pools: tuple[PoolStatus, ...]
    plan: PlanStatus | None
    relayouts: tuple[RelayoutStatus, ...]
    # each model's throughput per replica the newest deciding tick sized it with: offline, or
    # corrected online from observed latency (autoscaling.profile_correction)
    profiles: tuple[ProfileCorrection, ...] = ()
    # demand announced ahead (headroom hint) not ended at the store's now (``store_clock``):
    # floors on forecasts
    hints: tuple[DemandHint, ...] = ()
    # the placement journal (None: a store older than migration 0008)
    placement: PlacementStatus | None = None
    # how each model's forecasts did over the hour before the last tick (the first steps the
    # reconcile loop scored: WAPE of p50, p90 coverage)
    accuracy: tuple[ForecastAccuracy, ...] = ()
    # the newest change of the ticks' writer, i.e. of the leading replica (None: none seen)
    leadership: LeadershipChange | None = None
    # a tick newer than the last one recorded that saved only its guard intent (None: none)
    unrecorded: UnrecordedTick | None = None
    # the newest fencing token of the leader's store writes (None: none claimed, or a store
    # older than migration 0018)
    fence: FenceStatus | None = None
    # the newest plan's actions that failed on every deciding tick for a while
    # (``domain.failing_actions``)
    failing: tuple[FailingAction, ...] = ()
    # the fleet's pause (``headroom fleet pause``; None: not paused, or a store older than
    # migration 0029)
    fleet_pause: FleetPause | None = None


@dataclass(frozen=True, slots=True)
class FenceStatus:
    """The newest fencing token (``store/tick_fence.py``): the leadership term whose store writes
    are accepted; saves under an older token are refused."""

    token: int
    holder: str
    claimed_at: datetime


@dataclass(frozen=True, slots=True)
class UnrecordedTick:
    """A tick that saved its guard intent and no record yet (``store/guard_intent.py``): in
    progress, or killed after it may have acted."""

    started_at: datetime
    writer: str | None


@dataclass(frozen=True, slots=True)
class Problem:
    # no_tick | stale_tick | future_tick | failed_tick | unplaced_models | failing_actions
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Health:
    checked_at: datetime
    max_tick_age_s: float
    tick_age_s: float | None  # wall time since the last tick started (negative: in the future)
    problems: tuple[Problem, ...]
    # the loop's liveness judged by the held ``sim-fleet`` lease (``running_fleet_age_s``):
    # wall seconds since its renewal; None: judged by ``tick_age_s``
    lease_age_s: float | None = None

    @property
    def healthy(self) -> bool:
        return not self.problems


def age_s(at: datetime | None, now: datetime) -> float | None:
    return None if at is None else (now - at).total_seconds()


def running_fleet_age_s(lease: LeaseStatus | None, now: datetime) -> float | None:
    """Wall seconds since a running simulated fleet renewed its ``sim-fleet`` lease (``lease``:
    ``demo`` / ``serve --backend sim`` renew it by the wall clock, a few times per duration);
    None when the store has none, it was released (a clean stop) or its renewal is more than
    its duration away from ``now`` (expired: the holder stopped or crashed; or a clock is off
    by more than that)."""
    if lease is None or not lease.holder or lease.renewed_at is None:
        return None
    renewed_age_s = (now - lease.renewed_at).total_seconds()
    return renewed_age_s if abs(renewed_age_s) <= lease.duration_s else None


def judge_health(status: FleetStatus, now: datetime, max_tick_age_s: float) -> Health:
    """Unhealthy when there is no tick, the last one failed, the newest plan leaves a model
    unplaced (it serves none of its demand, or is held where it was), an action has failed on
    every deciding tick for a while (``failing_actions``: retried each tick and failing each
    tick, while the ticks are ``applied``), or it started more than
    ``max_tick_age_s`` before ``now`` -- or more than that after it, unless a simulated fleet
    (the ``sim-fleet`` lease of ``demo`` / ``serve --backend sim``) drives the store: a real
    loop's tick from the future says a clock is wrong, and it would keep a stopped loop
    looking alive until the wall clock passed it.

    A simulated fleet's ticks are on its own clock (days behind the wall clock for a demo
    started with ``--start`` in the past or resumed later): while it holds its lease
    (``running_fleet_age_s``) the loop is alive when the lease was renewed within
    ``max_tick_age_s``, whatever its ticks' times; once the lease is released or expired its
    last tick is judged as any other."""
    tick = status.last_tick
    if tick is None:
        return Health(now, max_tick_age_s, None, (Problem(
            "no_tick", f"store {status.store} has no reconcile tick yet"),))
    tick_age_s = (now - tick.started_at).total_seconds()
    lease_age_s = running_fleet_age_s(status.lease, now)
    problems: list[Problem] = []
    if lease_age_s is not None and status.lease is not None:
        if lease_age_s > max_tick_age_s:
            problems.append(Problem("stale_tick", f"the simulated fleet's lease "
                                    f"{status.lease.name} was renewed {lease_age_s:.0f} s ago, "
                                    f"more than {max_tick_age_s:g} s (its ticks are on its own "
                                    "clock)"))
    elif tick_age_s > max_tick_age_s:
        problems.append(Problem("stale_tick", f"the last tick (#{tick.tick_id}) started "
                                f"{tick_age_s:.0f} s ago, more than {max_tick_age_s:g} s"))
    if -tick_age_s > max_tick_age_s and status.lease is None:
        problems.append(Problem("future_tick", f"the last tick (#{tick.tick_id}) started "
                                f"{-tick_age_s:.0f} s after this clock's now, more than "
                                f"{max_tick_age_s:g} s: the writer's clock or this one is "
                                "wrong (a stopped loop looks alive until the wall clock "
                                "passes its last tick)"))
    if tick.status == "failed":
        problems.append(Problem("failed_tick", f"the last tick (#{tick.tick_id}) failed: "
                                f"{tick.reason or 'no reason recorded'}"))
    plan = status.plan
    if plan is not None and plan.unplaced:
        problems.append(Problem("unplaced_models", f"the newest plan (#{plan.plan_id}) leaves "
                                f"{len(plan.unplaced)} model(s) unplaced: "
                                f"{'; '.join(plan.unplaced)}"))
    if plan is not None and status.failing:
        problems.append(Problem("failing_actions", "; ".join(
            f.describe(plan.created_at) for f in status.failing)))
    return Health(now, max_tick_age_s, tick_age_s, tuple(problems), lease_age_s)


def forecast_point(method: str, fallback_reason: str, computed_at: datetime, origin_at: datetime,
                   step_s: int, p50: list[float], p90: list[float],
                   notes: tuple[str, ...] = ()) -> ForecastPoint | None:
    """The step ending ``FORECAST_AHEAD_S`` after the origin (the last step of a shorter
    forecast); None for an empty forecast."""
    if not p50 or not p90 or step_s <= 0:
        return None
    index = min(max(FORECAST_AHEAD_S // step_s - 1, 0), len(p50) - 1, len(p90) - 1)
    return ForecastPoint(method, fallback_reason, computed_at, origin_at,
                         origin_at + timedelta(seconds=index * step_s), (index + 1) * step_s,
                         float(p50[index]), float(p90[index]), notes)
