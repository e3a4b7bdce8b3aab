"""A model the fleet still serves but the models table no longer lists (`headroom models remove`
of a model whose Deployment stays in the cluster): the pages show it, and a demand hint kept
with it (`--keep-hints`), as `headroom status` does, rendered by Streamlit's AppTest over a copy
of a store the real core filled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dashboard_support import Seeded, copy_store, open_page

from controlplane.domain.hints import DemandHint
from controlplane.store.engine import make_engine
from controlplane.store.hints import SqlDemandHints, remove_model_and_hints
from controlplane.store.status_reader import read_fleet_status

REMOVED = "llama-3-70b"
LISTED = "bert-embed"


def _with_a_model_removed(seeded: Seeded, tmp_path: Path) -> str:
    url = copy_store(seeded.url, tmp_path / "removed.db")
    assert remove_model_and_hints(make_engine(url), REMOVED, datetime.now(UTC), keep_hints=True)
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
    note = {m.label: m.proto.delta for m in at.metric}["SLO status"]
    assert note == f"{len(observed)} models with load in the last 10 min"


def test_a_model_removed_but_still_served_can_be_chosen_on_the_models_page(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _with_a_model_removed(seeded, tmp_path)
    at = open_page(url, "views/models.py", monkeypatch)
    assert REMOVED in at.selectbox[0].options
    table = at.dataframe[-1].value.set_index("name")
    assert table.loc[REMOVED, "replicas_ready"] > 0
    # the models table no longer says its tenant or isolation: blank (before: isolation NaN)
    assert (table.loc[REMOVED, "tenant"], table.loc[REMOVED, "isolation"]) == ("", "")
    at.selectbox[0].set_value(REMOVED).run()
    assert not at.exception, [e.value for e in at.exception]
    assert {m.label: m.value for m in at.metric}["Ready replicas"] == str(
        int(table.loc[REMOVED, "replicas_ready"]))


def test_a_hint_kept_when_its_model_was_removed_is_marked_model_not_listed_on_the_models_page(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = copy_store(seeded.url, tmp_path / "kept.db")
    hints = SqlDemandHints(make_engine(url))
    window = (seeded.end_at - timedelta(hours=1), seeded.end_at + timedelta(hours=1))
    kept = hints.add_hint(DemandHint(REMOVED, 900.0, *window, "launch"), seeded.end_at)
    other = hints.add_hint(DemandHint(LISTED, 50.0, *window), seeded.end_at)
    # `models remove --keep-hints`
    assert remove_model_and_hints(make_engine(url), REMOVED, datetime.now(UTC), keep_hints=True)
    at = open_page(url, "views/models.py", monkeypatch)
    shown = {}
    for model in (REMOVED, LISTED):
        at.selectbox[0].set_value(model).run()
        assert not at.exception, [e.value for e in at.exception]
        (shown[model],) = [c.value for c in at.caption if c.value.startswith("Demand hint")]
    assert shown[REMOVED].startswith(f"Demand hint {kept.hint_id} (model not listed): at least "
                                     "900 rps from ")
    assert shown[REMOVED].endswith(
        "; it floors nothing until headroom models import lists the model again (headroom hint "
        f"remove {kept.hint_id} withdraws it)")
    assert shown[LISTED].startswith(f"Demand hint {other.hint_id}: at least 50 rps from ")
    assert shown[LISTED].endswith("; the loop sizes from the forecast floored by it")
