"""Ports: the small interfaces the core talks through. Kubernetes, the simulator and test fakes
implement them; the reconcile loop only sees these."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from controlplane.autoscaling.issued import IssuedForecast
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.demand import Demand
from controlplane.domain.desired import PoolSpec
from controlplane.domain.fleet_pause import FleetPause
from controlplane.domain.guards import GuardMemory
from controlplane.domain.hints import DemandHint
from controlplane.domain.lease import LeaseRecord
from controlplane.domain.mig_layout import NodeMigLayout
from controlplane.domain.mig_relayout import MigRelayout
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ModelLoad, ObservedState
from controlplane.domain.pause import ModelPause
from controlplane.domain.placement import FleetPlacement, WarmGpus
from controlplane.domain.profile import ProfileCorrection, ProfileSample
from controlplane.domain.sharing_config import SharingLayout
from controlplane.domain.tick import TickReport
from forecaster.types import Forecast, TrafficSeries


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall time, timezone-aware UTC (virtual in the simulator)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic scale, for intervals and cooldowns."""
        ...


class ClusterReader(Protocol):
    def snapshot(self) -> ObservedState:
        """The full observed state. Raises ``TransientError`` when the source is unreachable,
        ``PermanentError`` when it refuses the read (e.g. 403: missing RBAC); returns
        ``synced=False`` when it is reachable but not yet consistent."""
        ...


class LoadSource(Protocol):
    def measure(self, ready_replicas: Mapping[str, int], at: datetime) -> dict[str, ModelLoad]:
        """Each model's load at ``at`` (one call per snapshot); ``ready_replicas`` gives the
        capacity. A model it could not measure has ``demand_rps`` None, never 0; it does not
        raise for a source that is down."""
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
        self, demands: Sequence[Demand], specs: Sequence[ModelSpec], pools: Sequence[PoolSpec],
        warm: Sequence[WarmGpus] | None = None,
    ) -> FleetPlacement:
        """Pack the models' demand onto GPUs; infeasible models come back in ``unplaced``.
        ``warm``: the warm GPUs the caller decided, which the plan keeps and prices (the plan
        the engine stores and serves is then the one the caller records); None: the engine
        sizes its own."""
        ...


class ForecastReader(Protocol):
    def latest_forecasts(self) -> Mapping[str, Forecast]:
        """Newest stored forecast per model."""
        ...


class RateHistory(Protocol):
    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries:
        """Observed demand of one model in [since_at, until_at): mean per step, NaN where
        nothing was observed."""
        ...


class ProfileSamples(Protocol):
    def profile_samples(self, since_at: datetime,
                        until_at: datetime) -> Mapping[str, Sequence[ProfileSample]]:
        """Each model's samples (demand per ready replica, latency) observed in
        (since_at, until_at], oldest first; a model without any is absent."""
        ...


class DemandHints(Protocol):
    def active_hints(self, now: datetime) -> Sequence[DemandHint]:
        """The demand hints that have not ended by ``now``."""
        ...


class ModelPauses(Protocol):
    def paused_models(self) -> Sequence[ModelPause]:
        """The models ``headroom models pause`` paused (and no resume has resumed)."""
        ...


class FleetPauses(Protocol):
    def fleet_pause(self) -> FleetPause | None:
        """The fleet's pause (``headroom fleet pause``), None when it is not paused."""
        ...


class ModelNames(Protocol):
    def model_names(self) -> Sequence[str]:
        """The names the models table lists now."""
        ...


class ReplicaBounds(Protocol):
    def replica_bounds(self, model: str) -> tuple[int | None, int | None]:
        """The model's ``min_replicas`` and ``max_replicas`` as the models table holds them now
        (None: unset; a model not listed has neither)."""
        ...


class LastObservedState(Protocol):
    def last_observed(self) -> ObservedState | None:
        """The observed state the newest recorded tick saw; None before any tick."""
        ...


class LastObservations(Protocol):
    def last_observed_at(self, model: str) -> datetime | None:
        """When the newest stored observation of the model's load was made; None if never."""
        ...


class RecentLoad(Protocol):
    def peak_rps_since(self, model: str, since_at: datetime) -> float | None:
        """The highest load (requests/s) observed of the model at or after ``since_at``; None
        when none was observed then (never a 0 made up for a gap)."""
        ...


class ProfileReader(Protocol):
    def last_profiles(self) -> tuple[ProfileCorrection, ...]:
        """The profiles (offline and corrected) the newest deciding tick sized its models with;
        empty when no tick recorded any."""
        ...


class ForecastLedger(Protocol):
    """The first step of every forecast the reconcile loop acted on, and its outcome. A
    leader's ledger may be fenced by its term: each write then raises ``Fenced`` (nothing
    written) once another term claimed the store."""

    def record_issued(self, issued: Sequence[IssuedForecast]) -> None:
        """Store each record whose (model, target_at) is not stored yet; a stored one is kept
        as it is."""
        ...

    def record_scored(self, scored: Sequence[IssuedForecast]) -> None:
        """Store the observed rate of each record not scored yet; a scored one is kept."""
        ...

    def issued_since(self, since_at: datetime) -> tuple[IssuedForecast, ...]:
        """Records with target_at >= since_at, oldest first."""
        ...

    def prune_issued(self, before_at: datetime) -> int:
        """Delete records with target_at < before_at; returns how many went."""
        ...


