"""``headroom forecast backtest``: the DESIGN.md predictions contract and one-line errors."""

from __future__ import annotations

import json
import os
import stat
import threading
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from controlplane.cli.forecast import app
from controlplane.cli.paths import write_atomically
from tests.forecasting.builders import START, diurnal, long_csv, write_csv

runner = CliRunner()


def backtest(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["backtest", "--workers", "1", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def two_models(tmp_path: Path) -> Path:
    return long_csv(tmp_path / "trace.csv", {"a": diurnal(3, 600, seed=1),
                                             "b": diurnal(3, 600, seed=2, level=40)}, 600)


def test_predictions_follow_the_contract(two_models: Path, tmp_path: Path) -> None:
    out = tmp_path / "pred.csv"
    code, stdout, _ = backtest("--csv", str(two_models), "--time-col", "ts", "--value-col",
                               "rate_rps", "--series-col", "model", "--horizon", "20m",
                               "--test-fraction", "0.3", "--predictions-out", str(out),
                               "--method", "level", "--json")
    assert code == 0
    pred = pd.read_csv(out)
    assert list(pred.columns) == ["series", "origin", "target", "yhat", "p90"]
    a = pred[pred["series"] == "a"]
    origins = pd.to_datetime(a["origin"]).drop_duplicates()
    assert len(origins) == round(432 * 0.3)  # one origin per step in the last 30%
    assert (origins.diff().dropna() == pd.Timedelta("10min")).all()
    lead = pd.to_datetime(a["target"]) - pd.to_datetime(a["origin"])
    assert sorted(lead.unique()) == [pd.Timedelta(0), pd.Timedelta("10min")]
    assert pd.to_datetime(a["origin"]).max() == pd.Timestamp("2025-03-05 23:50:00")
    assert (pred["p90"] >= pred["yhat"]).all() and (pred["yhat"] >= 0).all()
    doc = json.loads(stdout)
    assert doc["series"]["a"]["origins"] == 130
    assert doc["series"]["a"]["best_baseline"] in ("persistence", "hour_mean", "seasonal_naive")


def test_series_names_that_look_like_numbers_are_kept_as_written(tmp_path: Path) -> None:
    path = long_csv(tmp_path / "trace.csv", {name: diurnal(1, 600, seed=i) for i, name
                                             in enumerate(("007", "7", "1e3"))}, 600)
    out = tmp_path / "pred.csv"
    code, _, stderr = backtest("--csv", str(path), "--time-col", "ts", "--value-col",
                               "rate_rps", "--series-col", "model", "--predictions-out",
                               str(out), "--method", "persistence")
    assert code == 0, stderr
    pred = pd.read_csv(out, dtype={"series": str})
    assert list(pred["series"].drop_duplicates()) == ["007", "7", "1e3"]
    assert pred.groupby("series").size().nunique() == 1  # 007 and 7 not merged


def test_series_names_and_a_path_with_brackets_are_shown_as_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a short path: the table's title stays on one line
    long_csv(tmp_path / "t[eu].csv", {"a[/x]": diurnal(1, 600), "[b]y": diurnal(1, 600)}, 600)
    code, stdout, stderr = backtest("--csv", "t[eu].csv", "--time-col", "ts", "--value-col",
                                    "rate_rps", "--series-col", "model", "--predictions-out",
                                    "pred.csv", "--method", "persistence")
    assert code == 0, stderr
    assert "a[/x]" in stdout and "[b]y" in stdout  # not read as Rich markup
    assert "backtest t[eu].csv (persistence" in stdout


def test_a_series_asked_for_twice_is_backtested_once(two_models: Path, tmp_path: Path) -> None:
    once, twice = tmp_path / "once.csv", tmp_path / "twice.csv"
    for out, series in ((once, ["--series", "b"]), (twice, ["--series", "b", "--series", "b"])):
        code, _, stderr = backtest("--csv", str(two_models), "--time-col", "ts", "--value-col",
                                   "rate_rps", "--series-col", "model", "--predictions-out",
                                   str(out), "--method", "persistence", *series)
        assert code == 0, stderr
    assert twice.read_text() == once.read_text()
    assert set(pd.read_csv(twice)["series"]) == {"b"}


def test_one_minute_data_gets_twenty_steps_and_thirty_minute_data_one(tmp_path: Path) -> None:
    for step, expected in ((60, 20), (1800, 1)):
        path = long_csv(tmp_path / f"s{step}.csv", {"m": diurnal(2, step)}, step)
        out = tmp_path / f"p{step}.csv"
        code, _, _ = backtest("--csv", str(path), "--time-col", "ts", "--value-col", "rate_rps",
                              "--series-col", "model", "--predictions-out", str(out),
                              "--method", "persistence")
        assert code == 0
        pred = pd.read_csv(out)
        assert pred.groupby("origin").size().unique().tolist() == [expected]
        if step == 1800:
            assert (pred["origin"] == pred["target"]).all()


def test_numeric_minutes_are_read_and_written_back_as_minutes(tmp_path: Path) -> None:
    values = diurnal(1, 60)
    path = write_csv(tmp_path / "mc.csv", {"minute": list(range(values.size)),
                                           "rpm": [round(v, 2) for v in values]})
    out = tmp_path / "p.csv"
    code, _, _ = backtest("--csv", str(path), "--time-col", "minute", "--value-col", "rpm",
                          "--predictions-out", str(out), "--method", "persistence")
    assert code == 0
    pred = pd.read_csv(out)
    assert pred["series"].unique().tolist() == ["rpm"]
    assert pred["origin"].min() == values.size - round(values.size * 0.3)
    assert (pred["target"] - pred["origin"]).max() == 19


def test_out_of_order_rows_are_sorted_with_a_warning(tmp_path: Path) -> None:
    path = long_csv(tmp_path / "t.csv", {"a": diurnal(1, 600)}, 600)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], *reversed(lines[1:])]) + "\n")
    code, _, stderr = backtest("--csv", str(path), "--time-col", "ts", "--value-col",
                               "rate_rps", "--series-col", "model", "--predictions-out",
                               str(tmp_path / "p.csv"), "--method", "persistence")
    assert code == 0
    assert "series 'a': timestamps were out of order (sorted)" in stderr


