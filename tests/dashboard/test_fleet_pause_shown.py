"""The Overview warns while the fleet is paused (`headroom fleet pause`), as `headroom status`
says it: since when, by whom, why and what it does; and says nothing of it otherwise. Rendered
by Streamlit's AppTest over a copy of a store the real core filled."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from dashboard_support import Seeded, as_shown, copy_store, open_page

from controlplane.store import Store
from controlplane.store.fleet_pause import SqlFleetPause


def _paused_warnings(url: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    page = open_page(url, "views/overview.py", monkeypatch)
    return [as_shown(w.value) for w in page.warning if "paused" in w.value]


def test_the_overview_warns_while_the_fleet_is_paused(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _paused_warnings(seeded.url, monkeypatch) == []
    url = copy_store(seeded.url, tmp_path / "paused.db")
    SqlFleetPause(Store.open(url).engine).pause(datetime(2026, 3, 3, 0, 10, tzinfo=UTC),
                                                "alice", "incident 4711")
    assert _paused_warnings(url, monkeypatch) == [
        "The fleet is paused since 2026-03-03T00:10:00Z by alice (incident 4711): each tick "
        "plans and records a dry run and changes nothing until `headroom fleet resume`."]
