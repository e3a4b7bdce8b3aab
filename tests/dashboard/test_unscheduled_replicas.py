"""The dashboard shows the pods no node has bound as the last tick read them: the Overview's SLO
table has a column of them while some model has any, and the Models page says how many of the
chosen model's wait, with the tick's note when they are stranded replicas of several GPUs.
Rendered by Streamlit's AppTest over a copy of a store the real core filled, with one more tick
that read unscheduled pods."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_support import (
    Seeded,
    as_shown,
    open_page,
    slo_table,
    stranded_note,
    with_unscheduled_read,
)


def test_the_slo_table_shows_each_models_unscheduled_pods_only_while_some_model_has_any(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "unscheduled" not in slo_table(seeded.url, monkeypatch).columns
    url, stranded, waiting = with_unscheduled_read(seeded.url, tmp_path / "pods.db",
                                                   stranded_note)
    slo = slo_table(url, monkeypatch)
    assert (slo.loc[stranded, "unscheduled"], slo.loc[waiting, "unscheduled"]) == (2, 1)
    assert (slo.drop(index=[stranded, waiting])["unscheduled"] == 0).all()


def test_the_models_page_says_how_many_of_the_chosen_models_pods_wait_and_why(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, stranded, waiting = with_unscheduled_read(seeded.url, tmp_path / "pods.db",
                                                   stranded_note)
    page = open_page(url, "views/models.py", monkeypatch)
    shown = {}
    for model in (stranded, waiting):
        page.selectbox[0].set_value(model).run()
        assert not page.exception, [e.value for e in page.exception]
        shown[model] = [as_shown(c.value) for c in page.caption
                        if c.value.startswith("Unscheduled at the newest tick")]
    assert shown == {
        stranded: ["Unscheduled at the newest tick: 2 pods no node has bound (Pending); "
                   + stranded_note(stranded)],
        waiting: ["Unscheduled at the newest tick: 1 pod no node has bound (Pending)"]}