@pytest.mark.parametrize(("content", "args", "message"), [
    ("ts,model,rate\n2025-01-01 00:00:00,a,1\n", ["--value-col", "rate_rps"],
     "no column 'rate_rps' (found: ts, model, rate)"),
    ("ts,model,rate_rps\n2025-01-01 00:00:00,a,1\n2025-01-01 00:00:00,a,2\n"
     "2025-01-01 00:10:00,a,2\n", [],
     "bad.csv: series 'a': duplicate timestamp 2025-01-01T00:00:00"),
    ("ts,model,rate_rps\n2025-01-01 00:00:00,a,1\nyesterday,a,2\n", [],
     "column 'ts': invalid timestamp at line 3: 'yesterday'"),
    ("ts,model,rate_rps\n2025-01-01 00:00:00,a,1\n,a,2\n", [],
     "column 'ts': empty timestamp at line 3"),
    ("", [], "empty file"),
    ("ts,model,rate_rps\n1,a,1\n2,a,2\n", [], "is numeric; give its unit with --time-unit"),
    ("ts,model,rate_rps\n2025-01-01 00:00:00,a,x\n2025-01-01 00:10:00,a,y\n", [],
     "bad.csv: series 'a': no numeric values"),
    ("ts,model,rate_rps\n2025-01-01 00:00:00,a,1\n2025-01-01 00:00:00,,2\n", [],
     "bad.csv: column 'model': empty series name at line 3"),
    ("ts,model,rate_rps,rate_rps\n2025-01-01 00:00:00,a,1,9\n2025-01-01 00:10:00,a,2,9\n", [],
     "bad.csv: column 'rate_rps' appears 2 times in the header; rename all but one"),
    ("ts,model,rate_rps\n2025-01-01 00:00:00,a,1e308\n2025-01-01 00:10:00,a,-inf\n", [],
     "bad.csv: series 'a': no usable value (2 infinite or above 1e+15, treated as missing)"),
    ("ts,model,rate_rps\n1735689600,a,1\n1735690200,a,2\n", ["--time-unit", "h"],
     "bad.csv: column 'ts': 1735689600 at line 2 is out of range as h since 1970"),
])
def test_bad_input_is_one_line_naming_the_problem(tmp_path: Path, content: str,
                                                  args: list[str], message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    base = ["--csv", str(path), "--time-col", "ts", "--value-col", "rate_rps", "--series-col",
            "model", "--predictions-out", str(tmp_path / "p.csv")]
    code, stdout, stderr = backtest(*base, *args)
    assert code == 2
    assert message in stderr.replace("\n", "")
    assert "Traceback" not in stderr + stdout



def test_a_byte_that_is_not_utf8_is_named_with_its_line_not_a_position_in_a_buffer(
        tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b"ts,model,rate_rps\n2025-01-01 00:00:00,a,1\n2025-01-01 00:10:00,a,2\n"
                     b"2025-01-01 00:20:00,caf\xe9,3\n")  # Latin-1, not UTF-8
    code, stdout, stderr = backtest("--csv", str(path), "--time-col", "ts", "--value-col",
                                    "rate_rps", "--series-col", "model", "--predictions-out",
                                    str(tmp_path / "p.csv"))
    assert code == 2
    assert (f"error: {path}: not UTF-8 text: byte 0xe9 at line 4 (save the file as UTF-8)"
            in stderr.replace("\n", ""))
    assert "Traceback" not in stderr + stdout

BAD_DATA = "bad data (a wrong metric or sign?), not zero traffic; nothing to forecast"


@pytest.mark.parametrize(("values", "problem"), [
    (-diurnal(1, 600), f"all 144 numeric value(s) are negative: {BAD_DATA}"),
    (np.where(np.arange(144) % 2, 0.0, -3.0), f"no positive value (72 negative, 72 zero): "
                                              f"{BAD_DATA}"),
], ids=["every value negative", "negatives among zeros"])
def test_a_series_without_a_positive_value_is_refused_by_backtest_and_run_in_the_same_words(
        tmp_path: Path, values: np.ndarray, problem: str) -> None:
    csv = long_csv(tmp_path / "t.csv", {"good": diurnal(1, 600), "neg": values}, 600)
    code, stdout, stderr = backtest("--csv", str(csv), "--time-col", "ts", "--value-col",
                                    "rate_rps", "--series-col", "model", "--predictions-out",
                                    str(tmp_path / "p.csv"), "--method", "persistence")
    assert code == 2, stdout + stderr
    assert f"error: {csv}: series 'neg': {problem}" in stderr.replace("\n", "")
    assert "clipped" not in stderr  # refused, not backtested as a zero-traffic series
    assert not (tmp_path / "p.csv").exists()
    run = runner.invoke(app, ["run", "--csv", str(csv), "--no-store", "--step", "10m",
                              "--history", "3d", "--method", "persistence", "--workers", "1",
                              "--state-dir", str(tmp_path / "s"), "--json"])
    assert run.exit_code == 1, run.output
    doc = json.loads(run.stdout)
    assert list(doc["per_model"]) == ["good"]  # the others are still forecast
    assert doc["failed"]["neg"].startswith(
        f"history unavailable: series 'neg': {problem} (in {csv} between ")


@pytest.mark.parametrize(("args", "message"), [
    (["--horizon", "soon"], "--horizon 'soon'"),
    (["--test-fraction", "1.5"], "--test-fraction 1.5: must be in (0, 1)"),
    (["--method", "magic"], "--method 'magic': choose one of"),
])
def test_bad_options_exit_2_with_the_option_named(two_models: Path, tmp_path: Path,
                                                 args: list[str], message: str) -> None:
    code, _, stderr = backtest("--csv", str(two_models), "--time-col", "ts", "--value-col",
                               "rate_rps", "--series-col", "model", "--predictions-out",
                               str(tmp_path / "p.csv"), *args)
    assert code == 2
    assert message in stderr.replace("\n", "")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    code, _, stderr = backtest("--csv", str(tmp_path / "nope.csv"), "--time-col", "ts",
                               "--value-col", "v", "--predictions-out", str(tmp_path / "p.csv"))
    assert code == 2
    assert "nope.csv: file not found" in stderr.replace("\n", "")


def test_a_constant_series_is_forecast_as_that_constant(tmp_path: Path) -> None:
    path = long_csv(tmp_path / "c.csv", {"flat": np.full(432, 7.0)}, 600)
    out = tmp_path / "p.csv"
    code, _, _ = backtest("--csv", str(path), "--time-col", "ts", "--value-col", "rate_rps",
                          "--series-col", "model", "--predictions-out", str(out),
                          "--method", "level")
    assert code == 0
    pred = pd.read_csv(out)
    assert np.allclose(pred["yhat"], 7.0) and np.allclose(pred["p90"], 7.0)


def test_the_predictions_file_may_not_be_the_input_and_the_input_stays_intact(
        two_models: Path, tmp_path: Path) -> None:
    before = two_models.read_bytes()
    for out in (two_models, tmp_path / "sub" / ".." / two_models.name):
        code, _, stderr = backtest("--csv", str(two_models), "--time-col", "ts", "--value-col",
                                   "rate_rps", "--series-col", "model", "--predictions-out",
                                   str(out), "--method", "persistence")
        assert code == 2
        assert "is the input file of --csv" in stderr.replace("\n", "")
    assert two_models.read_bytes() == before


def test_a_predictions_path_under_a_file_is_refused_before_any_work(
        two_models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_work(*_: object) -> None:
        raise AssertionError("the backtest ran")

    monkeypatch.setattr("forecaster.backtest.run_all", no_work)
    code, _, stderr = backtest("--csv", str(two_models), "--time-col", "ts", "--value-col",
                               "rate_rps", "--series-col", "model", "--predictions-out",
                               str(two_models / "p.csv"))
    assert code == 2
    assert "a parent of it is a file, not a directory" in stderr.replace("\n", "")


def test_a_pipe_as_the_output_is_written_through_not_replaced_by_a_file(tmp_path: Path) -> None:
    pipe = tmp_path / "predictions.fifo"
    os.mkfifo(pipe)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_text()), daemon=True)
    reader.start()
    write_atomically(pipe, lambda path: path.write_text("series,origin,target,yhat,p90\n"))
    reader.join(timeout=30)
    assert got == ["series,origin,target,yhat,p90\n"]
    assert stat.S_ISFIFO(pipe.stat().st_mode)  # renaming over /dev/null would replace it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predictions.fifo"]


