"""A model the fleet still serves but the models table no longer lists (`headroom models remove`
of a model whose Deployment stays in the cluster): the pages show it as
`headroom status` does, rendered by Streamlit's AppTest over a copy of a store the real core
filled."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_support import Seeded, copy_store, open_page

from controlplane.store import Store
from controlplane.store.engine import make_engine
from controlplane.store.status_reader import read_fleet_status

REMOVED = "llama-3-70b"


def _with_a_model_removed(seeded: Seeded, tmp_path: Path) -> str:
    url = copy_store(seeded.url, tmp_path / "removed.db")
    assert Store.open(url).remove_model(REMOVED)
    return url



def test_a_model_removed_but_still_served_is_in_the_slo_table_as_headroom_status_lists_it(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _with_a_model_removed(seeded, tmp_path)
    status = read_fleet_status(make_engine(url), url, "headroom")
    observed = {m.name: m for m in status.models if m.observed}
    assert REMOVED in observed
    at = open_page(url, "views/overview.py", monkeypatch)
    slo = next(d.value for d in at.dataframe if "status" in d.value.columns).set_index("model")
    assert set(slo.index) == set(observed)
    assert slo.loc[REMOVED, "replicas_ready"] == observed[REMOVED].replicas_ready
    note = {m.label: m.proto.delta for m in at.metric}["SLO (capacity ≥ demand)"]
    assert note == f"{len(observed)} models with load in the last 10 min"


def test_a_model_removed_but_still_served_can_be_chosen_on_the_models_page(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _with_a_model_removed(seeded, tmp_path)
    at = open_page(url, "views/models.py", monkeypatch)
    assert REMOVED in at.selectbox[0].options
    table = at.dataframe[-1].value.set_index("name")
    assert table.loc[REMOVED, "replicas_ready"] > 0
    at.selectbox[0].set_value(REMOVED).run()
    assert not at.exception, [e.value for e in at.exception]
    assert {m.label: m.value for m in at.metric}["Ready replicas"] == str(
        int(table.loc[REMOVED, "replicas_ready"]))
