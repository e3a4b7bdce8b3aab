"""`headroom status` names a tick that saved its guard intent and no record (migration 0017): in
progress, or killed after it may have acted; once a newer record is saved it is not shown."""

from __future__ import annotations

from datetime import timedelta

from clihelpers import headroom_status
from test_status_leadership_cli import _document, _filled, _iso, _tick

from controlplane.adapters.clock import WallClock
from controlplane.domain.guards import GuardMemory
from controlplane.store import Store


def test_status_names_a_tick_that_saved_its_intent_and_no_record(store_url: str) -> None:
    starts = _filled(store_url, ["headroom-a", "headroom-a"])
    killed_at = starts[-1] + timedelta(seconds=3)
    store = Store.open(store_url)
    store.save_intent(killed_at, GuardMemory(), writer="headroom-b")
    store.engine.dispose()
    doc = _document(store_url)
    assert doc["unrecorded_tick"]["started_at"] == _iso(killed_at)
    assert doc["unrecorded_tick"]["written_by"] == "headroom-b"
    assert doc["unrecorded_tick"]["age_s"] > 0
    assert doc["healthy"] is True  # informational: the loop's health is the last record's
    run = headroom_status(store_url)
    assert run.returncode == 0, run.stdout + run.stderr
    line = next(x for x in run.stdout.splitlines() if "unrecorded tick" in x)
    assert f"started at {_iso(killed_at)}" in line and "by headroom-b" in line, run.stdout


def test_status_shows_no_unrecorded_tick_once_a_newer_record_is_saved(store_url: str) -> None:
    _filled(store_url, ["headroom-a"])
    assert _document(store_url)["unrecorded_tick"] is None
    store = Store.open(store_url)
    later = WallClock().now()
    store.save_intent(later, GuardMemory(), writer="headroom-a")
    assert _document(store_url)["unrecorded_tick"] is not None
    store.save_tick(_tick(later, "headroom-a"))
    store.engine.dispose()
    doc = _document(store_url)
    assert doc["unrecorded_tick"] is None
    assert "unrecorded tick" not in headroom_status(store_url).stdout
