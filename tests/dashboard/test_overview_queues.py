"""The overview's SLO table shows each model's queued requests and KV cache usage as the last
tick read them, and a model whose queue holds over 30 s of its ready capacity, or whose KV cache
is over 95 % full, is short: a saturated model completes only what its replicas serve, so its
demand alone never shows above its capacity. Rendered by Streamlit's AppTest over a copy of a
store the real core filled, with one more tick that read queues (and KV caches); a store whose
ticks read none (the simulator's) has neither column. The short % of the last hour counts its
observations short by the same rule."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from dashboard_support import (
    Seeded,
    hour_under_capacity,
    open_page,
    slo_table,
    with_kv_cache_read,
    with_queues_read,
)


def test_a_model_whose_queue_holds_over_30_s_of_its_capacity_is_short(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unread = open_page(seeded.url, "views/overview.py", monkeypatch)
    unread_columns = next(d.value for d in unread.dataframe if "status" in d.value.columns).columns
    assert "queued" not in unread_columns and "kv_cache_pct" not in unread_columns
    url, queued = with_queues_read(seeded.url, tmp_path / "queued.db")
    backlogged, draining = sorted(queued)  # 31 s and 29 s of their capacity
    page = open_page(url, "views/overview.py", monkeypatch)
    slo = next(d.value for d in page.dataframe if "status" in d.value.columns).set_index("model")
    assert "kv_cache_pct" not in slo.columns  # a Triton fleet: queues read, no KV cache
    assert slo.loc[backlogged, "status"] == "short"
    assert slo.loc[draining, "status"] == "ok"
    assert slo.loc[backlogged, "queued"] == pytest.approx(queued[backlogged], abs=0.1)
    others = slo.drop(index=[backlogged, draining])
    assert all(math.isnan(q) for q in others["queued"])  # not read: blank, not 0
    note = {m.label: m.value for m in page.metric}["SLO status"]
    assert note.endswith("short") and note != "0 short"


def test_a_model_whose_kv_cache_is_over_95_percent_full_is_short(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, queued, usage = with_kv_cache_read(seeded.url, tmp_path / "kv.db")
    full = max(usage, key=usage.__getitem__)  # 97 %
    draining = min(usage, key=usage.__getitem__)  # 90 %, and 29 s of its capacity queued
    slo = slo_table(url, monkeypatch)
    assert slo.loc[full, "status"] == "short"
    assert slo.loc[full, "kv_cache_pct"] == pytest.approx(97.0)
    assert math.isnan(slo.loc[full, "queued"])  # its queue was not read
    assert slo.loc[draining, "status"] == "ok"
    assert slo.loc[draining, "kv_cache_pct"] == pytest.approx(90.0)
    others = slo.drop(index=list(usage))
    assert all(math.isnan(u) for u in others["kv_cache_pct"])  # not read: blank, not 0
    backlogged, _ = sorted(queued)
    assert others.loc[backlogged, "status"] == "short"  # the 31 s backlog, still


def test_the_short_percent_counts_the_hours_queue_backlogs_and_full_kv_caches_as_the_status(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, queued, usage = with_kv_cache_read(seeded.url, tmp_path / "kv.db")
    backlogged, draining = sorted(queued)  # 31 s and 29 s of their capacity
    full = max(usage, key=usage.__getitem__)  # 97 %
    slo, hour = slo_table(url, monkeypatch), hour_under_capacity(url)
    for model, shorts_read in ((backlogged, 1), (full, 1), (draining, 0)):
        observations, under_capacity = hour[model]
        assert slo.loc[model, "short % (1 h)"] == pytest.approx(
            round(100 * (under_capacity + shorts_read) / observations, 1)), model
