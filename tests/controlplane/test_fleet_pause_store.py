"""The fleet's pause in the store (SQLite and PostgreSQL): one pause at a time, kept since when
and by whom it began when paused again (a reason given replaces its reason), cleared by a
resume; two operators pausing at the same moment leave the first one's pause."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Connection

import controlplane.store.fleet_pause as stored
from controlplane.domain.fleet_pause import FleetPause, FleetPauseSet
from controlplane.store import Store
from controlplane.store.fleet_pause import SqlFleetPause

T0 = datetime(2026, 12, 7, 23, 0, tzinfo=UTC)
LATER = T0 + timedelta(minutes=20)


def test_a_fleet_paused_again_keeps_its_start_and_who_and_takes_a_new_reason(
        store_url: str) -> None:
    pauses = SqlFleetPause(Store.open(store_url, migrate=True).engine)
    assert pauses.fleet_pause() is None
    first = FleetPause(T0, "alice", "incident 4711")
    assert pauses.pause(T0, "alice", "incident 4711") == FleetPauseSet(first)
    assert pauses.pause(LATER, "bob", None) == FleetPauseSet(first, first)
    renamed = FleetPause(T0, "alice", "incident 4711: Prometheus down")
    assert pauses.pause(LATER, "bob", "incident 4711: Prometheus down") == \
        FleetPauseSet(renamed, first)
    assert pauses.fleet_pause() == renamed
    assert pauses.resume() == renamed
    assert pauses.fleet_pause() is None and pauses.resume() is None


def test_a_pause_that_finds_the_fleet_paused_meanwhile_leaves_the_first_pause(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = SqlFleetPause(Store.open(store_url, migrate=True).engine)
    pauses.pause(T0, "alice", "incident 4711")
    real = stored.fleet_pause
    reads: list[None] = []

    def read_before_alices_insert(connection: Connection) -> FleetPause | None:
        if not reads:  # bob's first read: before alice's row was there
            reads.append(None)
            return None
        return real(connection)

    monkeypatch.setattr(stored, "fleet_pause", read_before_alices_insert)
    done = pauses.pause(LATER, "bob", None)
    first = FleetPause(T0, "alice", "incident 4711")
    assert done == FleetPauseSet(first, first)
    assert pauses.fleet_pause() == first


def test_a_long_reason_and_login_name_are_cut_to_their_columns(store_url: str) -> None:
    pauses = SqlFleetPause(Store.open(store_url, migrate=True).engine)
    done = pauses.pause(T0, "a" * 150, "x" * 600)
    assert (len(done.pause.paused_by), len(done.pause.why)) == (100, 500)
    assert pauses.fleet_pause() == done.pause