class DecisionStore(Protocol):
    def save_observed(self, observed: ObservedState, fence: int | None = None) -> None:
        """Persist the inventory and one load observation per model (forecast history).
        Fenced as ``save_tick``."""
        ...

    def save_tick(self, report: TickReport, fence: int | None = None) -> int:
        """Persist a tick report (plan, actions, outcomes) atomically; returns the tick id.
        With ``fence``, only while it is the newest fencing token (``Fenced`` otherwise)."""
        ...

    def save_intent(self, started_at: datetime, memory: GuardMemory,
                    writer: str | None = None, fence: int | None = None) -> None:
        """Before an applying tick acts: persist the guard memory it leaves if every planned
        change is made, so a tick killed before ``save_tick`` still holds its cooldowns.
        Fenced as ``save_tick``."""
        ...

    def claim_fence(self, holder: str, now: datetime) -> int:
        """The next fencing token of the tick records, for a new leadership term: saves under
        any older token are refused from now on."""
        ...

    def last_guard_memory(self) -> GuardMemory:
        """Guard memory stored with the newest tick, or the intent a newer tick saved before it
        acted and left no record; empty when neither."""
        ...


class SharingActuator(Protocol):
    def apply_sharing(self, node: str, layout: SharingLayout) -> ActionOutcome:
        """Absolute target (MPS / time-slicing replicas, or exclusive); idempotent. An unknown
        node, or MPS on a MIG-enabled node, is a non-retryable failed outcome."""
        ...


class MigRelayoutActuator(Protocol):
    def start_relayout(self, node: str, layout: NodeMigLayout, reason: str) -> ActionOutcome:
        """Begin a persisted, resumable re-layout of ``node`` (returns at once). Starting the
        same target twice is a no-op; a node already at the layout is ok without a relayout."""
        ...

    def advance(self) -> tuple[MigRelayout, ...]:
        """Move every active relayout on as far as the cluster allows now; returns them."""
        ...

    def in_flight(self) -> dict[str, NodeMigLayout]:
        """The target layout of every relayout started and not ended, by node (read-only)."""
        ...

    def surge_floors(self) -> Mapping[str, int]:
        """The size each pool is held at by its active relayouts' surge nodes, by pool (none:
        no floor); the node-pool actuator applies no smaller size (read-only)."""
        ...


class RelayoutStore(Protocol):
    def save_relayout(self, relayout: MigRelayout) -> None:
        """Persist one relayout step (insert or update by id), atomically."""
        ...

    def active_relayouts(self) -> tuple[MigRelayout, ...]:
        """Relayouts not in a terminal phase, oldest first."""
        ...

    def relayouts_of(self, node: str) -> tuple[MigRelayout, ...]:
        """Every relayout of one node, oldest first."""
        ...


class LeaderElector(Protocol):
    def try_acquire_or_renew(self, now: datetime, monotonic_s: float | None = None) -> bool:
        """Take or keep leadership; True when this replica may actuate until the renew
        deadline. Losing a write race (HTTP 409) or an unreachable API is False. With
        ``monotonic_s`` (``Clock.monotonic()``) another holder's expiry is judged on it, so a
        step of the wall clock (NTP) cannot take the lease from a live leader."""
        ...

    def is_leader(self, now: datetime) -> bool:
        """Still within the renew deadline of the last successful acquire or renew."""
        ...

    def leads_until_at(self, now: datetime) -> datetime | None:
        """The instant this replica stops leading: the renew deadline of its last successful
        acquire or renew; ``now`` when it does not lead; None when its leadership has no end
        (it contends with no one, or writes nothing). Leader-gated Kubernetes requests end
        by it (adapters/k8s/fence.py)."""
        ...

    def release(self) -> None:
        """Step down so another replica takes over at once (no-op when not leader)."""
        ...

    def term(self) -> int | None:
        """Which of this replica's leadership terms it is in: a number that changes each time
        it takes the lease (creates it or takes it over), not when it renews; its tick records
        are fenced per term (``store/tick_fence.py``). None: it contends with no one."""
        ...


class LeaseStore(Protocol):
    """Where a lease lives outside Kubernetes (the SQL store). Each write is atomic and says
    whether it won; errors are ``TransientError``."""

    def read_lease(self, name: str) -> LeaseRecord | None:
        """The stored record (``resource_version`` = its write count); None when none exists."""
        ...

    def create_lease(self, name: str, record: LeaseRecord) -> bool:
        """Store the first record; False when another process stored one first."""
        ...

    def replace_lease(self, name: str, record: LeaseRecord) -> bool:
        """Store ``record`` if the stored one still has ``record.resource_version``; False when
        another process wrote since (compare-and-swap)."""
        ...


class ModelLoader(Protocol):
    def load_model(self, model: str) -> ActionOutcome:
        """Load (or reload) a model on an inference server; idempotent."""
        ...

    def unload_model(self, model: str) -> ActionOutcome:
        """Unload a model; unloading a model that is not loaded is ok."""
        ...
