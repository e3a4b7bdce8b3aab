"""``forecast run --csv`` reads every model on the job's step grid: rows sparser than the step
(a 10-minute series next to 1-minute ones, or a missing hour) leave steps without a row. Those
are missing data, never zeros, and each model's warnings say how many and why."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner, Result

from controlplane.cli.forecast import app
from forecaster.sources.replay import CsvSource, read_trace
from forecaster.types import SourcedSeries
from tests.forecasting.builders import START, diurnal, long_csv


def run_csv(path: Path, tmp_path: Path, step: str) -> Result:
    return CliRunner().invoke(app, [
        "run", "--csv", str(path), "--no-store", "--step", step, "--history", "1d",
        "--method", "persistence", "--workers", "1", "--state-dir", str(tmp_path / "s"),
        "--json"])


def test_a_ten_minute_series_beside_a_one_minute_series_is_named_with_its_missing_steps(
        tmp_path: Path) -> None:
    one = long_csv(tmp_path / "one.csv", {"fine": diurnal(0.5, 60)}, 60).read_text()
    ten = long_csv(tmp_path / "ten.csv", {"coarse": diurnal(0.5, 600)}, 600).read_text()
    both = tmp_path / "both.csv"
    both.write_text(one + "".join(ten.splitlines(keepends=True)[1:]))
    result = run_csv(both, tmp_path, "60s")
    assert result.exit_code == 0, result.output
    per_model = json.loads(result.stdout)["per_model"]
    assert per_model["fine"]["warnings"] == []
    assert per_model["coarse"]["warnings"] == [
        "639 step(s) without a sample: missing data, not zeros (no forecast is scored where "
        "the actual is missing)",
        "rows every 600 s, coarser than the step of 60 s: most steps have no row (missing "
        "data, not zeros); give --step 600s or coarser"]
    assert "warning: model 'coarse': rows every 600 s, coarser than the step" in result.stderr


def test_a_missing_hour_in_a_csv_series_is_counted_as_missing_steps(tmp_path: Path) -> None:
    values = diurnal(0.5, 60)
    minutes = np.arange(values.size)
    kept = (minutes < 300) | (minutes >= 360)
    trace = long_csv(tmp_path / "t.csv", {"x": values}, 60)
    lines = trace.read_text().splitlines()

    trace.write_text("\n".join([lines[0]] + [line for line, keep in zip(lines[1:], kept,
                                                                          strict=True) if keep])
                     + "\n")
    result = run_csv(trace, tmp_path, "60s")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["per_model"]["x"]["warnings"] == [
        "60 step(s) without a sample: missing data, not zeros (no forecast is scored where "
        "the actual is missing)"]


def test_one_minute_rows_read_at_a_ten_minute_step_carry_no_warning(tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(0.5, 60)}, 60)
    result = run_csv(trace, tmp_path, "10m")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["per_model"]["x"]["warnings"] == []



def test_rows_a_step_apart_with_sub_second_jitter_fill_every_step_without_a_warning(
        tmp_path: Path) -> None:
    jitter_ms = np.random.default_rng(3).integers(-50, 51, 720)
    trace = tmp_path / "t.csv"
    trace.write_text("ts,model,rate_rps\n" + "".join(
        f"{(START + timedelta(minutes=i, milliseconds=int(j))).isoformat()},x,100\n"
        for i, j in enumerate(jitter_ms)))
    result = run_csv(trace, tmp_path, "60s")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["per_model"]["x"]["warnings"] == []


def jittered_csv(path: Path, offsets_s: list[float]) -> Path:
    """Model ``x`` with rows ``offsets_s`` after START, valued 10, 11, 12, ..."""
    path.write_text("ts,model,rate_rps\n" + "".join(
        f"{(START + timedelta(seconds=o)).isoformat()},x,{10 + i}\n"
        for i, o in enumerate(offsets_s)))
    return path


def read(path: Path, minutes: int, step_s: int = 60) -> SourcedSeries:
    return CsvSource(read_trace(path, "ts", "rate_rps", "model")).read_history(
        "x", START, START + timedelta(minutes=minutes), step_s)


def test_jittered_rows_a_step_apart_give_one_value_per_step_none_missing(tmp_path: Path) -> None:
    got = read(jittered_csv(tmp_path / "t.csv", [0.4, 59.7, 120.3, 179.8, 240.0, 300.2, 359.6,
                                                 420.1, 480.0, 539.9]), 10)
    assert got.series.values == tuple(float(v) for v in range(10, 20))
    assert got.warnings == ()


def test_a_row_further_than_five_percent_off_its_grid_time_stays_in_the_step_it_falls_in(
        tmp_path: Path) -> None:
    got = read(jittered_csv(tmp_path / "t.csv", [0.0, 56.9, 120.0, 177.1]), 4)  # 3.1 s, 2.9 s
    values = got.series.values
    assert (values[0], values[2], values[3]) == (10.5, 12.0, 13.0)  # 10 and 11 averaged
    assert np.isnan(values[1])
    assert got.warnings[0] == "1 sample(s) averaged into an occupied step"
    assert got.warnings[1].startswith("1 step(s) without a sample: missing data, not zeros")


def test_a_row_just_before_the_window_counts_in_its_first_step_and_one_just_before_its_end_not(
        tmp_path: Path) -> None:
    got = read(jittered_csv(tmp_path / "t.csv", [-0.3, 60.0, 120.0, 179.7]), 3)
    assert got.series.values == (10.0, 11.0, 12.0)


def test_rows_finer_than_the_step_are_averaged_over_the_step_they_fall_in(tmp_path: Path) -> None:
    got = read(jittered_csv(tmp_path / "t.csv", [10.0 * i for i in range(120)]), 20, 600)
    assert got.series.values == (float(np.mean(np.arange(10, 70))),
                                 float(np.mean(np.arange(70, 130))))


def _run_json(trace: Path, state_dir: Path) -> Any:
    """``forecast run --csv`` of ``trace`` at 60-s steps over its last hour (persistence, no
    store): its JSON document."""
    result = CliRunner().invoke(app, [
        "run", "--csv", str(trace), "--no-store", "--step", "60s", "--history", "1h",
        "--method", "persistence", "--workers", "1", "--state-dir", str(state_dir), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_newest_row_a_little_early_is_the_last_observation_of_the_run(tmp_path: Path) -> None:
    trace = jittered_csv(tmp_path / "t.csv", [60.0 * i for i in range(119)] + [60 * 119 - 0.3])
    doc = _run_json(trace, tmp_path / "s")
    assert doc["computed_at"] == "2025-03-03T02:00:00Z"  # START + 120 min
    assert doc["per_model"]["x"]["p50_last"] == 10 + 119
    assert doc["per_model"]["x"]["warnings"] == []


def test_a_newest_row_a_little_late_leaves_the_origin_on_the_step_grid(tmp_path: Path) -> None:
    trace = jittered_csv(tmp_path / "t.csv", [60.0 * i for i in range(119)] + [60 * 119 + 0.4])
    doc = _run_json(trace, tmp_path / "s")
    assert doc["computed_at"] == "2025-03-03T02:00:00Z"  # START + 120 min
    assert doc["per_model"]["x"]["p50_last"] == 10 + 119


def test_a_stray_row_in_an_occupied_step_is_averaged_with_the_warning_backtest_gives(
        tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(0.5, 60)}, 60)
    stray = (START + timedelta(minutes=100, seconds=2)).strftime("%Y-%m-%d %H:%M:%S")
    trace.write_text(trace.read_text() + f"{stray},x,9999\n")
    result = run_csv(trace, tmp_path, "60s")
    assert result.exit_code == 0, result.output
    warnings = ["timestamps were out of order (sorted)",
                "1 sample(s) averaged into an occupied step"]
    assert json.loads(result.stdout)["per_model"]["x"]["warnings"] == warnings
    backtest = CliRunner().invoke(app, [
        "backtest", "--csv", str(trace), "--time-col", "ts", "--value-col", "rate_rps",
        "--series-col", "model", "--predictions-out", str(tmp_path / "p.csv"),
        "--method", "persistence", "--workers", "1"])
    assert backtest.exit_code == 0, backtest.output
    assert [f"warning: {trace}: series 'x': {w}" for w in warnings] == [
        line for line in backtest.stderr.splitlines() if line.startswith("warning:")]
