"""The guard memory a tick leaves: what was wanted always, as changes only what was done."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from controlplane.domain.actions import ActionOutcome, SetReplicas
from controlplane.domain.guards import DISRUPTION_BUDGET, STABILIZATION_WINDOW
from controlplane.domain.observed import ObservedState
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.reconcile import reconcile_once
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.sim.cluster import SimCluster
from controlplane.store import Store

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SEEN_REPLICAS = 40  # far over what the demand needs: every tick wants to scale it down
BUDGET = 2  # replicas removed per disruption window


class OverReplicated:
    """The simulated fleet with one model seen running ``SEEN_REPLICAS`` replicas."""

    def __init__(self, cluster: SimCluster, model: str) -> None:
        self.cluster, self.model = cluster, model

    def snapshot(self) -> ObservedState:
        seen = self.cluster.snapshot()
        return replace(seen, models=tuple(
            replace(m, replicas_ready=SEEN_REPLICAS, replicas_target=SEEN_REPLICAS)
            if m.name == self.model else m for m in seen.models))


class ConflictingReplicas:
    """A replica actuator whose every write loses a conflict (HTTP 409), as outcome_of says."""

    def set_replicas(self, model: str, replicas: int) -> ActionOutcome:
        return ActionOutcome(model, False, "conflict, re-read next tick: HTTP 409: the object "
                             "has been modified", retryable=True)


def _runtime(url: str, dry_run: bool) -> SimRuntime:
    """A runtime on a new store whose replica scale-downs have a disruption budget and no
    stabilization window (its first tick may scale down), seeing its first model
    over-replicated."""
    settings = load_settings(db={"url": url}, safety={"dry_run": dry_run},
                             sim={"history_s": 6 * 3600, "true_throughput_factor": {}})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), T0)
    policy = runtime.config.policy
    runtime.config = replace(runtime.config, policy=replace(policy, replica_limits=replace(
        policy.replica_limits, disruption_budget=BUDGET, stabilization_s=0.0)))
    model = runtime.config.specs[0].name
    runtime.deps = replace(runtime.deps, reader=OverReplicated(runtime.cluster, model))
    runtime.refresh_forecasts()
    return runtime


def _tick_at(runtime: SimRuntime, at_s: float) -> TickReport:
    runtime.clock.advance(at_s - runtime.clock.monotonic())
    return reconcile_once(runtime.deps, runtime.config)


def _replicas_of(report: TickReport, model: str) -> list[SetReplicas]:
    assert report.plan is not None
    return [a for a in report.plan.actions if isinstance(a, SetReplicas) and a.model == model]


def test_a_second_dry_run_tick_plans_what_a_live_tick_would_plan(tmp_path: Path) -> None:
    dry = _runtime(f"sqlite:///{tmp_path / 'dry.db'}", dry_run=True)
    first, second = _tick_at(dry, 0), _tick_at(dry, 30)
    live = _runtime(f"sqlite:///{tmp_path / 'live.db'}", dry_run=False)
    fresh = _tick_at(live, 30)
    model = dry.config.specs[0].name
    assert second.status is TickStatus.DRY_RUN and fresh.status is TickStatus.APPLIED
    assert _replicas_of(first, model) == [
        SetReplicas(model, SEEN_REPLICAS, SEEN_REPLICAS - BUDGET, _replicas_of(first, model)[0]
                    .reason)]
    # nothing was removed: the budget is untouched, the preview the same as the first
    assert second.plan is not None and fresh.plan is not None
    assert second.plan.actions == fresh.plan.actions
    assert second.plan.skipped == fresh.plan.skipped
    assert _replicas_of(second, model) == _replicas_of(first, model)


def test_a_dry_run_remembers_what_it_wanted_but_no_change(tmp_path: Path) -> None:
    runtime = _runtime(f"sqlite:///{tmp_path / 'dry.db'}", dry_run=True)
    _tick_at(runtime, 0)
    memory = runtime.store.last_guard_memory()
    model = runtime.config.specs[0].name
    assert memory.changes == ()
    assert memory.for_target(f"model/{model}")  # the stabilization window's recommendation


def test_a_scale_down_that_lost_a_conflict_is_retried_without_spending_the_budget(
        tmp_path: Path) -> None:
    runtime = _runtime(f"sqlite:///{tmp_path / 'live.db'}", dry_run=False)
    runtime.deps = replace(runtime.deps, replicas=ConflictingReplicas())
    model = runtime.config.specs[0].name
    first = _tick_at(runtime, 0)
    assert [o.ok for o in first.outcomes if o.target == model] == [False]
    retry = _tick_at(runtime, 30)
    assert _replicas_of(retry, model) == _replicas_of(first, model)
    assert retry.plan is not None
    assert [(s.kept, s.reason) for s in retry.plan.skipped if s.target == model] == [
        (SEEN_REPLICAS - BUDGET, DISRUPTION_BUDGET)]  # the budget of this window, not the next
    assert runtime.store.last_guard_memory().changes_for(f"model/{model}") == ()


def test_a_configured_replica_disruption_budget_holds_a_scale_down_in_the_live_loop(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    settings = load_settings(db={"url": url}, safety={"replica_disruption_budget": BUDGET,
                                                      "disruption_window_s": 45},
                             sim={"history_s": 6 * 3600, "true_throughput_factor": {}})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), T0)
    model = runtime.config.specs[0].name
    runtime.deps = replace(runtime.deps, reader=OverReplicated(runtime.cluster, model))
    runtime.refresh_forecasts()
    new = _tick_at(runtime, 0)  # a new store: the replica stabilization window (60 s) first
    first, held, next_window = _tick_at(runtime, 60), _tick_at(runtime, 90), _tick_at(runtime, 110)
    for report in (new, first, held, next_window):
        assert report.status is TickStatus.APPLIED and report.plan is not None
    assert _replicas_of(new, model) == []
    assert new.plan is not None
    assert [(s.kept, s.reason) for s in new.plan.skipped if s.target == model] == [
        (SEEN_REPLICAS, STABILIZATION_WINDOW)]
    assert [a.to_replicas for a in _replicas_of(first, model)] == [SEEN_REPLICAS - BUDGET]
    assert _replicas_of(held, model) == []  # this window's budget is spent
    assert held.plan is not None
    assert [(s.kept, s.reason) for s in held.plan.skipped if s.target == model] == [
        (SEEN_REPLICAS, DISRUPTION_BUDGET)]
    assert [a.to_replicas for a in _replicas_of(next_window, model)] == [SEEN_REPLICAS - BUDGET]
