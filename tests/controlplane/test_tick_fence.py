"""Tick records and guard intents are saved under a fencing token (migration 0018): each new
leadership term claims the next one, and a deposed leader's late save, under an older token, is
refused in the same transaction, so it can never become the store's newest guard memory."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import OperationalError
from test_guard_intent import _memory, _newest_value, _report
from test_reconcile_save_failure import (
    FailingSaves,
    Flat,
    _level_rps,
    _replicas_target,
    _settled_runtime,
)
from tick_builders import T0

from controlplane.autoscaling.issued import IssuedForecast
from controlplane.decision_retry import RecordFenced, RetryingDecisionStore
from controlplane.domain.errors import Fenced
from controlplane.domain.tick import TickStatus
from controlplane.ports import ForecastLedger
from controlplane.recorded_tick import FENCED
from controlplane.runtime import SimRuntime
from controlplane.store import Store, downgrade, tick_fence, upgrade
from controlplane.store.ledger import SqlForecastLedger


class Term:
    """A replica's leadership term, as its elector's ``term`` reports it."""

    def __init__(self, term: int | None = 1) -> None:
        self.term = term

    def __call__(self) -> int | None:
        return self.term


def _at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _ticks(store: Store) -> int:
    return store.counts()["ticks"]


def test_each_claim_is_the_next_token_and_a_save_under_an_older_one_is_refused_whole(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    assert store.claim_fence("replica-a", T0) == 1
    store.save_tick(_report(_at(0), 5), fence=1)
    store.save_intent(_at(30), _memory(_at(30), 6), fence=1)
    assert store.claim_fence("replica-b", _at(40)) == 2
    with pytest.raises(Fenced) as refused:
        store.save_tick(_report(_at(60), 7), fence=1)
    assert str(refused.value) == (
        "leader's writes: fenced: this process's token 1 is not the store's newest (2, claimed "
        "by replica-b); another replica has led since")
    with pytest.raises(Fenced):
        store.save_intent(_at(90), _memory(_at(90), 8), fence=1)
    assert _ticks(store) == 1 and _newest_value(store) == 6  # neither was saved
    store.save_tick(_report(_at(120), 9), fence=2)
    assert _newest_value(store) == 9
    store.save_tick(_report(_at(150), 10))  # unfenced: a writer that contends with no one
    assert _newest_value(store) == 10
    store.engine.dispose()


def test_a_deposed_leaders_late_record_is_refused_and_the_new_leaders_memory_stays_newest(
        store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    store = Store.open(store_url, migrate=True)
    old = RetryingDecisionStore(store, writer="replica-a", term=Term(1))
    new = RetryingDecisionStore(store, writer="replica-b", term=Term(1))
    old.save_tick(_report(_at(0), 5))  # claims token 1
    new.save_tick(_report(_at(60), 7))  # took the Lease over: claims token 2
    with caplog.at_level(logging.INFO, logger="headroom.reconcile"), \
            pytest.raises(RecordFenced) as refused:
        old.save_tick(_report(_at(30), 6))  # stalled since before the take-over
    assert refused.value.report.started_at == _at(30)
    assert old.unsaved is None  # dropped, never retried
    assert _ticks(store) == 2 and _newest_value(store) == 7
    assert [r.getMessage() for r in caplog.records] == ["tick.record_fenced"]
    store.engine.dispose()


def test_a_kept_record_of_a_deposed_leader_is_dropped_not_saved_late(sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    old = RetryingDecisionStore(FailingSaves(store, failures=1), writer="replica-a",
                                term=Term(1))
    with pytest.raises(OperationalError):
        old.save_tick(_report(_at(0), 5))  # claimed token 1; the save itself failed: kept
    assert old.unsaved is not None
    RetryingDecisionStore(store, writer="replica-b", term=Term(1)).save_tick(_report(_at(60), 7))
    with pytest.raises(RecordFenced):
        old.save_tick(_report(_at(90), 8))
    assert old.unsaved is None and _ticks(store) == 1 and _newest_value(store) == 7


def test_a_new_term_of_the_same_process_claims_a_new_token_and_a_renewal_does_not(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    store = Store.open(sqlite_url, migrate=True)
    term = Term(1)
    decisions = RetryingDecisionStore(store, writer="replica-a", term=term)
    with caplog.at_level(logging.INFO, logger="headroom.reconcile"):
        decisions.save_tick(_report(_at(0), 5))
        decisions.save_intent(_at(30), _memory(_at(30), 6))
        decisions.save_tick(_report(_at(30), 6))
        term.term = 2  # lost the Lease and took it again
        decisions.save_tick(_report(_at(60), 7))
    claimed = [r.__dict__["token"] for r in caplog.records
               if r.getMessage() == "tick.fence_claimed"]
    assert claimed == [1, 2]
    with store.engine.connect() as connection:
        assert connection.execute(text("SELECT token, holder FROM tick_fences")).one() == (
            2, "replica-a")


def test_a_writer_with_no_term_claims_nothing(sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    RetryingDecisionStore(store, writer="dry-run", term=Term(None)).save_tick(_report(_at(0), 5))
    RetryingDecisionStore(store).save_tick(_report(_at(30), 6))
    assert _ticks(store) == 2
    with store.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM tick_fences")).scalar() == 0


def test_a_tick_whose_intent_is_fenced_off_fails_before_it_acts_and_saves_nothing(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime, _ = _settled_runtime(sqlite_url, failures=0)
    runtime.deps = replace(runtime.deps, decisions=RetryingDecisionStore(
        runtime.store, writer="replica-a", term=Term(1)))
    runtime.advance(30, run_jobs=False)
    assert runtime.tick().status is TickStatus.APPLIED  # this replica's term claims token 1
    assert runtime.store.claim_fence("replica-b", runtime.clock.now()) == 2  # a take-over
    ticks_before = _ticks(runtime.store)
    level, before = _level_rps(runtime), _replicas_target(runtime)
    runtime.deps = replace(runtime.deps, forecasts=Flat(runtime.clock.now(), level, factor=3.0))
    with caplog.at_level(logging.ERROR, logger="headroom.reconcile"):
        report = runtime.tick()
    assert (report.status, report.reason) == (TickStatus.FAILED, FENCED)
    assert _replicas_target(runtime) == before  # the rise it wanted was not applied
    assert _ticks(runtime.store) == ticks_before
    failed = [r for r in caplog.records if r.getMessage() == "tick.failed"]
    assert [r.__dict__["reason"] for r in failed] == [FENCED]


def _leading(runtime: SimRuntime, writer: str) -> RetryingDecisionStore:
    """``runtime``'s loop as serve wires it for a replica that leads (term 1): its tick records,
    observations and forecast-calibration ledger all saved under the term's token."""
    decisions = RetryingDecisionStore(runtime.store, writer=writer, term=Term(1))
    runtime.deps = replace(runtime.deps, decisions=decisions, ledger=SqlForecastLedger(
        runtime.store.engine, fence=lambda: decisions.fence_token(runtime.clock.now())))
    return decisions


