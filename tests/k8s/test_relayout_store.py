"""Relayouts persist through the SQL store (SQLite and PostgreSQL) and its migrations."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import inspect

from controlplane.domain.mig_layout import DeviceGroupLayout, NodeMigLayout
from controlplane.domain.mig_relayout import RelayoutPhase, RelayoutPolicy, start_relayout
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.relayout import SqlRelayoutStore

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LAYOUT = NodeMigLayout("A100-80GB", (DeviceGroupLayout((0, 1), ("3g.40gb", "3g.40gb")),
                                     DeviceGroupLayout((2,), (), mig_enabled=False)))


def test_a_relayout_round_trips_through_the_store(store_url: str) -> None:
    store = SqlRelayoutStore(Store.open(store_url, migrate=True).engine)
    first = start_relayout("a100-1", "a100-80gb", "all-1g.10gb", "headroom-mig-x", LAYOUT, T0,
                           RelayoutPolicy(), "placement")
    store.save_relayout(first)
    assert store.active_relayouts() == (first,)
    later = replace(first, phase=RelayoutPhase.DRAIN, surge_nodes=3, updated_at=T0 + timedelta(
        seconds=30), wait_reason="eviction_blocked_by_pdb: models/m-0")
    store.save_relayout(later)
    assert store.active_relayouts() == (later,)
    done = replace(later, phase=RelayoutPhase.DONE, deadline_at=None, wait_reason="")
    store.save_relayout(done)
    assert store.active_relayouts() == ()
    assert store.relayouts_of("a100-1") == (done,)
    assert store.relayouts_of("a100-1")[0].to_layout == LAYOUT


def test_the_relayout_table_migrates_up_and_down(sqlite_url: str) -> None:
    engine = Store.open(sqlite_url, migrate=True).engine
    assert "mig_relayouts" in inspect(engine).get_table_names()
    downgrade(engine, "0001")
    assert "mig_relayouts" not in inspect(engine).get_table_names()
    assert "ticks" in inspect(engine).get_table_names()


def test_migration_0015_adds_was_cordoned_reading_false_on_older_rows_and_drops_it_on_downgrade(
        store_url: str) -> None:
    engine = Store.open(store_url, migrate=True).engine
    store = SqlRelayoutStore(engine)
    kept = replace(start_relayout("a100-1", "a100-80gb", "all-1g.10gb", "headroom-mig-x", LAYOUT,
                                  T0, RelayoutPolicy(), "placement"), was_cordoned=True)
    store.save_relayout(kept)
    assert store.relayouts_of("a100-1") == (kept,)

    def columns() -> set[str]:
        return {c["name"] for c in inspect(engine).get_columns("mig_relayouts")}

    assert "was_cordoned" in columns()
    downgrade(engine, "0014")
    assert "was_cordoned" not in columns()
    upgrade(engine)
    assert store.relayouts_of("a100-1") == (replace(kept, was_cordoned=False),)
    engine.dispose()
