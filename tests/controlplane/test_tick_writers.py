"""Who wrote the recorded ticks: the loop's store stamps each report with its process's
identity (a late save too), the simulated fleet's with its store lease holder's, and migration
0016 adds the column to a store's existing ticks (not known: NULL)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import Column, MetaData, Table, inspect, select
from sqlalchemy.exc import OperationalError
from sqlmodel import SQLModel
from test_reconcile_save_failure import FailingSaves
from tick_builders import T0, sample_tick_report

from controlplane.adapters.clock import WallClock
from controlplane.decision_retry import RetryingDecisionStore
from controlplane.fleet_lease import FLEET_LEASE, hold_fleet_lease
from controlplane.identity import holder_identity
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.lease import SqlLeaseStore
from controlplane.store.tables import TickRecord

TICKS = SQLModel.metadata.tables[str(TickRecord.__tablename__)]


def _writers(store: Store) -> list[str | None]:
    with store.engine.connect() as connection:
        return list(connection.execute(select(TICKS.c.writer).order_by(TICKS.c.id)).scalars())


def test_the_loops_store_records_every_tick_as_written_by_its_identity(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    RetryingDecisionStore(store, writer="headroom-7d9f-abcde").save_tick(sample_tick_report())
    store.save_tick(sample_tick_report())  # a writer that does not say
    assert _writers(store) == ["headroom-7d9f-abcde", None]
    store.engine.dispose()


def test_a_report_saved_late_after_a_failed_save_keeps_its_writer(sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    decisions = RetryingDecisionStore(FailingSaves(store, failures=1), writer="replica-a")
    with pytest.raises(OperationalError):
        decisions.save_tick(sample_tick_report())
    assert decisions.unsaved is not None and decisions.unsaved.writer == "replica-a"
    decisions.save_tick(replace(sample_tick_report(), started_at=T0 + timedelta(seconds=30)))
    assert decisions.unsaved is None
    assert _writers(store) == ["replica-a", "replica-a"]


def test_the_simulated_fleet_records_its_ticks_as_written_by_its_store_lease_holder(
        sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    leases = SqlLeaseStore(store.engine)
    lease = hold_fleet_lease(sqlite_url, leases, 15, WallClock())  # as demo and serve --backend sim
    try:
        settings = load_settings(db={"url": sqlite_url}, sim={"history_s": 3600})
        SimRuntime.open(settings, store, T0, writer=lease.identity).advance(90)
        held = leases.read_lease(FLEET_LEASE)
    finally:
        lease.release()
    assert held is not None and held.holder == holder_identity()
    assert len(_writers(store)) >= 3 and set(_writers(store)) == {held.holder}
    store.engine.dispose()


def _tick_columns(store: Store) -> set[str]:
    return {c["name"] for c in inspect(store.engine).get_columns("ticks")}


def test_migration_0016_keeps_a_0015_stores_ticks_with_no_writer_and_drops_it_on_downgrade(
        store_url: str) -> None:
    store = Store.open(store_url)
    upgrade(store.engine, "0015")
    at_0015 = Table("ticks", MetaData(), *[Column(c.name, c.type) for c in TICKS.columns
                                           if c.name not in ("id", "writer")])
    with store.engine.begin() as connection:
        connection.execute(at_0015.insert(), [dict(
            started_at=T0, finished_at=T0, status="applied", reason="", gpus_ready=1,
            demand_rps=1.0, capacity_rps=2.0, observed_json="{}", guard_memory_json="{}",
            profiles_json=None)])
    assert "writer" not in _tick_columns(store)
    upgrade(store.engine)
    assert _writers(store) == [None]
    RetryingDecisionStore(store, writer="replica-a").save_tick(sample_tick_report())
    assert _writers(store) == [None, "replica-a"]
    downgrade(store.engine, "0015")
    assert "writer" not in _tick_columns(store) and store.counts()["ticks"] == 2
    store.engine.dispose()