def _stored(runtime: SimRuntime) -> tuple[int, int, tuple[IssuedForecast, ...]]:
    """Ticks, observation rows, and every ledger record (as a fresh process reads it)."""
    with runtime.store.engine.connect() as connection:
        observations = connection.execute(text("SELECT count(*) FROM observations")).scalar_one()
    ledger = SqlForecastLedger(runtime.store.engine)
    return (_ticks(runtime.store), observations,
            ledger.issued_since(runtime.clock.now() - timedelta(days=30)))


def test_a_deposed_leaders_tick_saves_neither_observations_nor_ledger_rows(
        sqlite_url: str) -> None:
    runtime, _ = _settled_runtime(sqlite_url, failures=0)
    _leading(runtime, "replica-a")
    runtime.advance(30, run_jobs=False)
    assert runtime.tick().status is TickStatus.APPLIED  # this replica's term claims token 1
    assert runtime.store.claim_fence("replica-b", runtime.clock.now()) == 2  # a take-over
    before = _stored(runtime)
    runtime.advance(30, run_jobs=False)
    level = _level_rps(runtime)  # a new forecast: a leader records its first step
    runtime.deps = replace(runtime.deps, forecasts=Flat(runtime.clock.now(), level, factor=3.0))
    report = runtime.tick()
    assert (report.status, report.reason) == (TickStatus.FAILED, FENCED)
    assert _stored(runtime) == before


def _keys(records: Sequence[IssuedForecast]) -> set[tuple[str, datetime]]:
    return {(r.model, r.target_at) for r in records}


