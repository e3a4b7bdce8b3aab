"""``forecaster.api.forecast`` on a ``TrafficSeries`` built by hand (the store's history, a caller's
own numbers), which no source cleaned: the values reach every method as ``forecaster.prepare``
cleans a source's samples, a series with nothing usable is refused naming it, and a horizon of
0 s or less is refused. Never a fit failure from an ``inf``, nor a negative or zero forecast made
up from bad data."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from controlplane.cli.forecast import app as forecast_cli
from controlplane.forecast_job import JobConfig, run_job
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from forecaster.api import forecast
from forecaster.backtest import backtest_series
from forecaster.errors import SeriesError
from forecaster.features import History
from forecaster.models import Predictions
from forecaster.registry import register
from tests.forecasting.builders import diurnal, history, series

NOW = datetime(2025, 3, 6, 12, 0, tzinfo=UTC)
METHODS = ("persistence", "hour_mean", "seasonal_naive", "level", "auto")


def _with_nan_for(values: np.ndarray, where: slice) -> tuple[np.ndarray, np.ndarray]:
    dirty, clean = values.copy(), values.copy()
    dirty[where] = np.inf
    dirty[3::97] = -np.inf
    clean[where] = np.nan
    clean[3::97] = np.nan
    return dirty, clean


@pytest.mark.parametrize("method", METHODS)
def test_infinite_values_are_missing_data_for_every_method_not_a_failed_fit(method: str) -> None:
    dirty, clean = _with_nan_for(diurnal(8, 300, seed=1), slice(None, None, 89))
    made = forecast(series(dirty, 300, "inf-model"), 1200, method)
    expected = forecast(series(clean, 300, "inf-model"), 1200, method)
    assert not made.fallback_reason.startswith("fit_failed")
    assert (made.p50, made.p90, made.method) == (expected.p50, expected.p90, expected.method)
    assert max(made.p90) > max(made.p50)  # a spread, not persistence's flat fallback


@pytest.mark.parametrize("method", METHODS)
def test_negative_values_count_as_zero_for_every_method_as_the_sources_clip_them(
        method: str) -> None:
    values = diurnal(8, 300, seed=2)
    dirty, clean = values.copy(), values.copy()
    dirty[::50], clean[::50] = -20.0, 0.0
    made = forecast(series(dirty, 300, "neg-model"), 1200, method)
    expected = forecast(series(clean, 300, "neg-model"), 1200, method)
    assert (made.p50, made.p90) == (expected.p50, expected.p90)


class _Broken:
    name = "broken-bad-values"

    def predict(self, h: History, origins: np.ndarray, n_targets: int) -> Predictions:
        raise RuntimeError("optimizer diverged")


def test_a_failed_fit_after_a_negative_last_value_falls_back_to_zero_not_a_negative_forecast(
) -> None:
    register("broken-bad-values", lambda s: _Broken(), "always fails (test)")
    values = diurnal(1, 60)
    values[-1] = -3.0
    made = forecast(series(values, 60, "neg-last"), 600, method="broken-bad-values")
    assert made.fallback_reason == "fit_failed:RuntimeError"
    assert made.p50 == made.p90 == (0.0,) * 10


@pytest.mark.parametrize(("values", "problem"), [
    (np.full(50, -2.0), "all 50 numeric value(s) are negative: bad data"),
    (np.array([0.0, -1.0, np.nan, 0.0]), "no positive value (1 negative, 2 zero)"),
])
def test_a_series_with_numbers_but_none_positive_is_refused_naming_it(
        values: np.ndarray, problem: str) -> None:
    for method in METHODS:
        with pytest.raises(SeriesError, match=r"^series 'bad-sign': ") as caught:
            forecast(series(values, 60, "bad-sign"), 1200, method)
        assert problem in str(caught.value)


@pytest.mark.parametrize("horizon_s", [0, -60])
def test_a_horizon_of_zero_or_less_is_refused_naming_the_series(horizon_s: int) -> None:
    s = series(diurnal(1, 60), 60, "short-sighted")
    refused = f"series 'short-sighted': forecast horizon must be > 0 s, got {horizon_s}"
    with pytest.raises(ValueError, match=refused):
        forecast(s, horizon_s)
    with pytest.raises(ValueError, match=f"forecast horizon must be > 0 s, got {horizon_s}"):
        backtest_series(history(diurnal(1, 60), 60), horizon_s, 0.3, "persistence")


def test_a_horizon_under_one_step_is_one_step_ahead() -> None:
    s = series(diurnal(1, 3600), 3600, "hourly")
    made = forecast(s, 60, "persistence")
    assert len(made.p50) == 1 and made.origin_at == s.start_at + timedelta(hours=24)


def test_the_forecast_job_lists_a_store_model_with_only_negative_demand_and_stores_no_zero(
        sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    good, bad = DEMO_MODELS[0].name, DEMO_MODELS[1].name
    store.upsert_models(DEMO_MODELS[:2])
    start = NOW - timedelta(hours=6)
    store.save_observations([(name, start + timedelta(minutes=i), rate)
                             for i in range(360) for name, rate in ((good, 20.0), (bad, -1.0))])
    report = run_job(store, store, NOW, JobConfig(method="persistence", history_s=21_600))
    assert set(report.failed) == {bad}
    assert "all 360 numeric value(s) are negative: bad data" in report.failed[bad]
    assert list(store.latest_forecasts()) == [good]


@pytest.mark.parametrize("method", METHODS)
def test_a_negative_last_value_is_forecast_from_zero_with_a_note_naming_it_and_the_count(
        method: str) -> None:
    values = diurnal(3, 300, seed=3)
    dirty, clean = values.copy(), values.copy()
    dirty[[7, 100, -1]], clean[[7, 100, -1]] = -4.5, 0.0
    s = series(dirty, 300, "neg-last")
    made = forecast(s, 1200, method)
    expected = forecast(series(clean, 300, "neg-last"), 1200, method)
    assert (made.p50, made.p90, made.method, made.fallback_reason) == (
        expected.p50, expected.p90, expected.method, expected.fallback_reason)
    last_at = (s.end_at - timedelta(seconds=300)).isoformat()
    assert made.notes == (f"3 negative value(s) clipped to 0, the last observation among them "
                          f"(-4.5 at {last_at}): the forecast starts from a last observation "
                          "of 0",)
    assert expected.notes == ()


def test_negatives_before_the_last_observation_are_counted_and_the_last_is_not_named() -> None:
    values = diurnal(1, 60)
    values[[3, 9]] = -1.0
    values[-2:] = [np.nan, np.inf]  # the last observation is the one before these
    assert forecast(series(values, 60, "neg"), 600, "persistence").notes == (
        "2 negative value(s) clipped to 0",)


def test_a_failed_fit_after_a_negative_last_value_keeps_the_note() -> None:
    register("broken-bad-values", lambda s: _Broken(), "always fails (test)")
    values = diurnal(1, 60)
    values[-1] = -3.0
    made = forecast(series(values, 60, "neg-last"), 600, method="broken-bad-values")
    assert made.fallback_reason == "fit_failed:RuntimeError"
    assert len(made.notes) == 1 and made.notes[0].startswith(
        "1 negative value(s) clipped to 0, the last observation among them (-3 at ")


def store_with_a_negative_last_demand(url: str) -> tuple[Store, str]:
    """A store whose first demo model had 20 rps a minute for 6 hours, then -2 in the last."""
    store = Store.open(url, migrate=True)
    name = DEMO_MODELS[0].name
    store.upsert_models(DEMO_MODELS[:1])
    start = NOW - timedelta(hours=6)
    store.save_observations([(name, start + timedelta(minutes=i), -2.0 if i == 359 else 20.0)
                             for i in range(360)])
    return store, name


NEGATIVE_LAST_NOTE = (
    "1 negative value(s) clipped to 0, the last observation among them (-2 at "
    f"{(NOW - timedelta(minutes=1)).isoformat()}): the forecast starts from a last "
    "observation of 0")


def test_the_forecast_job_warns_when_a_store_model_s_last_demand_was_negative(
        sqlite_url: str) -> None:
    store, name = store_with_a_negative_last_demand(sqlite_url)
    report = run_job(store, store, NOW, JobConfig(method="persistence", history_s=21_600))
    assert report.failed == {}
    assert report.warnings[name] == (NEGATIVE_LAST_NOTE,)
    assert store.latest_forecasts()[name].fallback_reason == ""  # a note, not a fallback


def test_forecast_run_shows_the_note_beside_the_model_s_other_warnings(
        sqlite_url: str, tmp_path: Path) -> None:
    _, name = store_with_a_negative_last_demand(sqlite_url)
    result = CliRunner().invoke(forecast_cli, [
        "run", "--store", sqlite_url, "--no-store", "--history", "6h", "--method",
        "persistence", "--at", NOW.isoformat(), "--state-dir", str(tmp_path / "s"), "--json"])
    assert result.exit_code == 0, result.output
    model = json.loads(result.stdout)["per_model"][name]
    assert (model["warnings"], model["fallback_reason"], model["p50_last"]) == (
        [NEGATIVE_LAST_NOTE], "", 0.0)
    assert f"warning: model {name!r}: {NEGATIVE_LAST_NOTE}" in " ".join(result.stderr.split())