def test_a_failed_write_leaves_the_previous_file_whole_and_no_temporary_behind(
        tmp_path: Path) -> None:
    path = tmp_path / "pred.csv"
    path.write_text("series,origin,target,yhat,p90\na,1,1,1.0,2.0\n")

    def half_then_full_disk(tmp: Path) -> None:
        tmp.write_text("series,origin,tar")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_atomically(path, half_then_full_disk)
    assert path.read_text() == "series,origin,target,yhat,p90\na,1,1,1.0,2.0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pred.csv"]
    write_atomically(path, lambda tmp: tmp.write_text("new\n"))
    assert path.read_text() == "new\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "pred.csv"]


def test_gaps_an_off_step_horizon_and_unscored_series_are_explained(tmp_path: Path) -> None:
    path = long_csv(tmp_path / "g.csv", {"a": diurnal(3, 600)}, 600)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:201] + lines[261:]) + "\n")  # ten hours without a row
    code, stdout, stderr = backtest("--csv", str(path), "--time-col", "ts", "--value-col",
                                    "rate_rps", "--series-col", "model", "--predictions-out",
                                    str(tmp_path / "p.csv"), "--method", "persistence",
                                    "--horizon", "25m", "--json")
    assert code == 0
    text = " ".join(stderr.split())  # the console wraps long lines
    assert "series 'a': 60 step(s) without a sample: missing data, not zeros" in text
    assert "--horizon 1500 s is not a whole number of this series' steps (600 s): " \
           "the headline lead is 1800 s" in text
    code, stdout, stderr = backtest("--csv", str(path), "--time-col", "ts", "--value-col",
                                    "rate_rps", "--series-col", "model", "--predictions-out",
                                    str(tmp_path / "p.csv"), "--method", "persistence",
                                    "--horizon", "7d", "--test-fraction", "0.05", "--json")
    assert code == 0
    note = json.loads(stdout)["series"]["a"]["notes"]
    assert len(note) == 1 and note[0].startswith("none of the 22 origin(s) has an actual "
                                                 "604800 s after its last observation")
    assert "series 'a': none of the 22 origin(s)" in " ".join(stderr.split())