class DeposedWhileRecording:
    """A ledger whose leader stalls before recording the tick's new forecasts, while another
    replica takes the store over (claims the next token)."""

    def __init__(self, ledger: ForecastLedger, store: Store, at: datetime) -> None:
        self.ledger, self.store, self.at = ledger, store, at

    def record_issued(self, issued: Sequence[IssuedForecast]) -> None:
        self.store.claim_fence("replica-b", self.at)
        self.ledger.record_issued(issued)

    def record_scored(self, scored: Sequence[IssuedForecast]) -> None:
        self.ledger.record_scored(scored)

    def issued_since(self, since_at: datetime) -> tuple[IssuedForecast, ...]:
        return self.ledger.issued_since(since_at)

    def prune_issued(self, before_at: datetime) -> int:
        return self.ledger.prune_issued(before_at)


def test_a_leader_deposed_before_it_records_its_forecasts_records_none_and_does_not_act(
        sqlite_url: str) -> None:
    runtime, _ = _settled_runtime(sqlite_url, failures=0)
    _leading(runtime, "replica-a")
    runtime.advance(30, run_jobs=False)
    assert runtime.tick().status is TickStatus.APPLIED  # claims token 1
    runtime.advance(30, run_jobs=False)
    level, replicas = _level_rps(runtime), _replicas_target(runtime)
    runtime.deps = replace(runtime.deps, forecasts=Flat(runtime.clock.now(), level, factor=3.0),
                           ledger=DeposedWhileRecording(runtime.deps.ledger, runtime.store,
                                                        runtime.clock.now()))
    ticks, _, records = _stored(runtime)
    report = runtime.tick()
    assert (report.status, report.reason) == (TickStatus.FAILED, FENCED)
    # its observation and scores went in before the claim; its new records did not
    ticks_after, _, records_after = _stored(runtime)
    assert ticks_after == ticks and _keys(records_after) == _keys(records)
    assert _replicas_target(runtime) == replicas  # the rise it wanted was not applied


@pytest.mark.postgres
def test_on_postgresql_a_save_in_flight_holds_off_a_claim_until_it_commits(
        postgres_url: str) -> None:
    store = Store.open(postgres_url, migrate=True)
    assert store.claim_fence("replica-a", T0) == 1
    with store.engine.connect() as saving, saving.begin():
        tick_fence.check(saving, 1)  # replica-a's save, not yet committed
        with store.engine.connect() as claiming:
            claiming.execute(text("SET lock_timeout = '200ms'"))
            with pytest.raises(OperationalError, match="lock timeout"):
                tick_fence.claim(claiming, "replica-b", _at(30))
            claiming.rollback()
    # committed: the claim goes through, and replica-a's next save is refused
    assert store.claim_fence("replica-b", _at(30)) == 2
    with pytest.raises(Fenced):
        store.save_tick(_report(_at(60), 5), fence=1)
    store.engine.dispose()


def test_migration_0018_adds_the_fence_table_to_a_0017_store_and_drops_it_on_downgrade(
        store_url: str) -> None:
    store = Store.open(store_url)
    upgrade(store.engine)  # a tick saved by today's tables, then the store taken back to 0017
    store.save_tick(_report(T0, 5))
    downgrade(store.engine, "0017")
    assert not inspect(store.engine).has_table("tick_fences")
    upgrade(store.engine)
    assert store.claim_fence("replica-a", T0) == 1
    store.save_tick(_report(_at(30), 6), fence=1)
    downgrade(store.engine, "0017")
    assert not inspect(store.engine).has_table("tick_fences") and _ticks(store) == 2
    store.engine.dispose()


class SlowClaims:
    """A store whose claims are counted; the first one waits until released."""

    def __init__(self) -> None:
        self.claims = 0
        self.first_in = threading.Event()
        self.second_in = threading.Event()
        self.release = threading.Event()

    def claim_fence(self, holder: str, now: datetime) -> int:
        self.claims += 1
        if self.claims == 1:
            self.first_in.set()
            self.release.wait(timeout=30)
        else:
            self.second_in.set()
        return self.claims


def test_two_threads_of_one_term_claim_one_token_between_them() -> None:
    claims = SlowClaims()
    decisions = RetryingDecisionStore(claims, writer="replica-a",  # type: ignore[arg-type]
                                      term=Term(1))
    tokens: list[int | None] = []
    first = threading.Thread(target=lambda: tokens.append(decisions.fence_token(T0)))
    second = threading.Thread(target=lambda: tokens.append(decisions.fence_token(T0)))
    first.start()
    assert claims.first_in.wait(timeout=30)
    second.start()
    # the second waits for the first's claim rather than making its own, which would fence the
    # first one's saves off
    assert not claims.second_in.wait(timeout=0.5)
    claims.release.set()
    first.join(timeout=30)
    second.join(timeout=30)
    assert claims.claims == 1 and tokens == [1, 1]
