"""A tick whose report could not be saved after its actions were applied: the loop keeps that
tick's guard memory in process, its guards use it next tick, and the report is saved late."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import OperationalError
from tick_builders import sample_tick_report

from controlplane.decision_retry import RetryingDecisionStore
from controlplane.domain.actions import ActionOutcome, SetReplicas
from controlplane.domain.guards import COOLDOWN, GuardMemory, Recommendation
from controlplane.domain.mig_layout import NodeMigLayout
from controlplane.domain.mig_relayout import MigRelayout
from controlplane.domain.observed import ObservedState
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.metrics import ControlPlaneMetrics
from controlplane.ports import DecisionStore, MigRelayoutActuator
from controlplane.runtime import SimRuntime
from controlplane.serve_k8s import leader_tick
from controlplane.settings import load_settings
from controlplane.store import Store
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
MODEL = "llama-3-70b"  # whole H100s, the only model on the H100 pool
COOLDOWN_S = 600.0


class FailingSaves:
    """A real store whose next ``failures`` save_tick calls raise, as a locked or lost database
    would, before reaching it."""

    def __init__(self, store: DecisionStore, failures: int) -> None:
        self.store = store
        self.failures = failures

    def save_observed(self, observed: ObservedState, fence: int | None = None) -> None:
        self.store.save_observed(observed, fence)

    def save_tick(self, report: TickReport, fence: int | None = None) -> int:
        if self.failures > 0:
            self.failures -= 1
            raise OperationalError("INSERT INTO ticks", {}, Exception("database is locked"))
        return self.store.save_tick(report, fence)

    def save_intent(self, started_at: datetime, memory: GuardMemory,
                    writer: str | None = None, fence: int | None = None) -> None:
        self.store.save_intent(started_at, memory, writer, fence)

    def claim_fence(self, holder: str, now: datetime) -> int:
        return self.store.claim_fence(holder, now)

    def last_guard_memory(self) -> GuardMemory:
        return self.store.last_guard_memory()


class Flat:
    """A forecast of MODEL at ``level_rps``, rising ``factor`` x after the first minute."""

    def __init__(self, now: datetime, level_rps: float, factor: float = 1.0) -> None:
        values = tuple(level_rps * (factor if i >= 1 else 1.0) for i in range(20))
        self.forecast = Forecast(MODEL, now, 60, values, values, "test")

    def latest_forecasts(self) -> Mapping[str, Forecast]:
        return {MODEL: self.forecast}


def _settled_runtime(url: str, failures: int) -> tuple[SimRuntime, RetryingDecisionStore]:
    """Settled for 15 minutes; replica scale-downs wait COOLDOWN_S after a scale-up, and the
    store's next ``failures`` saves fail."""
    settings = load_settings(db={"url": url}, sim={"history_s": 6 * 3600})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), T0)
    runtime.advance(15 * 60)
    policy = runtime.config.policy
    limits = replace(policy.replica_limits, cooldown_s=COOLDOWN_S, stabilization_s=0.0)
    runtime.config = replace(runtime.config, policy=replace(policy, replica_limits=limits))
    decisions = RetryingDecisionStore(FailingSaves(runtime.store, failures))
    runtime.deps = replace(runtime.deps, decisions=decisions)
    return runtime, decisions


def decisions_of(runtime: SimRuntime) -> RetryingDecisionStore:
    decisions = runtime.deps.decisions
    assert isinstance(decisions, RetryingDecisionStore)
    return decisions


def _level_rps(runtime: SimRuntime) -> float:
    seen = runtime.cluster.snapshot().model(MODEL)
    assert seen is not None
    return seen.demand_rps


def _replicas_target(runtime: SimRuntime) -> int:
    seen = runtime.cluster.snapshot().model(MODEL)
    assert seen is not None
    return seen.replicas_target


def _scale_up_whose_save_fails(runtime: SimRuntime) -> int:
    """A tick raises MODEL's replicas for a forecast rise and its save fails (the loop still
    gets its report, marked unsaved); then the forecast is flat again and 30 s pass. Returns
    the raised replica target."""
    level = _level_rps(runtime)
    before = _replicas_target(runtime)
    runtime.advance(30, run_jobs=False)  # past the settled runtime's last recorded tick
    runtime.deps = replace(runtime.deps, forecasts=Flat(runtime.clock.now(), level, factor=3.0))
    seen: list[tuple[TickReport, bool]] = []
    runtime.on_tick = lambda report, saved: seen.append((report, saved))
    report = runtime.tick()
    assert seen == [(report, False)] and decisions_of(runtime).unsaved is report
    runtime.on_tick = None
    raised = _replicas_target(runtime)
    assert raised > before  # applied before the save failed
    runtime.deps = replace(runtime.deps, forecasts=Flat(runtime.clock.now(), level))
    runtime.advance(30, run_jobs=False)
    return raised


def test_a_cooldown_started_by_a_tick_whose_save_failed_holds_on_the_next_tick(
        sqlite_url: str) -> None:
    runtime, _ = _settled_runtime(sqlite_url, failures=1)
    raised = _scale_up_whose_save_fails(runtime)
    report = runtime.tick()
    assert report.plan is not None
    assert [(s.kept, s.reason) for s in report.plan.skipped if s.target == MODEL] == [
        (raised, COOLDOWN)]
    assert not [a for a in report.plan.actions if isinstance(a, SetReplicas)
                and a.model == MODEL]
    assert _replicas_target(runtime) == raised