def test_a_series_of_zeros_is_forecast_zero_with_the_reason_said_beside_the_table(
        tmp_path: Path) -> None:
    path = long_csv(tmp_path / "z.csv", {"idle": np.zeros(432)}, 600)
    out = tmp_path / "p.csv"
    code, stdout, stderr = backtest("--csv", str(path), "--time-col", "ts", "--value-col",
                                    "rate_rps", "--series-col", "model", "--predictions-out",
                                    str(out), "--method", "level", "--json")
    assert code == 0, stderr
    assert np.allclose(pd.read_csv(out)["yhat"], 0.0)  # zero traffic, forecast as such ...
    idle = json.loads(stdout)["series"]["idle"]
    pairs, origins = idle["product"]["pairs"], idle["origins"]
    assert idle["product"]["wape"] is None and pairs > 0
    # ... and said: the table's WAPE is "-" (0 / 0), so the reason goes beside it
    note = (f"all {pairs} scored actual(s) at the headline lead are 0: WAPE is undefined; "
            f"fallbacks: no_traffic_before_anchor x{origins}")
    assert idle["notes"] == [note]
    assert f"series 'idle': {note}" in " ".join(stderr.split())


def jittered_trace(path: Path, values: np.ndarray, jitter_ms: np.ndarray) -> Path:
    """One row a minute from START, each off its minute by ``jitter_ms`` (scrape jitter)."""
    path.write_text("ts,model,rate_rps\n" + "".join(
        f"{(START + timedelta(minutes=i, milliseconds=int(j))).isoformat()},x,{v:.4f}\n"
        for i, (v, j) in enumerate(zip(values, jitter_ms, strict=True))))
    return path


