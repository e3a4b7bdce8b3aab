"""The Overview and Fleet pages while the Kubernetes API is unreachable: the reconcile loop
records each tick skipped (source_unreachable) with an empty snapshot, and the pages show the
fleet as the newest tick that read it saw it, say that the newest could not, and break the
fleet chart's lines over the ticks that read nothing. Rendered by Streamlit's AppTest over
copies of a store the real core filled, the outage recorded by the real reconcile path."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from dashboard_support import Seeded, as_shown, copy_store, open_page

from controlplane.domain.errors import TransientError
from controlplane.domain.observed import ObservedState
from controlplane.reconcile import SOURCE_UNREACHABLE, reconcile_once
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.codec import observed_from_json
from dashboard import history
from dashboard import queries as q

UNREACHABLE_TICKS = 8
API_ERROR = "apiserver: connection refused"


class UnreachableReader:
    def snapshot(self) -> ObservedState:
        raise TransientError(API_ERROR)


@dataclass(frozen=True)
class Outage:
    url: str
    read_tick_id: int  # the newest tick that read the fleet
    read: ObservedState  # what it read
    newest_tick_id: int


def _copy(seeded: Seeded, path: Path) -> str:
    return copy_store(seeded.url, path)


def _with_an_outage(seeded: Seeded, tmp_path: Path) -> Outage:
    """A copy of the seeded store on which the loop went on for ``UNREACHABLE_TICKS`` ticks with
    the API unreachable, recorded by ``reconcile_once`` as the loop records them."""
    url = _copy(seeded, tmp_path / "outage.db")
    store = Store.open(url)
    runtime = SimRuntime.open(load_settings(db={"url": url}), store, seeded.end_at)
    read_tick_id, read = store.counts()["ticks"], store.last_observed()
    assert read is not None and read.synced
    unreachable = replace(runtime.deps, reader=UnreachableReader())
    for _ in range(UNREACHABLE_TICKS):
        runtime.advance(runtime.settings.reconcile.interval_s, run_jobs=False)
        assert reconcile_once(unreachable, runtime.config).reason == SOURCE_UNREACHABLE
    store.engine.dispose()
    return Outage(url, read_tick_id, read, read_tick_id + UNREACHABLE_TICKS)


def _billed(observed: ObservedState) -> dict[str, int]:
    billed: dict[str, int] = defaultdict(int)
    for pool in observed.pools:
        billed[pool.product] += (pool.nodes_ready + pool.nodes_pending) * pool.gpus_per_node
    return dict(billed)


@pytest.fixture
def outage(seeded: Seeded, tmp_path: Path) -> Outage:
    return _with_an_outage(seeded, tmp_path)


def test_overview_bills_the_gpus_the_newest_tick_that_read_the_fleet_saw(
        outage: Outage, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(outage.url, "views/overview.py", monkeypatch)
    billed = _billed(outage.read)
    assert sum(billed.values()) > 0
    table = at.dataframe[0].value
    assert dict(zip(table["product"], table["billed"], strict=True)) == billed
    (cost_now,) = [m for m in at.metric if m.label == "$ / h now"]
    assert (cost_now.help or "").startswith(f"{sum(billed.values())} GPUs billed")
    assert f"as tick #{outage.read_tick_id} saw the fleet" in (cost_now.help or "")


def test_overview_says_the_newest_tick_could_not_read_the_fleet_since_when_and_why(
        outage: Outage, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(outage.url, "views/overview.py", monkeypatch)
    (warning,) = [as_shown(w.value) for w in at.warning if "could not read the fleet" in w.value]
    assert warning.startswith(f"The newest tick (#{outage.newest_tick_id} at ")
    assert f"could not read the fleet (skipped, {SOURCE_UNREACHABLE})" in warning
    assert (f"No tick has read it since tick #{outage.read_tick_id} at "
            f"{outage.read.synced_at:%Y-%m-%d %H:%M:%S} UTC") in warning
    # the API's error is the tick's note
    assert [w for w in at.warning if "last tick noted" in w.value and API_ERROR in w.value]


def test_overview_load_on_capacity_is_the_fleet_the_newest_read_tick_saw(
        outage: Outage, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(outage.url, "views/overview.py", monkeypatch)
    demand_rps = sum(m.demand_rps for m in outage.read.models)
    capacity_rps = sum(m.capacity_rps for m in outage.read.models)
    (load,) = [m for m in at.metric if m.label == "Load on capacity"]
    assert load.value == f"{100 * demand_rps / capacity_rps:.0f}%"


def test_fleet_page_bills_the_gpus_the_newest_tick_that_read_the_fleet_saw(
        outage: Outage, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(outage.url, "views/fleet.py", monkeypatch)
    summary = at.dataframe[0].value
    assert dict(zip(summary["GPU product"], summary["billed GPUs"], strict=True)) == \
        _billed(outage.read)
    assert [w for w in at.warning if "could not read the fleet" in w.value]


def test_fleet_timeline_leaves_the_unread_ticks_totals_missing_not_zero(
        outage: Outage, seeded: Seeded) -> None:
    tick = q.last_tick(outage.url)
    assert tick is not None
    timeline = history.fleet_timeline(outage.url, seeded.end_at, tick.started_at)
    unread = timeline[timeline["status"] == "skipped"]
    assert len(unread) == UNREACHABLE_TICKS and not unread["read_the_fleet"].any()
    for column in ("gpus_ready", "demand_rps", "capacity_rps"):
        assert unread[column].isna().all(), unread[column].tolist()
    read = timeline[timeline["read_the_fleet"]]
    assert not read.empty and (read["gpus_ready"] > 0).all()


def test_pages_of_a_fleet_never_read_say_so_and_bill_nothing(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every tick the store holds could not read the fleet (here: each snapshot and its
    ``synced`` column, migration 0026, marked so)."""
    url = _copy(seeded, tmp_path / "never.db")
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
        rows = db.execute("SELECT id, observed_json FROM ticks").fetchall()
        db.executemany("UPDATE ticks SET observed_json = ?, synced = 0 WHERE id = ?",
                       [(json.dumps({**json.loads(o), "synced": False}), i) for i, o in rows])
        db.commit()
    at = open_page(url, "views/overview.py", monkeypatch)
    (warning,) = [as_shown(w.value) for w in at.warning if "could not read the fleet" in w.value]
    assert warning.endswith("billed GPUs, load and capacity are not known.")
    assert [m.value for m in at.metric if m.label == "Load on capacity"] == ["n/a"]
    assert (at.dataframe[0].value["billed"] == 0).all()


