"""Ports: the small interfaces the core talks through. Kubernetes, the simulator and test fakes
implement them; the reconcile loop only sees these."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from controlplane.domain.actions import ActionOutcome
from controlplane.domain.demand import Demand
from controlplane.domain.desired import PoolSpec
from controlplane.domain.guards import GuardMemory
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedState
from controlplane.domain.placement import FleetPlacement
from controlplane.domain.tick import TickReport
from forecaster.types import Forecast


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall time, timezone-aware UTC (virtual in the simulator)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic scale, for intervals and cooldowns."""
        ...


class ClusterReader(Protocol):
    def snapshot(self) -> ObservedState:
        """The full observed state. Raises ``TransientError`` when the source is unreachable;
        returns ``synced=False`` when it is reachable but not yet consistent."""
        ...


class NodePoolActuator(Protocol):
    def set_size(self, pool: str, nodes: int) -> ActionOutcome:
        """Absolute target; idempotent. An unknown pool is a non-retryable failed outcome."""
        ...


class ReplicaActuator(Protocol):
    def set_replicas(self, model: str, replicas: int) -> ActionOutcome:
        """Absolute target; idempotent. An unknown model is a non-retryable failed outcome."""
        ...


class PlacementClient(Protocol):
    def sync_inventory(self, observed: ObservedState) -> None:
        """Give the placement engine the full node/GPU inventory (idempotent snapshot)."""
        ...

    def plan_fleet(
        self, demands: Sequence[Demand], specs: Sequence[ModelSpec], pools: Sequence[PoolSpec]
    ) -> FleetPlacement:
        """Pack the models' demand onto GPUs; infeasible models come back in ``unplaced``."""
        ...


class ForecastReader(Protocol):
    def latest_forecasts(self) -> Mapping[str, Forecast]:
        """Newest stored forecast per model."""
        ...


class DecisionStore(Protocol):
    def save_observed(self, observed: ObservedState) -> None:
        """Persist the inventory and one load observation per model (forecast history)."""
        ...

    def save_tick(self, report: TickReport) -> int:
        """Persist a tick report (plan, actions, outcomes) atomically; returns the tick id."""
        ...

    def last_guard_memory(self) -> GuardMemory:
        """Guard memory stored with the newest tick, or empty."""
        ...
