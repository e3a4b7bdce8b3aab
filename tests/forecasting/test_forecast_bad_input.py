"""Bad input to ``forecast run`` and ``forecast backtest``: infinite and huge values are missing
data of their series only, a clipped last observation is said, the horizon is at least a step,
errors name the file's own lines and what a path or URL really is."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from controlplane.cli.forecast import app
from tests.forecasting.builders import diurnal, long_csv

runner = CliRunner()


def _run(path: Path, tmp_path: Path, *extra: str) -> Result:
    return runner.invoke(app, [
        "run", "--csv", str(path), "--no-store", "--step", "10m", "--history", "3d",
        "--method", "persistence", "--workers", "1", "--state-dir", str(tmp_path / "s"),
        *extra])


def _backtest(path: Path, tmp_path: Path, *extra: str) -> Result:
    return runner.invoke(app, [
        "backtest", "--workers", "1", "--csv", str(path), "--time-col", "ts", "--value-col",
        "rate_rps", "--series-col", "model", "--predictions-out", str(tmp_path / "p.csv"),
        "--method", "persistence", *extra])


def _with_values(path: Path, model: str, changes: dict[int, str]) -> Path:
    """The trace with the ``model`` rows at the given positions (among its rows) replaced."""
    lines = path.read_text().splitlines()
    rows = [i for i, line in enumerate(lines) if f",{model}," in line]
    for k, text in changes.items():
        lines[rows[k]] = lines[rows[k]].rsplit(",", 1)[0] + "," + text
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def two_series(tmp_path: Path) -> Path:
    return long_csv(tmp_path / "t.csv", {"chat": diurnal(2, 600, seed=1),
                                         "embed": diurnal(2, 600, seed=2, level=20)}, 600)


def test_infinite_and_huge_values_are_missing_data_counted_in_their_series_warnings(
        two_series: Path, tmp_path: Path) -> None:
    _with_values(two_series, "chat", {5: "inf", 9: "-Infinity", 40: "1e300"})
    for command, key in ((_run, "per_model"), (_backtest, "series")):  # forecast run, backtest
        done = command(two_series, tmp_path, "--json")
        assert done.exit_code == 0, done.output
        series = json.loads(done.stdout)[key]
        assert series["chat"]["warnings"] == ["3 infinite value(s) or above 1e+15 treated as "
                                              "missing"]
        assert series["embed"]["warnings"] == []


def test_an_infinite_value_of_another_series_does_not_fail_the_one_asked_for(
        two_series: Path, tmp_path: Path) -> None:
    _with_values(two_series, "chat", {5: "inf"})
    run = _run(two_series, tmp_path, "--models", "embed", "--json")
    assert run.exit_code == 0, run.output
    assert list(json.loads(run.stdout)["per_model"]) == ["embed"]
    backtest = _backtest(two_series, tmp_path, "--series", "embed")
    assert backtest.exit_code == 0, backtest.output
    assert "infinite" not in backtest.stderr


def test_a_series_of_only_infinite_values_is_refused_naming_them(tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {"good": diurnal(2, 600),
                                          "inf": np.full(288, np.inf)}, 600)
    run = _run(trace, tmp_path, "--json")
    assert run.exit_code == 1
    doc = json.loads(run.stdout)
    assert list(doc["per_model"]) == ["good"]
    assert "series 'inf': no usable value (288 infinite or above 1e+15, treated as missing)" \
        in doc["failed"]["inf"]
    backtest = _backtest(trace, tmp_path)
    assert backtest.exit_code == 2
    assert (f"error: {trace}: series 'inf': no usable value (288 infinite or above 1e+15, "
            "treated as missing)") in backtest.stderr.replace("\n", "")


def test_a_clipped_last_observation_says_the_forecast_starts_from_zero(
        two_series: Path, tmp_path: Path) -> None:
    _with_values(two_series, "chat", {k: "-3" for k in range(283, 288)})
    run = _run(two_series, tmp_path, "--json")
    assert run.exit_code == 0, run.output
    chat = json.loads(run.stdout)["per_model"]["chat"]
    assert chat["p50_last"] == 0.0
    assert chat["warnings"] == ["5 negative value(s) clipped to 0, the last observation among "
                                "them (-3 at 2025-03-04T23:50:00+00:00): the forecast starts "
                                "from a last observation of 0"]


def test_negatives_before_the_last_observation_do_not_say_the_forecast_starts_from_zero(
        two_series: Path, tmp_path: Path) -> None:
    _with_values(two_series, "chat", {280: "-3"})
    run = _run(two_series, tmp_path, "--json")
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["per_model"]["chat"]["warnings"] == [
        "1 negative value(s) clipped to 0"]


@pytest.mark.parametrize(("args", "message"), [
    (["--horizon", "20"], "--horizon 20 (20 s) is shorter than one step (--step 10m: 600 s): "
                          "give at least --horizon 600s (a number without a unit is seconds)"),
    (["--horizon", "5m"], "--horizon 5m (300 s) is shorter than one step (--step 10m: 600 s)"),
])
def test_forecast_run_refuses_a_horizon_shorter_than_one_step(
        two_series: Path, tmp_path: Path, args: list[str], message: str) -> None:
    run = _run(two_series, tmp_path, *args)
    assert run.exit_code == 2
    assert message in run.stderr.replace("\n", "")


def test_line_numbers_count_blank_lines_and_an_empty_cell_is_called_empty(
        two_series: Path, tmp_path: Path) -> None:
    lines = two_series.read_text().splitlines()
    with_blanks = [*lines[:4], "", *lines[4:8], "   ", *lines[8:]]
    with_blanks[32] = "garbage-ts,chat,5"  # the file's line 33
    two_series.write_text("\n".join(with_blanks) + "\n")
    backtest = _backtest(two_series, tmp_path)
    assert backtest.exit_code == 2
    assert "column 'ts': invalid timestamp at line 33: 'garbage-ts'" in backtest.stderr
    two_series.write_text("\n".join([*lines[:4], "", "", *lines[4:], ",,"]) + "\n")
    run = _run(two_series, tmp_path)
    assert run.exit_code == 2
    assert (f"column 'ts': empty timestamp at line {len(lines) + 3}\n"
            in run.stderr.replace(str(two_series), "F"))


def test_a_directory_as_the_csv_is_called_a_directory(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    run = _run(tmp_path / "in", tmp_path)
    assert run.exit_code == 2
    assert f"{tmp_path / 'in'}: a directory, not a CSV file" in run.stderr.replace("\n", "")


def test_a_semicolon_delimited_csv_gets_a_hint(tmp_path: Path) -> None:
    trace = tmp_path / "semi.csv"
    trace.write_text("ts;model;rate_rps\n2025-01-01 00:00:00;a;1\n")
    backtest = _backtest(trace, tmp_path)
    assert backtest.exit_code == 2
    assert ("no column 'ts' (found: ts;model;rate_rps); the header has ';' and no ',': is the "
            "file semicolon-delimited?") in backtest.stderr.replace("\n", "")


@pytest.mark.parametrize(("store", "message"), [
    ("sqlite:///{tmp}", "store sqlite:///{tmp}: {tmp} is a directory, not a database file"),
    ("garbage", "cannot open database garbage: not a database URL (Could not parse SQLAlchemy "
                "URL"),
])
def test_a_store_that_is_a_directory_or_no_url_is_said_to_be_so(
        two_series: Path, tmp_path: Path, store: str, message: str) -> None:
    run = runner.invoke(app, ["run", "--csv", str(two_series), "--store",
                              store.format(tmp=tmp_path), "--state-dir", str(tmp_path / "s")])
    assert run.exit_code == 2
    assert message.format(tmp=tmp_path) in run.stderr.replace("\n", "")
    assert "cannot reach" not in run.stderr and "no such database file" not in run.stderr
