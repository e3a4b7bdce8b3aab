"""The forecast job against the real SQL store (SQLite here; PostgreSQL with -m postgres)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from controlplane.cli.forecast import app
from controlplane.forecast_job import JobConfig, Shard, floor_time, run_job
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from forecaster.persist import load_state
from forecaster.types import TrafficSeries
from tests.forecasting.builders import START, diurnal, long_csv

NOW = datetime(2025, 3, 6, 12, 0, tzinfo=UTC)
MODELS = [m.name for m in DEMO_MODELS]


def filled_store(url: str, days: float = 2.0, now: datetime = NOW) -> Store:
    store = Store.open(url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    rows = []
    for k, name in enumerate(MODELS):
        values = diurnal(days, 60, seed=k, level=20 + 10 * k)
        start = now - timedelta(seconds=values.size * 60)
        rows += [(name, start + timedelta(minutes=i), float(v)) for i, v in enumerate(values)]
    store.save_observations(rows)
    return store


def test_job_forecasts_every_model_and_stores_them(store_url: str, tmp_path: Path) -> None:
    store = filled_store(store_url)
    config = JobConfig(method="level", history_s=2 * 86_400, state_dir=tmp_path / "state")
    report = run_job(store, store, NOW, config)
    assert report.models == len(MODELS) and not report.failed
    latest = store.latest_forecasts()
    assert sorted(latest) == sorted(MODELS)
    for made in latest.values():
        assert made.origin_at == NOW and len(made.p50) == 20
        assert made.method in ("level", "persistence", "hour_mean", "seasonal_naive")
        assert all(p90 >= p50 >= 0 for p50, p90 in zip(made.p50, made.p90, strict=True))


def test_shards_split_the_fleet_without_overlap(sqlite_url: str) -> None:
    store = filled_store(sqlite_url, days=0.5)
    seen: list[str] = []
    for i in range(3):
        config = JobConfig(method="persistence", history_s=43_200, shard=Shard(i, 3))
        seen += [f.series_id for f in run_job(store, None, NOW, config).forecasts]
    assert sorted(seen) == sorted(MODELS)


def test_shard_text_is_validated() -> None:
    assert Shard.parse("2/8") == Shard(2, 8)
    for bad in ("8/8", "x/2", "1", "-1/2"):
        with pytest.raises(ValueError, match="--shard"):
            Shard.parse(bad)


def test_the_forecast_origin_is_on_the_utc_step_grid_whatever_the_time_zone_of_now(
        sqlite_url: str) -> None:
    store = filled_store(sqlite_url, days=0.5)
    india = timezone(timedelta(hours=5, minutes=30))
    at = NOW - timedelta(minutes=50)  # 11:10 UTC, 16:40 in India
    for step_s in (60, 3600, 86_400):
        assert floor_time(at.astimezone(india), step_s) == floor_time(at, step_s)
    config = JobConfig(method="persistence", history_s=43_200, step_s=3600)
    origins = {f.origin_at for now in (at, at.astimezone(india))
               for f in run_job(store, None, now, config).forecasts}
    assert origins == {datetime(2025, 3, 6, 11, 0, tzinfo=UTC)}


def test_a_second_run_reuses_the_stored_fits(sqlite_url: str, tmp_path: Path) -> None:
    now = NOW + timedelta(days=3)  # data no other test has fitted in this process
    store = filled_store(sqlite_url, now=now)
    config = JobConfig(method="level", history_s=2 * 86_400, state_dir=tmp_path / "state",
                       workers=2)
    first = run_job(store, None, now, config)
    second = run_job(store, None, now + timedelta(minutes=1), config)
    assert first.reused == 0 and first.refits == len(MODELS)
    assert second.reused == len(MODELS) and second.refits == 0
    assert len(list((tmp_path / "state").glob("*.json"))) == len(MODELS)


def _after_a_first_run(url: str, tmp_path: Path, days: int, workers: int
                       ) -> tuple[Store, JobConfig, datetime, list[Path]]:
    """A store, a job config with a state dir, the time of a first run done, its state files."""
    now = NOW + timedelta(days=days)
    store = filled_store(url, now=now)
    config = JobConfig(method="level", history_s=2 * 86_400, state_dir=tmp_path / "state",
                       workers=workers)
    run_job(store, None, now, config)
    return store, config, now, sorted((tmp_path / "state").glob("*.json"))


def test_a_malformed_state_file_from_an_earlier_run_is_named_and_refitted(
        sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store, config, now, files = _after_a_first_run(sqlite_url, tmp_path, 4, workers=1)
    wrong_type, nan_coef, *rest = files
    doc = json.loads(wrong_type.read_text())
    doc["level"]["anchor_s"] = "yesterday"  # valid JSON, not a state save_state writes
    wrong_type.write_text(json.dumps(doc))
    doc = json.loads(nan_coef.read_text())
    next(iter(doc["level"]["coefs"].values()))[0] = float("nan")
    nan_coef.write_text(json.dumps(doc))  # json writes NaN; save_state never does
    for path in rest:
        path.write_text('{"version": 1, "series_id": ')  # truncated
    assert load_state(nan_coef) == {} and load_state(rest[0]) == {}
    second = run_job(store, None, now + timedelta(minutes=1), config)
    assert sorted(f.series_id for f in second.forecasts) == sorted(MODELS)
    assert not second.failed
    assert all(np.isfinite(f.p50).all() and np.isfinite(f.p90).all() for f in second.forecasts)
    malformed = [r.getMessage() for r in caplog.records if "malformed" in r.getMessage()]
    assert len(malformed) == 1 and str(wrong_type) in malformed[0]
    assert "TypeError" in malformed[0] and "refitting" in malformed[0]
    assert all(load_state(p)["level"] for p in (wrong_type, nan_coef, *rest))  # rewritten


def test_a_state_file_with_a_number_too_large_for_a_float_is_refitted_and_the_job_goes_on(
        sqlite_url: str, tmp_path: Path) -> None:
    store, config, now, files = _after_a_first_run(sqlite_url, tmp_path, 5, workers=2)
    overflowing = files[0]
    doc = json.loads(overflowing.read_text())
    next(iter(doc["level"]["coefs"].values()))[0] = 12345.678
    overflowing.write_text(json.dumps(doc).replace("12345.678", "1e400"))  # reads as inf
    assert load_state(overflowing) == {}
    again = run_job(store, store, now + timedelta(minutes=1), config)
    assert not again.failed and len(again.forecasts) == len(MODELS)
    assert not any(f.fallback_reason.startswith("fit_failed") for f in again.forecasts)
    assert all(np.isfinite(f.p50).all() and np.isfinite(f.p90).all() for f in again.forecasts)
    assert sorted(store.latest_forecasts()) == sorted(MODELS)
    assert load_state(overflowing)["level"]  # refitted and rewritten as finite JSON


@pytest.mark.parametrize("corruption", ["nested too deep", "integer too large for a float"])
def test_a_state_file_python_cannot_read_into_numbers_is_refitted_not_the_end_of_its_model(
        sqlite_url: str, tmp_path: Path, corruption: str) -> None:
    store, config, now, files = _after_a_first_run(sqlite_url, tmp_path, 7, workers=1)
    broken = files[0]
    doc = json.loads(broken.read_text())
    if corruption == "nested too deep":  # the json module raises RecursionError
        broken.write_text('{"version": 1, "level": ' + "[" * 100_000)
    else:  # valid JSON; float() of the anchor raises OverflowError
        doc["level"]["anchor_s"] = 123456789
        broken.write_text(json.dumps(doc).replace("123456789", "1" + "0" * 400))
    for minutes in (1, 2):  # the broken file must not cost its model every later run too
        again = run_job(store, None, now + timedelta(minutes=minutes), config)
        assert again.failed == {} and len(again.forecasts) == len(MODELS)
    assert load_state(broken)["level"]["anchor_s"] < 1e300  # refitted and rewritten


def test_a_stored_fit_of_the_wrong_shape_is_named_refitted_and_replaced_not_served_as_persistence(
        sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store, config, now, files = _after_a_first_run(sqlite_url, tmp_path, 6, workers=1)
    misshapen = files[0]
    doc = json.loads(misshapen.read_text())
    lead = next(iter(doc["level"]["coefs"]))
    width = len(doc["level"]["coefs"][lead])
    doc["level"]["coefs"][lead] = doc["level"]["coefs"][lead][:2]  # loads, cannot predict
    misshapen.write_text(json.dumps(doc))
    for minutes in (1, 2):  # the second run would repeat the fallback if the state stuck
        again = run_job(store, None, now + timedelta(minutes=minutes), config)
        assert not again.failed and len(again.forecasts) == len(MODELS)
        assert [f.fallback_reason for f in again.forecasts
                if f.fallback_reason.startswith("fit_failed")] == []
    assert again.refits == 0  # the second run served the rewritten state
    assert len(load_state(misshapen)["level"]["coefs"][lead]) == width
    named = [r.getMessage() for r in caplog.records if "does not fit" in r.getMessage()]
    assert len(named) == 1 and str(misshapen) in named[0] and "refitting" in named[0]


def test_a_worker_killed_mid_run_from_outside_costs_no_model_its_models_are_retried(
        sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    # eight models: one in flight per worker when one dies, six still queued for the new pool
    # (two days of minutes each, so every one fits the level model; storing 24 took 6 s)
    names = [f"model-{k:02d}" for k in range(8)]
    rows = []
    for k, name in enumerate(names):
        values = diurnal(2.0, 60, seed=k, level=20 + k)
        start = NOW - timedelta(seconds=values.size * 60)
        rows += [(name, start + timedelta(minutes=i), float(v)) for i, v in enumerate(values)]
    store.save_observations(rows)
    store.upsert_models([replace(DEMO_MODELS[0], name=n) for n in names])
    killed: list[int] = []

    def kill_a_worker(stage: str, done: int, total: int) -> None:
        # as the kernel's OOM killer would: SIGKILL to one pool process, mid-run
        if stage == "forecast" and not killed:
            victim = multiprocessing.active_children()[0]
            os.kill(victim.pid or 0, signal.SIGKILL)
            killed.append(victim.pid or 0)

    config = JobConfig(method="level", history_s=2 * 86_400, workers=2)
    report = run_job(store, store, NOW, config, kill_a_worker)
    assert killed and report.models == len(names)
    # the pool broke; a new one forecast the rest, and the models running in the killed one
    # again one at a time: none of them kills its worker, so every model has its forecast
    assert not report.failed
    assert sorted(f.series_id for f in report.forecasts) == names
    assert sorted(store.latest_forecasts()) == names


class _HalfBroken:
    """A source that cannot produce one model's history."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def model_names(self) -> list[str]:
        return self.store.model_names()

    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries:
        if model == MODELS[0]:
            raise ValueError(f"no samples for {model}")
        return self.store.rate_history(model, since_at, until_at, step_s)


