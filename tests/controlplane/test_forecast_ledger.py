"""Issued forecasts persist in the SQL store (SQLite and PostgreSQL) and its migrations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import inspect

import controlplane.store.ledger as ledger_module
from controlplane.autoscaling.issued import IssuedForecast
from controlplane.domain.errors import Fenced
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.ledger import SqlForecastLedger

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _record(model: str, minute: int, p50: float = 10.0) -> IssuedForecast:
    return IssuedForecast(model, T0 + timedelta(minutes=minute), 60, p50, p50 * 1.2, 0.05)


def test_issued_forecasts_round_trip_oldest_first(store_url: str) -> None:
    ledger = SqlForecastLedger(Store.open(store_url, migrate=True).engine)
    later, earlier, other = _record("a", 5), _record("a", 0), _record("b", 0, p50=3.5)
    ledger.record_issued([later, earlier, other])
    assert ledger.issued_since(T0) == (earlier, other, later)
    assert ledger.issued_since(T0 + timedelta(minutes=1)) == (later,)


def test_recording_a_forecast_twice_keeps_the_first_record(store_url: str) -> None:
    ledger = SqlForecastLedger(Store.open(store_url, migrate=True).engine)
    first = _record("a", 0)
    ledger.record_issued([first])
    ledger.record_issued([_record("a", 0, p50=99.0), _record("a", 1)])
    assert ledger.issued_since(T0) == (first, _record("a", 1))


def test_a_scored_record_is_never_scored_again(store_url: str) -> None:
    ledger = SqlForecastLedger(Store.open(store_url, migrate=True).engine)
    ledger.record_issued([_record("a", 0), _record("a", 1)])
    scored_at = T0 + timedelta(minutes=2)
    first = _record("a", 0).scored(12.5, scored_at)
    gap = _record("a", 1).scored(None, scored_at)
    ledger.record_scored([first, gap])
    ledger.record_scored([_record("a", 0).scored(50.0, scored_at + timedelta(minutes=1))])
    assert ledger.issued_since(T0) == (first, gap)


def test_pruning_drops_the_records_older_than_the_window(store_url: str) -> None:
    ledger = SqlForecastLedger(Store.open(store_url, migrate=True).engine)
    ledger.record_issued([_record("a", m) for m in range(5)])
    assert ledger.prune_issued(T0 + timedelta(minutes=3)) == 3
    assert [r.target_at for r in ledger.issued_since(T0)] == [
        T0 + timedelta(minutes=3), T0 + timedelta(minutes=4)]
    assert ledger.prune_issued(T0 + timedelta(minutes=3)) == 0


def test_the_issued_forecasts_table_migrates_up_and_down(store_url: str) -> None:
    engine = Store.open(store_url, migrate=True).engine
    assert "issued_forecasts" in inspect(engine).get_table_names()
    downgrade(engine, "0002")
    assert "issued_forecasts" not in inspect(engine).get_table_names()
    assert "mig_relayouts" in inspect(engine).get_table_names()
    upgrade(engine)
    assert "issued_forecasts" in inspect(engine).get_table_names()


def test_a_ledger_sees_what_another_process_recorded_scored_and_pruned(store_url: str) -> None:
    engine = Store.open(store_url, migrate=True).engine
    reader, writer = SqlForecastLedger(engine), SqlForecastLedger(engine)
    reader.record_issued([_record("a", 0)])
    assert reader.issued_since(T0) == (_record("a", 0),)
    writer.record_issued([_record("a", 1)])
    assert reader.issued_since(T0) == (_record("a", 0), _record("a", 1))
    scored = _record("a", 0).scored(9.0, T0 + timedelta(minutes=2))
    writer.record_scored([scored])
    assert reader.issued_since(T0) == (scored, _record("a", 1))
    writer.prune_issued(T0 + timedelta(minutes=1))
    writer.record_issued([_record("a", 2)])  # as many rows as before the prune
    assert reader.issued_since(T0) == (_record("a", 1), _record("a", 2))


def test_a_tick_reads_only_the_records_recorded_or_scored_since_the_last_read(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # every tick scores and records a few records; re-reading the whole window (4,000 records
    # per model over 14 days) each time made a tick of a large fleet take longer than its
    # interval
    engine = Store.open(store_url, migrate=True).engine
    reader, writer = SqlForecastLedger(engine), SqlForecastLedger(engine)
    history = [_record(model, minute) for minute in range(50) for model in ("a", "b")]
    writer.record_issued(history)
    assert len(reader.issued_since(T0)) == 100
    made: list[IssuedForecast] = []

    def counted(*args: Any) -> IssuedForecast:
        made.append(IssuedForecast(*args))
        return made[-1]

    monkeypatch.setattr(ledger_module, "IssuedForecast", counted)
    scored = _record("a", 49).scored(11.0, T0 + timedelta(minutes=51))
    writer.record_scored([scored])
    writer.record_issued([_record("a", 50), _record("b", 50)])
    writer.prune_issued(T0 + timedelta(minutes=10))
    got = reader.issued_since(T0)
    assert len(made) <= 3  # the two new records and the scored one, not the 82 others
    expected = sorted([*history[20:], _record("a", 50), _record("b", 50)],
                      key=lambda r: (r.target_at, r.model))
    expected[expected.index(_record("a", 49))] = scored
    assert got == tuple(expected)
    assert got == SqlForecastLedger(engine).issued_since(T0)  # as a fresh read sees it


def test_a_ledger_write_under_an_older_token_after_a_newer_claim_is_refused_and_writes_nothing(
        store_url: str) -> None:
    # the first write of a (model, target_at) wins: a deposed leader's late record or score
    # would otherwise stand against the new leader's
    store = Store.open(store_url, migrate=True)
    old, new = store.claim_fence("replica-a", T0), store.claim_fence("replica-b", T0)
    stale = SqlForecastLedger(store.engine, fence=lambda: old)
    leader = SqlForecastLedger(store.engine, fence=lambda: new)
    leader.record_issued([_record("a", 0), _record("a", 1)])
    with pytest.raises(Fenced) as refused:
        stale.record_issued([_record("a", 1, p50=99.0), _record("a", 2)])
    assert (refused.value.token, refused.value.newest) == (1, 2)
    with pytest.raises(Fenced):
        stale.record_scored([_record("a", 0).scored(50.0, T0 + timedelta(minutes=2))])
    with pytest.raises(Fenced):
        stale.prune_issued(T0 + timedelta(minutes=1))
    assert leader.issued_since(T0) == (_record("a", 0), _record("a", 1))  # as the leader left it
    store.engine.dispose()


def test_a_ledger_write_under_the_newest_token_or_unfenced_is_kept(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.claim_fence("replica-a", T0)
    newest = store.claim_fence("replica-b", T0)
    leader = SqlForecastLedger(store.engine, fence=lambda: newest)
    leader.record_issued([_record("a", 0), _record("a", 1), _record("a", 2)])
    scored = _record("a", 1).scored(12.0, T0 + timedelta(minutes=2))
    leader.record_scored([scored])
    assert leader.prune_issued(T0 + timedelta(minutes=1)) == 1
    unfenced = SqlForecastLedger(store.engine)  # a writer that contends with no one
    unfenced.record_issued([_record("a", 3)])
    untokened = SqlForecastLedger(store.engine, fence=lambda: None)  # a dry run's: no term
    untokened.record_issued([_record("a", 4)])
    assert leader.issued_since(T0) == (scored, _record("a", 2), _record("a", 3), _record("a", 4))
    store.engine.dispose()