def test_a_csv_with_scrape_jitter_is_backtested_on_its_step_with_one_value_per_step(
        tmp_path: Path) -> None:
    jitter_ms = np.random.default_rng(5).integers(-2900, 2901, 1440)
    trace = jittered_trace(tmp_path / "j.csv", diurnal(1, 60), jitter_ms)
    out = tmp_path / "p.csv"
    code, stdout, stderr = backtest("--csv", str(trace), "--time-col", "ts", "--value-col",
                                    "rate_rps", "--series-col", "model", "--predictions-out",
                                    str(out), "--method", "persistence", "--json")
    assert code == 0, stderr
    series = json.loads(stdout)["series"]["x"]
    assert (series["step_s"], series["origins"]) == (60, 432)
    assert "warning" not in stderr  # no step without a sample, no samples averaged
    origins = pd.to_datetime(pd.read_csv(out)["origin"]).drop_duplicates()
    assert (origins.diff().dropna() == pd.Timedelta("60s")).all()


def test_rows_at_or_after_an_origin_change_no_forecast_made_at_it_despite_jitter(
        tmp_path: Path) -> None:
    values = diurnal(1, 60, seed=4)
    jitter_ms = np.random.default_rng(6).integers(-2900, 2901, values.size)
    jitter_ms[0] = 2900  # the grid starts late: rows a little early sit just before its times
    base = ["--time-col", "ts", "--value-col", "rate_rps", "--series-col", "model",
            "--method", "persistence", "--test-fraction", "0.05"]
    clean = jittered_trace(tmp_path / "clean.csv", values, jitter_ms)
    code, _, stderr = backtest("--csv", str(clean), *base, "--predictions-out",
                               str(tmp_path / "a.csv"))
    assert code == 0, stderr
    first = pd.read_csv(tmp_path / "a.csv")
    origin = pd.Timestamp(first["origin"].iloc[0], tz="UTC")
    row_at = pd.to_datetime([START + timedelta(minutes=i, milliseconds=int(j))
                             for i, j in enumerate(jitter_ms)], utc=True)
    changed = np.where(row_at >= origin, values * 10 + 1000, values)
    dirty = jittered_trace(tmp_path / "dirty.csv", changed, jitter_ms)
    code, _, stderr = backtest("--csv", str(dirty), *base, "--predictions-out",
                               str(tmp_path / "b.csv"))
    assert code == 0, stderr
    second = pd.read_csv(tmp_path / "b.csv")
    at = first["origin"] == first["origin"].iloc[0]
    pd.testing.assert_frame_equal(first[at], second[second["origin"] == first["origin"].iloc[0]])
    assert not first["yhat"].equals(second["yhat"])  # later origins did see the changed rows


