"""Ticks record whether they read the fleet in their ``synced`` column (migration 0026) beside
their snapshot's flag, so ``headroom status`` and the dashboard pick the ticks that did
(``status_reader.read_the_fleet``) without extracting the flag from every tick's snapshot
document (~89 kB each on a large fleet); a tick without the column (recorded by an older
Headroom after the upgrade) is read by its snapshot's flag, as before."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, create_engine, event, insert, inspect, select
from sqlmodel import SQLModel
from tick_builders import T0, sample_tick_report

from controlplane.store import Store, codec, downgrade, upgrade
from controlplane.store.status_reader import fleet_seen, read_the_fleet

TICKS = SQLModel.metadata.tables["ticks"]


def _snapshot(synced: bool | None) -> str:
    """The sample tick's snapshot document with its ``synced`` flag (None: none, as a store
    older than the flag recorded it)."""
    raw = json.loads(codec.observed_to_json(sample_tick_report().observed))
    if synced is None:
        raw.pop("synced")
    else:
        raw["synced"] = synced
    return json.dumps(raw)


def _add_ticks(engine: Engine, rows: list[dict[str, Any]]) -> None:
    """Ticks a minute apart as a Headroom without the column writes them (``rows``: their
    ``observed_json``, and ``synced`` where the column is written)."""
    with engine.begin() as connection:
        for i, row in enumerate(rows):
            at = T0 + timedelta(minutes=i)
            connection.execute(insert(TICKS).values(
                started_at=at, finished_at=at, status="applied", reason="", gpus_ready=4,
                demand_rps=500.0, capacity_rps=600.0, guard_memory_json="[]", **row))


def _column(engine: Engine) -> dict[int, bool | None]:
    with engine.connect() as connection:
        return {int(i): s for i, s in connection.execute(
            select(TICKS.c.id, TICKS.c.synced).order_by(TICKS.c.id))}


def _read(engine: Engine) -> dict[int, bool]:
    with engine.connect() as connection:
        return {int(i): bool(r) for i, r in connection.execute(
            select(TICKS.c.id, read_the_fleet(connection)).order_by(TICKS.c.id))}


def test_migration_0026_fills_the_column_from_each_snapshots_flag_and_its_downgrade_drops_it(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    downgrade(store.engine, "0025")
    _add_ticks(store.engine, [{"observed_json": _snapshot(False)},
                              {"observed_json": _snapshot(True)},
                              {"observed_json": _snapshot(None)},  # absent: it read the fleet
                              {"observed_json": ""}])  # no snapshot: its document says, as then
    upgrade(store.engine)
    filled = {1: False, 2: True, 3: True, 4: None}
    assert _column(store.engine) == filled
    downgrade(store.engine, "0025")
    assert "synced" not in {c["name"] for c in inspect(store.engine).get_columns("ticks")}
    upgrade(store.engine)
    assert _column(store.engine) == filled
    store.engine.dispose()


def test_a_recorded_tick_writes_its_snapshots_flag_into_the_column(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    report = sample_tick_report()
    read_id = store.save_tick(report)
    unread_id = store.save_tick(replace(report, observed=replace(report.observed,
                                                                 synced=False)))
    assert _column(store.engine) == {read_id: True, unread_id: False}
    assert _read(store.engine) == {read_id: True, unread_id: False}
    store.engine.dispose()


def test_the_column_decides_and_a_tick_without_it_is_read_by_its_snapshots_flag(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    _add_ticks(store.engine, [
        {"observed_json": _snapshot(True), "synced": True},
        # the column is what is read (the document is not parsed): here, not the document's
        {"observed_json": _snapshot(True), "synced": False},
        {"observed_json": _snapshot(None), "synced": None},  # by an older Headroom since
        {"observed_json": _snapshot(False), "synced": None}])
    assert _read(store.engine) == {1: True, 2: False, 3: True, 4: False}
    with store.engine.connect() as connection:
        seen = fleet_seen(connection, 4)
    assert seen is not None and seen[0] == 3
    store.engine.dispose()


def test_reading_which_ticks_read_the_fleet_extracts_no_flag_from_their_documents(
        sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    report = sample_tick_report()
    for i in range(3):
        store.save_tick(replace(report, started_at=T0 + timedelta(minutes=i)))
    store.engine.dispose()
    extracted: list[str] = []
    engine = create_engine(sqlite_url)

    @event.listens_for(engine, "connect")
    def count_extractions(dbapi_connection: Any, _: object) -> None:
        def json_extract(document: str, path: str) -> object:
            extracted.append(path)
            return json.loads(document).get(path.removeprefix("$."))
        dbapi_connection.create_function("json_extract", 2, json_extract)

    assert _read(engine) == {1: True, 2: True, 3: True}
    with engine.connect() as connection:
        assert fleet_seen(connection, 3) is not None
    engine.dispose()
    assert extracted == []
