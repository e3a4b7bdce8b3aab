"""The Overview's SLO table shows each model's latency as the last tick read it, and a model
whose latency is above the models file's SLO is short, as the alert HeadroomModelOverLatencySlo
reads it (at the SLO is within it); the short % of the last hour counts those observations too.
Rendered by Streamlit's AppTest over a copy of a store the real core filled (the simulator
reads each model's latency), with one more tick."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_support import Seeded, hour_under_capacity, slo_table, with_latencies_read

from controlplane.store import Store


def test_a_model_whose_latency_is_above_its_slo_is_short_and_one_at_its_slo_is_not(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, slow, at_slo = with_latencies_read(seeded.url, tmp_path / "latency.db")
    slo_ms = {s.name: s.latency_slo_ms for s in Store.open(url).model_specs()}
    slo = slo_table(url, monkeypatch)
    assert slo.loc[slow, "status"] == "short"
    assert slo.loc[slow, "latency_ms"] == pytest.approx(slo_ms[slow] + 1.0, abs=0.05)
    assert slo.loc[at_slo, "status"] == "ok"
    assert slo.loc[at_slo, "latency_ms"] == pytest.approx(slo_ms[at_slo], abs=0.05)
    # both serve their demand: the latency alone makes the one short
    assert (slo.loc[[slow, at_slo], "capacity_rps"] >= slo.loc[[slow, at_slo], "demand_rps"]).all()


def test_the_short_percent_counts_the_hours_latencies_above_the_slo(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, slow, at_slo = with_latencies_read(seeded.url, tmp_path / "latency.db")
    slo, hour = slo_table(url, monkeypatch), hour_under_capacity(url)
    for model, latency_shorts in ((slow, 1), (at_slo, 0)):
        observations, under_capacity = hour[model]
        assert slo.loc[model, "short % (1 h)"] == pytest.approx(
            round(100 * (under_capacity + latency_shorts) / observations, 1)), model
