"""Which tick's fleet ``headroom status`` and the dashboard show: the newest tick that could read
it (``status_reader.fleet_seen``, by ``read_the_fleet``), on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy import select
from sqlmodel import SQLModel

from controlplane.domain.errors import TransientError
from controlplane.domain.observed import ObservedState
from controlplane.reconcile import reconcile_once
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.status_reader import fleet_seen, read_the_fleet
from controlplane.store.tables import TickRecord

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class UnreachableReader:
    def snapshot(self) -> ObservedState:
        raise TransientError("apiserver: connection refused")


def test_the_fleet_seen_is_the_newest_tick_that_read_it_when_later_ones_could_not(
        store_url: str) -> None:
    runtime = SimRuntime.open(load_settings(db={"url": store_url}),
                              Store.open(store_url, migrate=True), T0)
    runtime.advance(120)
    store = runtime.store
    read_tick_id = store.counts()["ticks"]
    for _ in range(3):
        runtime.advance(30, run_jobs=False)
        reconcile_once(replace(runtime.deps, reader=UnreachableReader()), runtime.config)
    t = SQLModel.metadata.tables[str(TickRecord.__tablename__)].c
    with store.engine.connect() as connection:
        read = {int(i): bool(r) for i, r in connection.execute(select(
            t.id, read_the_fleet(connection)))}
        seen_by_newest = fleet_seen(connection, read_tick_id + 3)
        seen_by_read = fleet_seen(connection, read_tick_id)
    store.engine.dispose()
    assert read == {i: i <= read_tick_id for i in range(1, read_tick_id + 4)}
    assert seen_by_newest is not None and seen_by_newest[0] == read_tick_id
    assert seen_by_newest[1].synced and seen_by_newest[1].pools
    assert seen_by_read is not None and seen_by_read[0] == read_tick_id
