"""``forecast run --csv`` reads every model on the job's step grid: rows sparser than the step
(a 10-minute series next to 1-minute ones, or a missing hour) leave steps without a row. Those
are missing data, never zeros, and each model's warnings say how many and why."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import numpy as np
from typer.testing import CliRunner, Result

from controlplane.cli.forecast import app
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



def test_rows_a_step_apart_with_sub_second_jitter_are_told_to_round_not_to_coarsen_the_step(
        tmp_path: Path) -> None:
    jitter_ms = np.random.default_rng(3).integers(-50, 51, 720)
    trace = tmp_path / "t.csv"
    trace.write_text("ts,model,rate_rps\n" + "".join(
        f"{(START + timedelta(minutes=i, milliseconds=int(j))).isoformat()},x,100\n"
        for i, j in enumerate(jitter_ms)))
    warnings = json.loads(run_csv(trace, tmp_path, "60s").stdout)["per_model"]["x"]["warnings"]
    assert any("the 60-s step with sub-second jitter" in w
               and w.endswith("round the timestamps to whole seconds") for w in warnings), warnings
    assert not any("--step" in w for w in warnings), warnings