def _with_an_unmeasured_model(seeded: Seeded, tmp_path: Path) -> tuple[str, ObservedState]:
    """A copy of the seeded store whose newest tick could not measure the load of its model
    with the most capacity, its totals recorded as the loop records them (demand of the
    measured models, capacity of all)."""
    url = _copy(seeded, tmp_path / "unmeasured.db")
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
        (observed_json,) = db.execute(
            "SELECT observed_json FROM ticks ORDER BY id DESC LIMIT 1").fetchone()
        raw = json.loads(observed_json)
        biggest = max(raw["models"], key=lambda m: m["capacity_rps"])
        biggest.update(demand_rps=0.0, demand_measured=False)
        observed = observed_from_json(json.dumps(raw))
        db.execute("UPDATE ticks SET observed_json = ?, demand_rps = ?, capacity_rps = ? "
                   "WHERE id = (SELECT max(id) FROM ticks)",
                   (json.dumps(raw),
                    sum(m.demand_rps for m in observed.models if m.demand_measured),
                    sum(m.capacity_rps for m in observed.models)))
        db.commit()
    return url, observed


def test_load_on_capacity_leaves_out_a_model_whose_load_was_not_measured(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, observed = _with_an_unmeasured_model(seeded, tmp_path)
    measured = [m for m in observed.models if m.demand_measured]
    assert 0 < len(measured) < len(observed.models)
    ratio = sum(m.demand_rps for m in measured) / sum(m.capacity_rps for m in measured)
    with_its_capacity = sum(m.demand_rps for m in measured) / sum(
        m.capacity_rps for m in observed.models)
    assert f"{100 * ratio:.0f}%" != f"{100 * with_its_capacity:.0f}%"
    at = open_page(url, "views/overview.py", monkeypatch)
    (load,) = [m for m in at.metric if m.label == "Load on capacity"]
    assert load.value == f"{100 * ratio:.0f}%"
    assert "models whose load was measured" in (load.help or "")

