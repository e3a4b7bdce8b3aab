"""The forecast job prunes its state dir: gone models' state after the retention, dead temp
files after an hour; never another shard's files nor a file Headroom did not write."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.forecast import app
from controlplane.forecast_job import JobConfig, JobReport, Shard, run_job
from controlplane.forecast_state import StateFile, prunable
from controlplane.settings import ConfigError, load_settings
from controlplane.store import Store
from forecaster.persist import save_state, state_path
from tests.forecasting.builders import diurnal, long_csv
from tests.forecasting.test_fit_budget import _Only
from tests.forecasting.test_forecast_job import MODELS, NOW, filled_store

DAY_S = 86_400.0
HOUR_S = 3_600.0
WHOLE_FLEET = Shard()


def _age(path: Path, age_s: float) -> Path:
    modified_s = time.time() - age_s
    os.utime(path, (modified_s, modified_s))
    return path


def _state(state: Path, model: str, method: str = "persistence") -> Path:
    return state_path(state, model, method)


def _temp(state: Path, model: str, age_s: float, random: str = "k3x_9q2a") -> Path:
    path = state / f".{_state(state, model).name}.{random}.tmp"  # as save_state's mkstemp
    path.write_text('{"version": 1, "ser')
    return _age(path, age_s)


def _config(state: Path, shard: Shard = WHOLE_FLEET, retention_s: float = 7 * DAY_S) -> JobConfig:
    return JobConfig(method="persistence", history_s=43_200, state_dir=state, shard=shard,
                     state_retention_s=retention_s)


def _first_run(url: str, state: Path) -> Store:
    """A store of every model, and a run that saved each model's state."""
    store = filled_store(url, days=0.5)
    run_job(store, None, NOW, _config(state))
    assert len(list(state.glob("*.json"))) == len(MODELS)
    return store


def _later_run(store: Store, state: Path, listed: list[str], shard: Shard = WHOLE_FLEET,
               retention_s: float = 7 * DAY_S) -> JobReport:
    return run_job(_Only(store, listed), None, NOW + timedelta(minutes=5),
                   _config(state, shard, retention_s))