def test_the_report_whose_save_failed_is_saved_before_the_next_one(sqlite_url: str) -> None:
    runtime, decisions = _settled_runtime(sqlite_url, failures=1)
    ticks_before = runtime.store.counts()["ticks"]
    _scale_up_whose_save_fails(runtime)
    runtime.tick()
    assert decisions.unsaved is None
    assert runtime.store.counts()["ticks"] == ticks_before + 2
    changes = runtime.store.last_guard_memory().changes_for(f"model/{MODEL}")
    assert [c.delta > 0 for c in changes] == [True]


def test_while_saves_keep_failing_the_newest_unsaved_memory_is_used(sqlite_url: str) -> None:
    runtime, decisions = _settled_runtime(sqlite_url, failures=3)
    raised = _scale_up_whose_save_fails(runtime)
    first_unsaved = decisions.unsaved
    report = runtime.tick()  # the retry of the first report and this tick's own save fail
    assert decisions.unsaved is report and report is not first_unsaved
    assert runtime.store.counts()["ticks"] > 0
    assert _replicas_target(runtime) == raised  # the cooldown held on the unsaved memory
    kept = decisions.last_guard_memory().changes_for(f"model/{MODEL}")
    assert [c.delta > 0 for c in kept] == [True]


def _report_at(at: datetime, value: int) -> TickReport:
    report = sample_tick_report()
    return replace(report, started_at=at, finished_at=at,
                   guard_memory=GuardMemory(((f"model/{MODEL}", (Recommendation(at, value),)),)))


def test_an_unsaved_report_older_than_the_stored_newest_is_dropped_not_saved(
        sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    decisions = RetryingDecisionStore(FailingSaves(store, failures=1))
    with pytest.raises(OperationalError):
        decisions.save_tick(_report_at(T0, 5))
    assert decisions.last_guard_memory().for_target(f"model/{MODEL}")[0].value == 5
    store.save_tick(_report_at(T0 + timedelta(minutes=1), 7))  # another leader's tick
    assert decisions.last_guard_memory().for_target(f"model/{MODEL}")[0].value == 7
    decisions.save_tick(_report_at(T0 + timedelta(minutes=2), 8))
    assert decisions.unsaved is None and store.counts()["ticks"] == 2
    assert store.last_guard_memory().for_target(f"model/{MODEL}")[0].value == 8


class CountingRelayouts:
    """The runtime's MIG re-layout actuator, counting ``advance`` calls."""

    def __init__(self, inner: MigRelayoutActuator) -> None:
        self.inner = inner
        self.advanced = 0

    def in_flight(self) -> dict[str, NodeMigLayout]:
        return self.inner.in_flight()

    def surge_floors(self) -> Mapping[str, int]:
        return self.inner.surge_floors()

    def start_relayout(self, node: str, layout: NodeMigLayout, reason: str) -> ActionOutcome:
        return self.inner.start_relayout(node, layout, reason)

    def advance(self) -> tuple[MigRelayout, ...]:
        self.advanced += 1
        return self.inner.advance()


def test_the_leaders_tick_whose_save_fails_is_counted_unsaved_and_moves_relayouts_on(
        sqlite_url: str) -> None:
    runtime, decisions = _settled_runtime(sqlite_url, failures=1)
    assert runtime.deps.mig is not None
    relayouts = CountingRelayouts(runtime.deps.mig)
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    runtime.advance(30, run_jobs=False)
    run = leader_tick(runtime.deps, runtime.config, relayouts, metrics)
    assert not run.saved and decisions.unsaved is run.report
    assert relayouts.advanced == 1
    assert registry.get_sample_value("headroom_reconcile_unsaved_ticks_total") == 1.0
    assert registry.get_sample_value("headroom_reconcile_ticks_total",
                                     {"status": run.report.status.value}) == 1.0
    runtime.advance(30, run_jobs=False)
    again = leader_tick(runtime.deps, runtime.config, relayouts, metrics)
    assert again.saved and decisions.unsaved is None and relayouts.advanced == 2
    assert registry.get_sample_value("headroom_reconcile_unsaved_ticks_total") == 1.0


class BrokenForecasts:
    def latest_forecasts(self) -> Mapping[str, Forecast]:
        raise RuntimeError("forecast table unreadable")


def test_an_error_other_than_the_save_fails_the_tick_counted_and_still_moves_relayouts_on(
        sqlite_url: str) -> None:
    runtime, decisions = _settled_runtime(sqlite_url, failures=0)
    assert runtime.deps.mig is not None
    relayouts = CountingRelayouts(runtime.deps.mig)
    runtime.deps = replace(runtime.deps, forecasts=BrokenForecasts())
    runtime.advance(30, run_jobs=False)
    registry = CollectorRegistry()
    run = leader_tick(runtime.deps, runtime.config, relayouts, ControlPlaneMetrics(registry))
    assert run.saved and (run.report.status, run.report.reason) == (TickStatus.FAILED, "error")
    assert run.report.observed.notes == ("RuntimeError: forecast table unreadable",)
    assert registry.get_sample_value("headroom_reconcile_ticks_total",
                                     {"status": "failed"}) == 1.0
    assert registry.get_sample_value("headroom_reconcile_unsaved_ticks_total") == 0.0
    assert relayouts.advanced == 1 and decisions.unsaved is None
