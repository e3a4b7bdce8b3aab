"""`headroom status` names the replica of `headroom serve` that wrote the newest tick, and when
the writer changed (a Lease takeover between two replicas) says so and when; ticks recorded
before the writer was (migration 0016) read as written by 'unknown'."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

from clihelpers import headroom_status

from controlplane.adapters.clock import WallClock
from controlplane.domain.guards import GuardMemory
from controlplane.domain.observed import ObservedModel, ObservedPool, ObservedState
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.store import Store


def _tick(at: datetime, writer: str | None) -> TickReport:
    observed = ObservedState(at, (ObservedPool("l4", "L4", 4, 1, 0, 1),), (),
                             (ObservedModel("bert-embed", 1, 0, 1, 10.0, 300.0),))
    return TickReport(at, at, TickStatus.APPLIED, "", observed, (), None, None, (),
                      GuardMemory(), writer=writer)


def _filled(url: str, writers: list[str | None]) -> list[datetime]:
    """One tick per writer, 10 s apart, the last one 5 s ago; their start times."""
    store = Store.open(url, migrate=True)
    now = WallClock().now()
    starts = [now - timedelta(seconds=5 + 10 * k) for k in reversed(range(len(writers)))]
    for at, writer in zip(starts, writers, strict=True):
        store.save_tick(_tick(at, writer))
    store.engine.dispose()
    return starts


def _document(url: str) -> dict[str, Any]:
    run = headroom_status(url, "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    document: dict[str, Any] = json.loads(run.stdout)
    return document


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def test_status_names_the_newest_ticks_writer_and_when_leadership_last_changed(
        store_url: str) -> None:
    starts = _filled(store_url, ["headroom-a", "headroom-a", "headroom-b", "headroom-b"])
    doc = _document(store_url)
    assert doc["last_tick"]["written_by"] == "headroom-b"
    assert doc["leadership_change"] == {
        "from": "headroom-a", "to": "headroom-b", "at": _iso(starts[2]), "first_tick_id": 3,
        "previous_tick_at": _iso(starts[1])}
    text = headroom_status(store_url).stdout
    assert re.search(r"\nwritten by +│ headroom-b *\n", text), text
    changed = (re.escape(f"changed at {_iso(starts[2])} (tick #3, ") + r"\d+ s ago" + re.escape(
        f"): headroom-a -> headroom-b; headroom-a's last tick was at {_iso(starts[1])}"))
    assert re.search(r"\nleadership +│ " + changed + r" *\n", text), text


def test_one_writer_throughout_shows_no_leadership_change(sqlite_url: str) -> None:
    _filled(sqlite_url, ["host-1-42"] * 3)
    doc = _document(sqlite_url)
    assert doc["last_tick"]["written_by"] == "host-1-42"
    assert doc["leadership_change"] is None
    text = headroom_status(sqlite_url).stdout
    assert re.search(r"\nwritten by +│ host-1-42 *\n", text) and "leadership" not in text, text


def test_ticks_recorded_before_writers_were_read_as_unknown_and_are_no_leadership_change(
        sqlite_url: str) -> None:
    _filled(sqlite_url, [None, None])
    doc = _document(sqlite_url)
    assert doc["last_tick"]["written_by"] is None and doc["leadership_change"] is None
    assert re.search(r"\nwritten by +│ unknown \(recorded before Headroom named writers\) *\n",
                     headroom_status(sqlite_url).stdout)
    _filled(sqlite_url, ["host-1-42"])  # the first tick after the upgrade
    doc = _document(sqlite_url)
    assert doc["last_tick"]["written_by"] == "host-1-42" and doc["leadership_change"] is None
