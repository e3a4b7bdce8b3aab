"""Demand hints in the store (SQLite and PostgreSQL): added with an id, listed by start, read
by the tick while they have not ended, removed by id; migration 0007 adds and drops the table."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import inspect, text
from tick_builders import T0

from controlplane.domain.hints import DemandHint
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.hints import SqlDemandHints

CHAT, EMBED = "llama-3-8b-chat", "bert-embed"


def _at(minutes: float) -> DemandHint:
    return DemandHint(CHAT, 600.0, T0 + timedelta(minutes=minutes),
                      T0 + timedelta(minutes=minutes + 30), f"wave at {minutes}")


def test_hints_come_back_with_ids_by_start_and_the_tick_reads_those_not_ended(
        store_url: str) -> None:
    hints = SqlDemandHints(Store.open(store_url, migrate=True).engine)
    late = hints.add_hint(_at(60), T0)
    early = hints.add_hint(_at(-60), T0)
    embed = hints.add_hint(DemandHint(EMBED, 2000.0, T0, T0 + timedelta(hours=2)), T0)
    assert late.hint_id is not None and early.hint_id is not None
    assert late == DemandHint(CHAT, 600.0, T0 + timedelta(minutes=60),
                              T0 + timedelta(minutes=90), "wave at 60", late.hint_id)
    assert hints.hints() == (early, embed, late)
    assert hints.active_hints(T0) == (embed, late)  # early ended 30 minutes ago
    assert hints.active_hints(T0 - timedelta(minutes=30)) == (embed, late)  # end is excluded
    assert hints.active_hints(T0 - timedelta(minutes=31)) == (early, embed, late)


def test_adding_a_hint_already_stored_and_not_ended_returns_it_even_from_two_adds_at_once(
        store_url: str) -> None:
    hints = SqlDemandHints(Store.open(store_url, migrate=True).engine)
    first = hints.add_hint(_at(10), T0)
    assert hints.add_hint(_at(10), T0 + timedelta(minutes=1)) == first
    assert hints.add_hint(replace(_at(10), rate_rps=601.0), T0).hint_id != first.hint_id
    assert hints.add_hint(_at(10), T0 + timedelta(minutes=40)).hint_id != first.hint_id  # ended
    # a hint without a start (starts_now) is the one stored that has started, same end
    ongoing = hints.add_hint(DemandHint(EMBED, 90.0, T0, T0 + timedelta(hours=1)), T0,
                             starts_now=True)
    later = T0 + timedelta(minutes=5)
    assert hints.add_hint(DemandHint(EMBED, 90.0, later, T0 + timedelta(hours=1)), later,
                          starts_now=True) == ongoing
    assert hints.add_hint(DemandHint(EMBED, 90.0, later, T0 + timedelta(hours=1)), later
                          ).hint_id != ongoing.hint_id  # a start given: that start
    stored = len(hints.hints())
    barrier = threading.Barrier(8)

    def add(_: int) -> DemandHint:
        barrier.wait()
        return hints.add_hint(_at(20), T0)

    with ThreadPoolExecutor(8) as pool:
        added = list(pool.map(add, range(8)))
    assert len({a.hint_id for a in added}) == 1
    assert len(hints.hints()) == stored + 1


def test_a_removed_hint_is_gone_and_removing_it_again_finds_nothing(store_url: str) -> None:
    hints = SqlDemandHints(Store.open(store_url, migrate=True).engine)
    added = hints.add_hint(_at(0), T0)
    assert added.hint_id is not None
    assert hints.remove_hint(added.hint_id) == added
    assert hints.remove_hint(added.hint_id) is None
    assert hints.hints() == ()


def test_a_removed_hints_id_is_never_given_to_the_next_hint_so_a_retried_remove_finds_nothing(
        store_url: str) -> None:
    hints = SqlDemandHints(Store.open(store_url, migrate=True).engine)
    first = hints.add_hint(_at(0), T0)
    assert first.hint_id is not None and hints.remove_hint(first.hint_id) == first
    second = hints.add_hint(DemandHint(EMBED, 900.0, T0, T0 + timedelta(hours=1)), T0)
    assert second.hint_id != first.hint_id
    assert hints.remove_hint(first.hint_id) is None  # the first operator's retry
    assert hints.hints() == (second,)


def test_migration_0019_keeps_the_hints_and_their_indexes_and_stops_reusing_ids(
        store_url: str) -> None:
    store = Store.open(store_url)
    upgrade(store.engine, "0018")
    hints = SqlDemandHints(store.engine)
    kept, dropped = hints.add_hint(_at(0), T0), hints.add_hint(_at(60), T0)
    assert dropped.hint_id is not None and hints.remove_hint(dropped.hint_id) == dropped
    upgrade(store.engine)
    assert hints.hints() == (kept,)
    assert {"ix_demand_hints_model", "ix_demand_hints_end_at"} <= {
        index["name"] for index in inspect(store.engine).get_indexes("demand_hints")}
    again = hints.add_hint(_at(120), T0)
    assert again.hint_id is not None and hints.remove_hint(again.hint_id) == again
    assert hints.add_hint(_at(180), T0).hint_id != again.hint_id
    downgrade(store.engine, "0018")
    assert [h.reason for h in hints.hints()] == ["wave at 0", "wave at 180"]
    store.engine.dispose()


def test_migration_0007_adds_the_table_and_its_downgrade_drops_it(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    assert inspect(store.engine).has_table("demand_hints")
    downgrade(store.engine, "0006")
    assert not inspect(store.engine).has_table("demand_hints")
    upgrade(store.engine)
    assert SqlDemandHints(store.engine).hints() == ()


def test_a_stored_row_that_is_no_valid_hint_is_skipped_with_a_warning_not_failing_every_read(
        store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    engine = Store.open(store_url, migrate=True).engine
    hints = SqlDemandHints(engine)
    good = hints.add_hint(_at(0), T0)
    with engine.begin() as connection:  # written by hand, past every check of hint add
        connection.execute(text(
            "INSERT INTO demand_hints (model, rate_rps, start_at, end_at, reason, created_at) "
            "VALUES (:model, :rate, :start, :end, '', :start)"),
            [{"model": CHAT, "rate": 600.0, "start": T0 + timedelta(hours=2),
              "end": T0 + timedelta(hours=1)},
             {"model": EMBED, "rate": -5.0, "start": T0, "end": T0 + timedelta(hours=1)}])
    with caplog.at_level(logging.WARNING, logger="headroom.store"):
        assert hints.active_hints(T0) == (good,)
        assert hints.hints() == (good,)
    skipped = [r for r in caplog.records if r.getMessage() == "hint.skipped"]
    assert len(skipped) == 4  # two rows, two reads
    assert {r.__dict__["model"] for r in skipped} == {CHAT, EMBED}
    assert any("is not after start_at" in r.__dict__["error"] for r in skipped)
    assert any("rate_rps must be" in r.__dict__["error"] for r in skipped)
