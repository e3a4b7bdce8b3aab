"""The Models page shows what was done to a model's history before its newest forecast (the
forecast's notes, e.g. negative values clipped to 0): a column of the All models table, blank
for a forecast without notes, and a caption under the chosen model; a store older than the notes
(migration 0023) shows the page with none. Rendered by Streamlit's AppTest over copies of a store
the real core filled."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from dashboard_support import (
    Seeded,
    all_models_table,
    as_shown,
    copy_store,
    copy_store_at,
    open_page,
)

NOTED = "llama-3-70b"
NOTES = ["3 negative value(s) clipped to 0", "timestamps were out of order (sorted)"]
SHOWN = "3 negative value(s) clipped to 0; timestamps were out of order (sorted)"


def _copy(seeded: Seeded, tmp_path: Path) -> str:
    return copy_store(seeded.url, tmp_path / "notes.db")


def _with_notes(seeded: Seeded, tmp_path: Path) -> str:
    """A copy of the seeded store where NOTED's newest forecast has NOTES."""
    url = _copy(seeded, tmp_path)
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
        db.execute("UPDATE forecasts SET notes_json = ? WHERE id = (SELECT max(id) FROM "
                   "forecasts WHERE model = ?)", (json.dumps(NOTES), NOTED))
        assert db.total_changes == 1
        db.commit()
    return url


def _notes_captions(url: str, model: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    at = open_page(url, "views/models.py", monkeypatch)
    at.selectbox[0].set_value(model).run()
    assert not at.exception, [e.value for e in at.exception]
    return [as_shown(c.value) for c in at.caption if "cleaned input" in c.value]


def test_the_all_models_table_shows_the_notes_of_each_models_newest_forecast_blank_when_none(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = all_models_table(_with_notes(seeded, tmp_path), monkeypatch)
    assert table.loc[NOTED, "forecast_notes"] == SHOWN
    assert set(table.drop(index=NOTED)["forecast_notes"]) == {""}


def test_a_model_chosen_whose_newest_forecast_has_notes_shows_them_in_a_caption(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _with_notes(seeded, tmp_path)
    assert _notes_captions(url, NOTED, monkeypatch) == [
        f"Newest forecast made from cleaned input: {SHOWN}"]


def test_a_model_chosen_whose_newest_forecast_has_no_notes_shows_no_such_caption(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _with_notes(seeded, tmp_path)
    assert _notes_captions(url, "whisper-asr", monkeypatch) == []


def test_a_store_older_than_the_forecast_notes_shows_the_models_page_with_none(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = all_models_table(copy_store_at(seeded.url, tmp_path / "notes.db", "0022"),
                             monkeypatch)
    assert len(table) == 6
    assert set(table["forecast_notes"]) == {""}
