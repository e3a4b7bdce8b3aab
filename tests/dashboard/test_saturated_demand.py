"""A saturated engine finishes what its capacity serves and holds the rest: the dashboard shows
its demand as the requests that arrived (those that finished plus how fast those held grew), so
the Overview reads it short of capacity and the Models page's demand is above its capacity, not
equal to it. Rendered by Streamlit's AppTest over a copy of a store the real core filled, with
one more tick that read a model whose queue grows."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_support import Seeded, open_page, slo_table, with_a_saturated_model


def test_the_overview_reads_a_saturated_models_demand_as_what_arrived_and_short(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, model, arrived_rps = with_a_saturated_model(seeded.url, tmp_path / "saturated.db")
    slo = slo_table(url, monkeypatch)
    assert slo.loc[model, "demand_rps"] == pytest.approx(arrived_rps)
    assert slo.loc[model, "demand_rps"] > slo.loc[model, "capacity_rps"]
    assert slo.loc[model, "status"] == "short"


def test_the_models_page_shows_a_saturated_models_demand_as_what_arrived(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, model, arrived_rps = with_a_saturated_model(seeded.url, tmp_path / "saturated.db")
    page = open_page(url, "views/models.py", monkeypatch)
    page.selectbox[0].set_value(model).run()
    shown = {m.label: m.value for m in page.metric}
    assert shown["Demand now"] == f"{arrived_rps:,.1f} rps"