def test_a_model_without_history_is_reported_not_zero_filled(sqlite_url: str) -> None:
    store = filled_store(sqlite_url, days=0.5)
    report = run_job(_HalfBroken(store), store, NOW, JobConfig(method="persistence",
                                                                history_s=43_200))
    assert set(report.failed) == {MODELS[0]}
    assert "no samples" in report.failed[MODELS[0]]
    assert MODELS[0] not in store.latest_forecasts()
    assert len(store.latest_forecasts()) == len(MODELS) - 1


def test_forecast_run_cli_reads_a_csv_and_stores_forecasts(sqlite_url: str,
                                                           tmp_path: Path) -> None:
    Store.open(sqlite_url, migrate=True)
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(3, 600), "y": diurnal(3, 600, seed=5)},
                     600)
    result = CliRunner().invoke(app, [
        "run", "--csv", str(trace), "--store", sqlite_url, "--step", "10m", "--history", "3d",
        "--method", "level", "--workers", "1", "--state-dir", str(tmp_path / "s"), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["forecasts"] == 2 and doc["stored"]
    stored = Store.open(sqlite_url).latest_forecasts()
    assert sorted(stored) == ["x", "y"]
    assert stored["x"].step_s == 600 and len(stored["x"].p50) == 2
    assert stored["x"].origin_at == datetime(2025, 3, 6, tzinfo=UTC)  # one step after the end
    assert np.isfinite(stored["x"].p90_max())


def test_forecast_run_rejects_a_bad_shard(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--shard", "3/2", "--no-store",
                                      "--csv", str(long_csv(tmp_path / "t.csv",
                                                            {"x": diurnal(1, 600)}, 600))])
    assert result.exit_code == 2
    assert "--shard '3/2': need 0 <= INDEX < COUNT" in result.stderr


def _empty_store(tmp_path: Path) -> str:
    """An existing SQLite file without the schema (an empty file is an empty database)."""
    (tmp_path / "empty.db").touch()
    return f"sqlite:///{tmp_path / 'empty.db'}"


def test_forecast_run_on_a_store_without_schema_says_how_to_fix_it(tmp_path: Path) -> None:
    sqlite_url = _empty_store(tmp_path)
    result = CliRunner().invoke(app, ["run", "--store", sqlite_url, "--no-store"])
    assert result.exit_code == 2
    # --store's, upgraded by naming its file (`db upgrade` alone upgrades the default store);
    # the demo would not make it
    assert result.stderr == (f"error: store {sqlite_url} has no Headroom schema; run `headroom "
                             f"db upgrade --db {tmp_path / 'empty.db'}`\n")


def test_a_server_store_without_schema_is_upgraded_with_its_url_in_the_environment() -> None:
    from controlplane.cli.demo_store import with_upgrade_for
    from controlplane.store import StoreUnavailable
    from controlplane.store.engine import NO_SCHEMA_ADVICE

    url = "postgresql://127.0.0.1:5432/fleet"
    error = with_upgrade_for(StoreUnavailable(f"store {url} has no Headroom schema",
                                              NO_SCHEMA_ADVICE), url)
    assert str(error) == (f"store {url} has no Headroom schema; run `headroom db upgrade` with "
                          "HEADROOM_DB__URL set to this URL")
    unreachable = StoreUnavailable(f"cannot reach database {url}")
    assert with_upgrade_for(unreachable, url) is unreachable  # no advice: none added


def test_forecasts_for_a_store_without_schema_are_refused_before_any_fit(
        tmp_path: Path) -> None:
    sqlite_url = _empty_store(tmp_path)
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(2, 600)}, 600)
    result = CliRunner().invoke(app, [
        "run", "--csv", str(trace), "--store", sqlite_url, "--step", "10m",
        "--state-dir", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert "has no Headroom schema" in result.stderr
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())  # nothing fitted


def test_forecast_run_on_a_missing_store_file_creates_neither_file_nor_directory(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'no-dir' / 'x.db'}"
    result = CliRunner().invoke(app, ["run", "--store", url, "--no-store"])
    assert result.exit_code == 2
    assert result.stderr == (f"error: store {url}: no such database file; run `headroom db "
                             f"upgrade --db {tmp_path / 'no-dir' / 'x.db'}` to create it\n")
    assert not (tmp_path / "no-dir").exists()


def test_an_error_before_the_first_progress_bar_is_the_only_line_on_stderr(
        tmp_path: Path) -> None:
    sqlite_url = _empty_store(tmp_path)
    result = CliRunner().invoke(app, ["run", "--store", sqlite_url, "--no-store"])
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"error: store {sqlite_url} has no Headroom schema")


