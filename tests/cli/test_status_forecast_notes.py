"""`headroom status` shows what was done to a model's history before its newest forecast (the
forecast's notes, stored by `headroom forecast run`): a list in the JSON, empty when nothing was;
in the text, one line per model with notes under the models table, none for the others. A store
older than the notes (migration 0023) shows every forecast with none."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from clihelpers import WARM_HEADROOM, _env

from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store, downgrade
from tests.forecasting.builders import diurnal, long_csv

CLEANED, CLEAN = DEMO_MODELS[0].name, DEMO_MODELS[1].name
CLIPPED = "1 negative value(s) clipped to 0"


def _headroom(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, *args], env=_env(COLUMNS="200", **env),
                          capture_output=True, text=True, timeout=300)


def _forecast_run_with_a_negative_value(url: str, tmp_path: Path) -> None:
    """`headroom forecast run` over a CSV where CLEANED has one negative value, CLEAN none,
    into a store listing both models."""
    Store.open(url, migrate=True).upsert_models(DEMO_MODELS[:2])
    trace = long_csv(tmp_path / "t.csv", {CLEANED: diurnal(2, 600), CLEAN: diurnal(2, 600)}, 600)
    lines = trace.read_text().splitlines()
    row = [i for i, line in enumerate(lines) if f",{CLEANED}," in line][100]
    lines[row] = lines[row].rsplit(",", 1)[0] + ",-4.5"
    trace.write_text("\n".join(lines) + "\n")
    run = _headroom("forecast", "run", "--csv", str(trace), "--store", url, "--step", "10m",
                    "--history", "2d", "--method", "persistence", "--workers", "1",
                    "--state-dir", str(tmp_path / "state"))
    assert run.returncode == 0, run.stderr


def _forecasts_shown(url: str) -> dict[str, Any]:
    run = _headroom("status", "--json", HEADROOM_DB__URL=url)
    assert "Traceback" not in run.stderr, run.stderr
    return {m["name"]: m["forecast"] for m in json.loads(run.stdout)["models"]}


def test_status_json_lists_the_notes_of_a_forecast_made_from_a_csv_with_a_negative_value(
        sqlite_url: str, tmp_path: Path) -> None:
    _forecast_run_with_a_negative_value(sqlite_url, tmp_path)
    shown = _forecasts_shown(sqlite_url)
    assert shown[CLEANED]["notes"] == [CLIPPED]
    assert shown[CLEAN]["notes"] == []


def test_status_text_has_a_line_under_the_models_for_each_forecast_made_from_cleaned_input(
        sqlite_url: str, tmp_path: Path) -> None:
    _forecast_run_with_a_negative_value(sqlite_url, tmp_path)
    text = _headroom("status", HEADROOM_DB__URL=sqlite_url).stdout
    noted = [line for line in text.splitlines() if "made from cleaned input" in line]
    assert noted == [f"forecast of {CLEANED} made from cleaned input: {CLIPPED}"]
    assert text.index("Models") < text.index(noted[0]) < text.index("Pools")


def test_a_store_older_than_the_forecast_notes_shows_each_forecast_with_none(
        sqlite_url: str, tmp_path: Path) -> None:
    _forecast_run_with_a_negative_value(sqlite_url, tmp_path)
    store = Store.open(sqlite_url)
    downgrade(store.engine, "0022")
    store.engine.dispose()
    shown = _forecasts_shown(sqlite_url)
    assert shown[CLEANED]["notes"] == shown[CLEAN]["notes"] == []
    assert shown[CLEANED]["method"] == "persistence"
