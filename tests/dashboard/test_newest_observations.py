"""On Kubernetes a tick reads the fleet seconds after it starts and dates its observations then:
the Overview's SLO table and the Models page show the newest tick's observations, not those of
the tick before. Rendered by Streamlit's AppTest over a copy of a store the real core filled,
with one more tick that read the fleet 4 s after it started."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from dashboard_support import Seeded, all_models_table, copy_store, open_page, slo_table

from controlplane.domain.guards import GuardMemory
from controlplane.domain.plan import Plan
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.store import Store


def test_the_overview_and_models_pages_read_the_newest_ticks_observations_dated_after_it_started(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(copy_store(seeded.url, tmp_path / "late.db"))
    last = store.last_observed()
    assert last is not None
    started_at = last.synced_at + timedelta(minutes=1)
    observed = replace(last, synced_at=started_at + timedelta(seconds=4), models=tuple(
        replace(m, demand_rps=m.demand_rps + 1000.0) for m in last.models))
    store.save_observed(observed)
    store.save_tick(TickReport(started_at, observed.synced_at, TickStatus.APPLIED, "", observed,
                               (), None, Plan(started_at, (), ()), (), GuardMemory()))
    url = store.engine.url.render_as_string()
    slo, listed = slo_table(url, monkeypatch), all_models_table(url, monkeypatch)
    measured = [m for m in last.models if m.demand_measured]
    assert measured
    for m in measured:
        assert slo.loc[m.name, "demand_rps"] == pytest.approx(m.demand_rps + 1000.0, abs=0.1)
        assert slo.loc[m.name, "status"] == "short"
        assert listed.loc[m.name, "demand_rps"] == pytest.approx(m.demand_rps + 1000.0, abs=0.01)
    models_page = open_page(url, "views/models.py", monkeypatch)
    busiest = max(measured, key=lambda m: m.demand_rps)
    assert models_page.selectbox[0].value == busiest.name
    assert {m.label: m.value for m in models_page.metric}["Demand now"] == (
        f"{busiest.demand_rps + 1000.0:,.1f} rps")