def test_forecast_run_keeps_its_state_in_the_configured_state_dir_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_FORECAST__STATE_DIR", str(tmp_path / "configured"))
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(2, 600)}, 600)
    result = CliRunner().invoke(app, ["run", "--csv", str(trace), "--no-store", "--step", "10m",
                                      "--method", "persistence", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert [p.name.split(".")[0] for p in (tmp_path / "configured").iterdir()] == ["x"]


def test_a_state_dir_under_a_file_is_a_config_error_refused_before_any_fit(
        tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = _run_csv(long_csv(tmp_path / "t.csv", {"x": diurnal(2, 600)}, 600), tmp_path,
                      "--state-dir", str(tmp_path / "a-file" / "state"))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (f"error: --state-dir {tmp_path / 'a-file' / 'state'}: cannot write "
                             "there (Not a directory)\n")


def test_a_state_dir_that_is_a_file_is_a_config_error_refused_before_any_fit(
        tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = _run_csv(long_csv(tmp_path / "t.csv", {"x": diurnal(2, 600)}, 600), tmp_path,
                      "--state-dir", str(tmp_path / "a-file"))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (f"error: --state-dir {tmp_path / 'a-file'}: cannot write there "
                             "(a file, not a directory)\n")
    assert (tmp_path / "a-file").read_text() == ""


def _run_csv(path: Path, tmp_path: Path, *extra: str) -> Result:
    return CliRunner().invoke(app, [
        "run", "--csv", str(path), "--no-store", "--step", "10m", "--history", "3d",
        "--method", "persistence", "--workers", "1", "--state-dir", str(tmp_path / "s"),
        *extra])


def _dirty_csv(path: Path) -> Path:
    """Model 'x' clean; 'y' with a NaN, a text value, a negative value and two swapped rows."""
    trace = long_csv(path, {"x": diurnal(2, 600), "y": diurnal(2, 600, seed=5)}, 600)
    lines = trace.read_text().splitlines()
    y = [i for i, line in enumerate(lines) if ",y," in line]
    for k, bad in zip(y[10:13], ("nan", "busy", "-4.5"), strict=True):
        lines[k] = lines[k].rsplit(",", 1)[0] + "," + bad
    lines[y[20]], lines[y[21]] = lines[y[21]], lines[y[20]]
    trace.write_text("\n".join(lines) + "\n")
    return trace


def test_forecast_run_refuses_a_csv_with_a_duplicate_timestamp_naming_file_series_and_time(
        tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(1, 600), "y": diurnal(1, 600)}, 600)
    lines = trace.read_text().splitlines()
    y = [line for line in lines if ",y," in line]
    trace.write_text("\n".join([*lines, y[5]]) + "\n")
    result = _run_csv(trace, tmp_path)
    assert result.exit_code == 2
    assert (f"{trace}: series 'y': duplicate timestamp 2025-03-03T00:50:00+00:00 "
            "(1 duplicate(s))") in result.stderr
    assert "Traceback" not in result.output


def test_forecast_run_refuses_a_csv_row_without_a_model_naming_its_line(tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(1, 600), "y": diurnal(1, 600)}, 600)
    lines = trace.read_text().splitlines()
    lines[7] = lines[7].replace(",x,", ",,")
    trace.write_text("\n".join(lines) + "\n")
    result = _run_csv(trace, tmp_path)
    assert result.exit_code == 2
    assert f"error: {trace}: column 'model': empty series name at line 8" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("at", ["NaT", "nan"])
def test_forecast_run_refuses_a_missing_time_as_the_origin_naming_at(tmp_path: Path,
                                                                    at: str) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(1, 600)}, 600)
    result = _run_csv(trace, tmp_path, "--at", at)
    assert result.exit_code == 2
    assert result.stderr == f"error: --at {at!r}: not an ISO timestamp (a missing time)\n"


