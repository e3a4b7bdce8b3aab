"""A tick saves the guard memory it leaves before it acts (migration 0017), so a process killed
between acting and saving the tick's record still holds that tick's cooldowns: the next tick,
in a new process, starts from it; a saved record replaces it; a dry run saves none."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from sqlalchemy import inspect
from test_reconcile_save_failure import MODEL, Flat, _level_rps, _replicas_target, _settled_runtime
from tick_builders import T0, sample_tick_report

from controlplane.decision_retry import RetryingDecisionStore
from controlplane.domain.actions import SetReplicas
from controlplane.domain.guards import COOLDOWN, GuardMemory, Recommendation
from controlplane.domain.observed import ObservedState
from controlplane.domain.tick import TickReport
from controlplane.ports import DecisionStore
from controlplane.runtime import SimRuntime
from controlplane.store import Store, downgrade, upgrade

KEY = f"model/{MODEL}"


class ProcessKilled(BaseException):
    """The process dies (SIGKILL, OOM): nothing after it runs, nothing catches it."""


class KilledBeforeSave:
    """A real store; the process is killed when the tick's record is about to be saved, after
    the tick acted."""

    def __init__(self, store: DecisionStore) -> None:
        self.store = store

    def save_observed(self, observed: ObservedState, fence: int | None = None) -> None:
        self.store.save_observed(observed, fence)

    def save_intent(self, started_at: datetime, memory: GuardMemory,
                    writer: str | None = None, fence: int | None = None) -> None:
        self.store.save_intent(started_at, memory, writer, fence)

    def claim_fence(self, holder: str, now: datetime) -> int:
        return self.store.claim_fence(holder, now)

    def save_tick(self, report: TickReport, fence: int | None = None) -> int:
        raise ProcessKilled

    def last_guard_memory(self) -> GuardMemory:
        return self.store.last_guard_memory()


def _scale_up_then_killed(runtime: SimRuntime) -> int:
    """A tick raises MODEL's replicas for a forecast rise and the process is killed before the
    tick's record is saved; a new process (no memory in process) runs the loop on, with the
    forecast flat again, 30 s later. Returns the raised replica target."""
    level = _level_rps(runtime)
    before = _replicas_target(runtime)
    ticks_before = runtime.store.counts()["ticks"]
    runtime.advance(30, run_jobs=False)
    runtime.deps = replace(runtime.deps, forecasts=Flat(runtime.clock.now(), level, factor=3.0),
                           decisions=RetryingDecisionStore(KilledBeforeSave(runtime.store)))
    with pytest.raises(ProcessKilled):
        runtime.tick()
    raised = _replicas_target(runtime)
    assert raised > before  # the fleet changed; the store has no record of it
    assert runtime.store.counts()["ticks"] == ticks_before
    runtime.deps = replace(runtime.deps, forecasts=Flat(runtime.clock.now(), level),
                           decisions=RetryingDecisionStore(runtime.store))
    runtime.advance(30, run_jobs=False)
    return raised


def test_a_cooldown_started_by_a_tick_killed_before_its_record_was_saved_holds_in_the_next_process(
        store_url: str) -> None:
    runtime, _ = _settled_runtime(store_url, failures=0)
    raised = _scale_up_then_killed(runtime)
    report = runtime.tick()
    assert report.plan is not None
    assert [(s.kept, s.reason) for s in report.plan.skipped if s.target == MODEL] == [
        (raised, COOLDOWN)]
    assert not [a for a in report.plan.actions
                if isinstance(a, SetReplicas) and a.model == MODEL]
    assert _replicas_target(runtime) == raised
    # the record of the next tick carries the killed tick's change on
    changes = runtime.store.last_guard_memory().changes_for(KEY)
    assert [c.delta > 0 for c in changes] == [True]


def test_the_killed_tick_is_named_in_a_warning_by_the_next_tick(
        store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime, _ = _settled_runtime(store_url, failures=0)
    _scale_up_then_killed(runtime)
    killed_at = runtime.clock.now() - timedelta(seconds=30)
    with caplog.at_level(logging.WARNING, logger="headroom.reconcile"):
        runtime.tick()
    unrecorded = [r for r in caplog.records if r.getMessage() == "tick.unrecorded"]
    assert [r.__dict__["started_at"] for r in unrecorded] == [killed_at.isoformat()]


def test_a_tick_that_saved_its_record_leaves_no_warning_for_the_next(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime, _ = _settled_runtime(sqlite_url, failures=0)
    with caplog.at_level(logging.WARNING, logger="headroom.reconcile"):
        runtime.advance(120, run_jobs=False)
    assert runtime.store.counts()["ticks"] > 0
    assert not [r for r in caplog.records if r.getMessage() == "tick.unrecorded"]


def _memory(at: datetime, value: int) -> GuardMemory:
    return GuardMemory(((KEY, (Recommendation(at, value),)),))


def _report(at: datetime, value: int) -> TickReport:
    return replace(sample_tick_report(), started_at=at, finished_at=at,
                   guard_memory=_memory(at, value))


def _newest_value(store: Store) -> int:
    return store.last_guard_memory().for_target(KEY)[0].value


def test_a_saved_record_replaces_the_intent_of_its_own_tick(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_intent(T0, _memory(T0, 9))  # every planned change counted as made
    assert _newest_value(store) == 9
    store.save_tick(_report(T0, 5))  # what the tick made
    assert _newest_value(store) == 5
    store.engine.dispose()


def test_an_intent_newer_than_the_newest_record_is_the_newest_memory_and_an_older_one_is_not(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    assert store.last_guard_memory() == GuardMemory()
    store.save_tick(_report(T0, 5))
    store.save_intent(T0 + timedelta(seconds=30), _memory(T0 + timedelta(seconds=30), 7))
    assert _newest_value(store) == 7
    store.save_tick(_report(T0 + timedelta(seconds=60), 6))
    assert _newest_value(store) == 6
    store.save_intent(T0 + timedelta(seconds=90), _memory(T0 + timedelta(seconds=90), 8))
    store.save_intent(T0 + timedelta(seconds=120), _memory(T0 + timedelta(seconds=120), 4))
    assert _newest_value(store) == 4  # one intent row, the newest
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM guard_intents").scalar() == 1
    store.engine.dispose()


def test_an_intent_counts_until_a_record_is_saved_after_it_whatever_the_clocks_say(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_tick(_report(T0, 5))
    ahead = T0 + timedelta(hours=1)  # a replica whose clock runs an hour ahead was killed
    store.save_intent(ahead, _memory(ahead, 7))
    assert _newest_value(store) == 7
    store.save_tick(_report(T0 + timedelta(seconds=30), 6))  # the next leader's, on time
    assert _newest_value(store) == 6
    store.engine.dispose()


def test_the_intent_names_its_writer(sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    RetryingDecisionStore(store, writer="replica-a").save_intent(T0, _memory(T0, 3))
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT writer FROM guard_intents").scalar() == (
            "replica-a")
    store.engine.dispose()


def test_a_dry_run_tick_saves_no_intent(sqlite_url: str) -> None:
    runtime, _ = _settled_runtime(sqlite_url, failures=0)
    with runtime.store.engine.begin() as connection:
        connection.exec_driver_sql("DELETE FROM guard_intents")
    runtime.config = replace(runtime.config, dry_run=True)
    runtime.advance(60, run_jobs=False)
    with runtime.store.engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM guard_intents").scalar() == 0


def test_migration_0017_adds_the_intent_table_to_a_0016_store_and_drops_it_on_downgrade(
        store_url: str) -> None:
    store = Store.open(store_url)
    upgrade(store.engine)  # a tick saved by today's tables, then the store taken back to 0016
    store.save_tick(_report(T0, 5))
    downgrade(store.engine, "0016")
    assert not inspect(store.engine).has_table("guard_intents")
    upgrade(store.engine)
    assert _newest_value(store) == 5  # no intent yet: the newest record's
    store.save_intent(T0 + timedelta(seconds=30), _memory(T0 + timedelta(seconds=30), 7))
    assert _newest_value(store) == 7
    downgrade(store.engine, "0016")
    assert not inspect(store.engine).has_table("guard_intents")
    assert store.counts()["ticks"] == 1
    store.engine.dispose()
