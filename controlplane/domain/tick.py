"""TickReport: everything one reconcile tick saw, decided and did (pure value, stored as-is)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from controlplane.domain.actions import ActionOutcome
from controlplane.domain.demand import Demand
from controlplane.domain.fleet_pause import FleetPause
from controlplane.domain.forecast_accuracy import ForecastAccuracy
from controlplane.domain.guards import GuardMemory
from controlplane.domain.model_replicas import ModelReplicas
from controlplane.domain.observed import ObservedState
from controlplane.domain.placement import FleetPlacement
from controlplane.domain.plan import Plan
from controlplane.domain.profile import ProfileCorrection


class TickStatus(StrEnum):
    APPLIED = "applied"
    DRY_RUN = "dry_run"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class TickReport:
    started_at: datetime
    finished_at: datetime
    status: TickStatus
    reason: str
    observed: ObservedState
    demands: tuple[Demand, ...]
    placement: FleetPlacement | None
    plan: Plan | None
    outcomes: tuple[ActionOutcome, ...]
    guard_memory: GuardMemory
    profiles: tuple[ProfileCorrection, ...] = ()  # each model's profile the tick sized with
    accuracy: tuple[ForecastAccuracy, ...] = ()  # each model's recent forecast accuracy
    # each sized model's replica target, warm replicas, pause and bounds (deciding ticks only;
    # exported as metrics, not stored)
    replicas: tuple[ModelReplicas, ...] = ()
    # the process that records it (the leading replica's Lease holder identity), stamped by the
    # loop that saves it (decision_retry.RetryingDecisionStore); None: not said
    writer: str | None = None
    # wall seconds the tick took to observe, decide and act (time.perf_counter, taken by the
    # loop that ran it: the clock is business time, and a VirtualClock stands still while a
    # simulated tick runs); None: not measured
    duration_s: float | None = None
    # the fleet's pause that made a deciding tick a dry run (``headroom fleet pause``; its
    # reason says it too); None: not paused, or not read
    fleet_pause: FleetPause | None = None
