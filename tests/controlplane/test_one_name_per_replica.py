"""One name per replica: the process that changed the placement journal (`headroom status`'s
"changed ... by") is named as the writer of its ticks and the holder of the lease it leads by,
under `serve --backend kubernetes` (its Lease holder identity) as under `serve --backend sim`
and `headroom demo` (the store fleet lease holder's hostname-pid)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from sqlmodel import SQLModel

from controlplane.demo import Demo
from controlplane.identity import holder_identity
from controlplane.serve import serve_identity
from controlplane.settings import load_settings
from controlplane.store.placement_journal import placement_status
from controlplane.store.tables import TickRecord

TICKS = SQLModel.metadata.tables[str(TickRecord.__tablename__)]


def test_a_kubernetes_replica_goes_by_its_configured_lease_identity() -> None:
    settings = load_settings(backend="kubernetes", k8s={"identity": "headroom-7c9d-b"})
    assert serve_identity(settings) == "headroom-7c9d-b"


def test_a_kubernetes_replica_without_one_goes_by_the_hostname_pid_its_elector_uses() -> None:
    assert serve_identity(load_settings(backend="kubernetes")) == holder_identity()


def test_a_simulated_fleet_goes_by_its_store_lease_holders_name() -> None:
    assert serve_identity(load_settings(backend="sim")) == holder_identity()


def test_a_demo_changes_the_placement_journal_by_the_name_its_ticks_and_lease_carry(
        tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    demo = Demo(load_settings(db={"url": f"sqlite:///{db}"},
                              forecast={"state_dir": str(tmp_path / "forecaster-state")}),
                datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
    try:
        demo.run_fast(2)
        with demo.store.engine.connect() as connection:
            placement = placement_status(connection)
            writers = set(connection.execute(select(TICKS.c.writer)).scalars())
    finally:
        demo.shutdown()
        demo.store.engine.dispose()
    assert placement is not None and placement.changed_by == demo.lease.identity
    assert writers == {demo.lease.identity}