@pytest.mark.parametrize("at", ["now", "today"])
def test_forecast_run_refuses_the_words_pandas_reads_as_the_local_time_as_the_origin(
        tmp_path: Path, at: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # pandas reads 'now' as 5.5 h ahead of UTC here
    time.tzset()
    try:
        result = _run_csv(long_csv(tmp_path / "t.csv", {"x": diurnal(1, 600)}, 600), tmp_path,
                          "--at", at)
    finally:
        monkeypatch.undo()  # this machine's own TZ again
        time.tzset()
    assert result.exit_code == 2
    assert result.stderr == (f"error: --at {at!r}: not an ISO timestamp (leave --at out to "
                             "forecast from now)\n")


@pytest.mark.parametrize("option", ["--history", "--horizon", "--step"])
def test_forecast_run_refuses_a_duration_over_a_year_naming_the_option(tmp_path: Path,
                                                                       option: str) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(1, 600)}, 600)
    result = _run_csv(trace, tmp_path, option, "1000000d")
    assert result.exit_code == 2
    assert result.stderr == f"error: {option} '1000000d': at most 366 days (366d)\n"


@pytest.mark.parametrize("models", [",", "", " , "])
def test_forecast_run_refuses_a_models_option_without_a_name(tmp_path: Path,
                                                             models: str) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(1, 600)}, 600)
    result = _run_csv(trace, tmp_path, "--models", models)
    assert result.exit_code == 2
    assert f"error: --models {models!r}: no model name" in result.stderr
    assert "Traceback" not in result.output