def test_every_bad_series_is_named_on_a_line_of_its_own(tmp_path: Path) -> None:
    csv = long_csv(tmp_path / "t.csv", {"good": diurnal(1, 600), "nan1": np.full(144, np.nan),
                                        "nan2": np.full(144, np.nan)}, 600)
    code, _, stderr = backtest("--csv", str(csv), "--time-col", "ts", "--value-col",
                               "rate_rps", "--series-col", "model", "--predictions-out",
                               str(tmp_path / "p.csv"), "--method", "persistence")
    assert code == 2
    lines = stderr.replace(str(csv), "F").splitlines()
    assert "error: F: series 'nan1': no numeric values" in lines
    assert "error: F: series 'nan2': no numeric values" in lines
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize("horizon", ["20", "5m"])
def test_a_horizon_shorter_than_a_series_step_is_refused_naming_the_step(
        two_models: Path, tmp_path: Path, horizon: str) -> None:
    code, _, stderr = backtest("--csv", str(two_models), "--time-col", "ts", "--value-col",
                               "rate_rps", "--series-col", "model", "--predictions-out",
                               str(tmp_path / "p.csv"), "--method", "persistence",
                               "--horizon", horizon)
    assert code == 2
    text = stderr.replace("\n", "")
    assert f"--horizon {horizon} (" in text
    assert "is shorter than one step of series 'a' (600 s): give at least --horizon 600s" in text
    assert "series 'b' (600 s)" in text
    assert not (tmp_path / "p.csv").exists()


def test_the_cleaning_warnings_are_in_the_json_beside_the_notes(tmp_path: Path) -> None:
    values = diurnal(2, 600)
    values[[10, 11]] = np.nan
    values[20] = -4.0
    csv = long_csv(tmp_path / "t.csv", {"a": values}, 600)
    code, stdout, _ = backtest("--csv", str(csv), "--time-col", "ts", "--value-col", "rate_rps",
                               "--series-col", "model", "--predictions-out",
                               str(tmp_path / "p.csv"), "--method", "persistence", "--json")
    assert code == 0
    a = json.loads(stdout)["series"]["a"]
    assert a["warnings"] == ["2 non-numeric/NaN value(s) treated as missing",
                             "1 negative value(s) clipped to 0"]
    assert a["notes"] == []


def test_a_method_that_fell_back_is_said_under_the_table_with_the_reason(
        tmp_path: Path) -> None:
    csv = long_csv(tmp_path / "t.csv", {"short": diurnal(0.125, 60)}, 60)
    code, stdout, _ = backtest("--csv", str(csv), "--time-col", "ts", "--value-col", "rate_rps",
                               "--series-col", "model", "--predictions-out",
                               str(tmp_path / "p.csv"), "--method", "prophet")
    assert code == 0
    text = " ".join(stdout.split())
    assert "series 'short': --method prophet fell back at 54 of 54 origin(s) (short_history " \
           "x54); methods used: persistence x54" in text
