"""The overview's SLO table shows each model's queued requests as the last tick read them, and
a model whose queue holds over 30 s of its ready capacity is short: a saturated model completes
only what its replicas serve, so its demand alone never shows above its capacity. Rendered by
Streamlit's AppTest over a copy of a store the real core filled, with one more tick that read
queues; a store whose ticks read none (the simulator's) has no queue column."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from dashboard_support import Seeded, copy_store, open_page

from controlplane.domain.guards import GuardMemory
from controlplane.domain.plan import Plan
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.store import Store


def test_a_model_whose_queue_holds_over_30_s_of_its_capacity_is_short(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unread = open_page(seeded.url, "views/overview.py", monkeypatch)
    assert "queued" not in next(d.value for d in unread.dataframe
                                if "status" in d.value.columns).columns
    url = copy_store(seeded.url, tmp_path / "queued.db")
    store = Store.open(url)
    last = store.last_observed()
    assert last is not None
    served = sorted((m for m in last.models if 0 < m.demand_rps <= m.capacity_rps),
                    key=lambda m: m.name)
    backlogged, draining = served[0], served[1]
    queued = {backlogged.name: 31 * backlogged.capacity_rps,  # 31 s of its capacity
              draining.name: 29 * draining.capacity_rps}  # 29 s: a queue that drains
    at = last.synced_at + timedelta(seconds=30)
    observed = replace(last, synced_at=at, models=tuple(
        replace(m, queued_requests=queued.get(m.name)) for m in last.models))
    store.save_tick(TickReport(at, at, TickStatus.APPLIED, "", observed, (), None,
                               Plan(at, (), ()), (), GuardMemory()))
    page = open_page(url, "views/overview.py", monkeypatch)
    slo = next(d.value for d in page.dataframe if "status" in d.value.columns).set_index("model")
    assert slo.loc[backlogged.name, "status"] == "short"
    assert slo.loc[draining.name, "status"] == "ok"
    assert slo.loc[backlogged.name, "queued"] == pytest.approx(queued[backlogged.name], abs=0.1)
    others = slo.drop(index=[backlogged.name, draining.name])
    assert all(math.isnan(q) for q in others["queued"])  # not read: blank, not 0
    note = {m.label: m.value for m in page.metric}["SLO (capacity ≥ demand)"]
    assert note.endswith("short") and note != "0 short"