def test_forecast_run_refuses_a_models_name_the_store_does_not_list_naming_it(
        sqlite_url: str, tmp_path: Path) -> None:
    filled_store(sqlite_url, days=0.5)
    result = CliRunner().invoke(app, [
        "run", "--store", sqlite_url, "--models", f"{MODELS[0]},lama-3-8b", "--no-store",
        "--history", "12h", "--at", NOW.isoformat(), "--state-dir", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert result.stderr == (f"error: --models: model 'lama-3-8b' is not in the store "
                             f"{sqlite_url}\n")
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())  # nothing fitted


def test_forecast_run_reports_every_cleaned_csv_row_as_a_warning_of_its_model(
        tmp_path: Path) -> None:
    result = _run_csv(_dirty_csv(tmp_path / "t.csv"), tmp_path, "--json")
    assert result.exit_code == 0, result.output
    per_model = json.loads(result.stdout)["per_model"]
    assert per_model["x"]["warnings"] == []
    assert per_model["y"]["warnings"] == ["timestamps were out of order (sorted)",
                                          "2 non-numeric/NaN value(s) treated as missing",
                                          "1 negative value(s) clipped to 0"]
    assert "warning: model 'y': 1 negative value(s) clipped to 0" in result.stderr


def test_forecast_run_shows_csv_cleaning_warnings_beside_the_table(tmp_path: Path) -> None:
    result = _run_csv(_dirty_csv(tmp_path / "t.csv"), tmp_path)
    assert result.exit_code == 0, result.output
    assert "warning: model 'y': 2 non-numeric/NaN value(s) treated as missing" in result.stderr
    assert "model 'x'" not in result.stderr


def test_forecast_run_shows_model_names_with_brackets_as_written_in_its_table(
        tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {"a[/x]": diurnal(2, 600), "[b]y": diurnal(2, 600)},
                     600)
    result = _run_csv(trace, tmp_path)
    assert result.exit_code == 0, result.output
    assert "a[/x]" in result.stdout and "[b]y" in result.stdout  # not read as Rich markup


def test_a_clean_csv_forecasts_the_same_with_or_without_a_dirty_neighbour(
        tmp_path: Path) -> None:
    clean = long_csv(tmp_path / "c.csv", {"x": diurnal(2, 600)}, 600)
    alone = json.loads(_run_csv(clean, tmp_path, "--json").stdout)["per_model"]["x"]
    beside = json.loads(_run_csv(_dirty_csv(tmp_path / "d.csv"), tmp_path,
                                 "--json").stdout)["per_model"]["x"]
    assert alone == beside


def test_a_csv_model_with_only_negative_values_fails_instead_of_forecasting_zero(
        tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(1, 600), "neg": -diurnal(1, 600)}, 600)
    result = _run_csv(trace, tmp_path, "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert list(doc["per_model"]) == ["x"]
    assert doc["failed"]["neg"].startswith(
        "history unavailable: series 'neg': all 144 numeric value(s) are negative: bad data "
        "(a wrong metric or sign?), not zero traffic; nothing to forecast (in ")
    assert "clipped" not in doc["failed"]["neg"]  # nothing was, nothing was forecast


def test_a_csv_series_that_ended_72_hours_before_the_origin_is_flagged_stale(
        tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(2, 600)}, 600)
    at = (START + timedelta(days=2) + timedelta(hours=72)).isoformat()
    result = _run_csv(trace, tmp_path, "--history", "7d", "--at", at, "--json")
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["per_model"]["x"]["warnings"]
    assert len(warnings) == 1
    assert warnings[0].startswith("stale_history: last sample 72.2 h before the forecast time")
    assert "warning: model 'x': stale_history" in result.stderr