def test_the_state_of_a_model_gone_for_longer_than_the_retention_is_removed_a_recent_one_kept(
        sqlite_url: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = _first_run(sqlite_url, state)
    long_gone, lately_gone, listed = MODELS[0], MODELS[1], MODELS[2:]
    _age(_state(state, long_gone), 8 * DAY_S)
    _age(_state(state, lately_gone), 6 * DAY_S)
    other_method = _state(state, listed[0], "level")  # a listed model's: kept at any age
    save_state(other_method, {"version": 1, "series_id": listed[0], "step_s": 60})
    _age(other_method, 30 * DAY_S)
    report = _later_run(store, state, listed)
    assert report.pruned == 1
    assert not _state(state, long_gone).exists()
    assert _state(state, lately_gone).exists() and other_method.exists()
    assert all(_state(state, m).exists() for m in listed)


def test_temp_files_of_a_killed_run_go_after_an_hour_and_younger_ones_stay(
        sqlite_url: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = _first_run(sqlite_url, state)
    dead = _temp(state, MODELS[0], 2 * HOUR_S)
    of_a_gone_model = _temp(state, "retired-model", 3 * HOUR_S)
    young = _temp(state, MODELS[1], 10 * 60)
    report = _later_run(store, state, MODELS)
    assert report.pruned == 2
    assert not dead.exists() and not of_a_gone_model.exists() and young.exists()


def test_files_headroom_did_not_write_are_never_removed_whatever_their_age(
        sqlite_url: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = _first_run(sqlite_url, state)
    gone = _state(state, "retired-model")
    foreign = {
        "notes.txt": "x", "retired-model.json": "{}", ".retired-model.json.k3x_9q2a.tmp": "x",
        f"{gone.name}.bak": "{}", gone.name.replace(".persistence.", ".arima."): "{}",
        # the name of a Headroom state file, but its doc is of another model, or not a doc
        gone.name.replace("retired-model", "retired-modes"):
            json.dumps({"version": 1, "series_id": "retired-model", "step_s": 60}),
        _state(state, "not-json").name: "this is not JSON"}
    for name, text in foreign.items():
        (state / name).write_text(text)
        _age(state / name, 30 * DAY_S)
    (state / _state(state, "a-directory").name).mkdir()
    _age(state / _state(state, "a-directory").name, 30 * DAY_S)
    save_state(gone, {"version": 1, "series_id": "retired-model", "step_s": 60})
    _age(gone, 30 * DAY_S)
    report = _later_run(store, state, MODELS)
    assert report.pruned == 1 and not gone.exists()  # the one Headroom file of a gone model
    assert all((state / name).read_text() == text for name, text in foreign.items())
    assert (state / _state(state, "a-directory").name).is_dir()


def test_two_shards_sharing_a_state_dir_each_remove_only_their_own_gone_models(
        sqlite_url: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = _first_run(sqlite_url, state)
    shards = [Shard(0, 2), Shard(1, 2)]
    gone = [next(m for m in MODELS if shard.owns(m)) for shard in shards]
    listed = [m for m in MODELS if m not in gone]
    temps = [_temp(state, m, 2 * HOUR_S) for m in gone]
    for model in gone:
        _age(_state(state, model), 8 * DAY_S)
    first = _later_run(store, state, listed, shard=shards[0])
    assert first.pruned == 2  # its gone model's state and temp file
    assert not _state(state, gone[0]).exists() and not temps[0].exists()
    assert _state(state, gone[1]).exists() and temps[1].exists()  # the other shard's
    second = _later_run(store, state, listed, shard=shards[1])
    assert second.pruned == 2 and not _state(state, gone[1]).exists() and not temps[1].exists()
    assert sorted(p.name for p in state.iterdir()) == sorted(_state(state, m).name
                                                             for m in listed)


def test_a_retention_of_zero_keeps_gone_models_state_and_still_removes_dead_temp_files(
        sqlite_url: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = _first_run(sqlite_url, state)
    _age(_state(state, MODELS[0]), 300 * DAY_S)
    dead = _temp(state, MODELS[0], 2 * HOUR_S)
    report = _later_run(store, state, MODELS[1:], retention_s=0.0)
    assert report.pruned == 1 and not dead.exists() and _state(state, MODELS[0]).exists()


def test_a_source_that_lists_no_model_removes_no_state_file(sqlite_url: str,
                                                           tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = _first_run(sqlite_url, state)
    for model in MODELS:
        _age(_state(state, model), 30 * DAY_S)
    report = _later_run(store, state, [])
    assert report.models == 0 and report.pruned == 0
    assert len(list(state.glob("*.json"))) == len(MODELS)


def test_pruning_by_name_and_age_is_a_function_of_the_file_list_and_the_state_dirs_clock() -> None:
    now_s = 1_000_000_000.0
    gone = state_path(Path(), "gone", "auto").name
    files = [StateFile(gone, now_s - 8 * DAY_S), StateFile(f".{gone}.abcdefgh.tmp", now_s - 7200),
             StateFile(state_path(Path(), "kept", "auto").name, now_s - 9 * DAY_S),
             StateFile(f".{gone}.abcdefgh.tmp.1", now_s - 7200)]
    assert prunable(files, now_s, Shard(), ["kept"], 7 * DAY_S) == (
        [f".{gone}.abcdefgh.tmp"], [gone])
    assert prunable(files, now_s, Shard(), ["kept"], 9 * DAY_S) == (
        [f".{gone}.abcdefgh.tmp"], [])


def test_forecast_run_reports_the_pruned_files_in_its_summary_and_json(
        tmp_path: Path) -> None:
    state = tmp_path / "s"
    save_state(_state(state, "retired-model"),
               {"version": 1, "series_id": "retired-model", "step_s": 600})
    _age(_state(state, "retired-model"), 8 * DAY_S)
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(2, 600, seed=21)}, 600)
    args = ["run", "--csv", str(trace), "--no-store", "--step", "10m", "--history", "1d",
            "--method", "persistence", "--workers", "1", "--state-dir", str(state)]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["pruned_state_files"] == 1
    _temp(state, "x", 2 * HOUR_S)
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "; pruned 1 state file(s)" in table.stderr


def test_the_state_retention_setting_defaults_to_seven_days_and_refuses_a_negative_value(
        ) -> None:
    assert load_settings().forecast.state_retention_s == 7 * DAY_S
    assert load_settings(forecast={"state_retention_s": 0}).forecast.state_retention_s == 0
    with pytest.raises(ConfigError, match=r"forecast\.state_retention_s"):
        load_settings(forecast={"state_retention_s": -1})