def test_a_csv_read_up_to_its_last_row_is_not_stale(tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(2, 600)}, 600)
    doc = json.loads(_run_csv(trace, tmp_path, "--json").stdout)
    assert doc["per_model"]["x"]["warnings"] == []


def test_a_store_model_whose_data_stopped_days_ago_is_flagged_stale(sqlite_url: str) -> None:
    store = filled_store(sqlite_url, days=0.5)
    later = NOW + timedelta(days=3)
    report = run_job(store, None, later, JobConfig(method="persistence", history_s=5 * 86_400))
    assert sorted(report.warnings) == sorted(MODELS)
    assert all(w == ("stale_history: last sample 72.0 h before the forecast time "
                     f"(at {(NOW - timedelta(minutes=1)).isoformat()}; limit 1 h)",)
               for w in report.warnings.values())
    fresh = run_job(store, None, NOW, JobConfig(method="persistence", history_s=43_200))
    assert fresh.warnings == {}


def test_what_a_csv_source_cleaned_is_stored_as_the_notes_of_its_models_forecast(
        sqlite_url: str, tmp_path: Path) -> None:
    Store.open(sqlite_url, migrate=True)
    result = CliRunner().invoke(app, [
        "run", "--csv", str(_dirty_csv(tmp_path / "t.csv")), "--store", sqlite_url,
        "--step", "10m", "--history", "3d", "--method", "persistence", "--workers", "1",
        "--state-dir", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    stored = Store.open(sqlite_url).latest_forecasts()
    assert stored["x"].notes == ()
    assert stored["y"].notes == ("timestamps were out of order (sorted)",
                                 "2 non-numeric/NaN value(s) treated as missing",
                                 "1 negative value(s) clipped to 0")


def test_negative_store_observations_the_forecaster_clipped_are_stored_as_forecast_notes(
        sqlite_url: str) -> None:
    store = filled_store(sqlite_url, days=0.5)
    store.save_observations([(MODELS[0], NOW - timedelta(minutes=30.5), -1000.0)])
    report = run_job(store, store, NOW, JobConfig(method="persistence", history_s=43_200))
    stored = store.latest_forecasts()
    assert stored[MODELS[0]].notes == ("1 negative value(s) clipped to 0",)
    assert all(stored[m].notes == () for m in MODELS[1:])
    assert report.warnings == {MODELS[0]: ("1 negative value(s) clipped to 0",)}  # not twice


def test_stale_history_is_a_run_warning_but_not_a_stored_forecast_note(sqlite_url: str) -> None:
    store = filled_store(sqlite_url, days=0.5)
    report = run_job(store, store, NOW + timedelta(days=3),
                     JobConfig(method="persistence", history_s=5 * 86_400))
    assert sorted(report.warnings) == sorted(MODELS)
    assert all(made.notes == () for made in store.latest_forecasts().values())
