from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest

from forecaster.api import forecast
from forecaster.errors import UnknownMethodError
from forecaster.features import History
from forecaster.models import AnchoredForecaster, LinearFit, Predictions
from forecaster.registry import get_forecaster, register
from forecaster.settings import ForecasterSettings
from forecaster.stacking import StackingForecaster
from tests.forecasting.builders import START, diurnal, history, series

FAST = ("persistence", "hour_mean", "seasonal_naive", "level")


@pytest.mark.parametrize("method", FAST)
def test_forecast_at_an_origin_ignores_everything_from_the_origin_on(method: str) -> None:
    values = diurnal(10, 600, seed=7)
    origin = 1100
    origins = np.arange(1000, origin + 1)
    full = get_forecaster(method).predict(history(values, 600), origins, 2)
    changed = values.copy()
    changed[origin:] = 2 * changed[origin:] + 1  # the judge's perturbation
    perturbed = get_forecaster(method).predict(history(changed, 600), origins, 2)
    truncated = get_forecaster(method).predict(history(values[:origin + 1], 600),
                                               np.array([origin]), 2)
    np.testing.assert_array_equal(full.p50, perturbed.p50)
    np.testing.assert_array_equal(full.p90, perturbed.p90)
    # the judge allows 1e-6 relative; matrix products over 1 vs 101 rows may differ in the last bit
    np.testing.assert_allclose(full.p50[-1], truncated.p50[0], rtol=1e-12)
    np.testing.assert_allclose(full.p90[-1], truncated.p90[0], rtol=1e-12)


def test_level_model_beats_persistence_on_noisy_daily_traffic() -> None:
    values = diurnal(14, 600, seed=11, noise=0.15)
    h = history(values, 600)
    origins = np.arange(1400, 2014)
    y = values[origins + 1]

    def wape(p: Predictions) -> float:
        return float(np.sum(np.abs(y - p.p50[:, 1])) / np.sum(y))

    level = get_forecaster("level").predict(h, origins, 2)
    persistence = get_forecaster("persistence").predict(h, origins, 2)
    assert wape(level) < 0.9 * wape(persistence)
    coverage = float(np.mean(y <= level.p90[:, 1]))
    assert 0.8 <= coverage <= 0.97


def test_quantiles_are_ordered_and_never_negative() -> None:
    values = diurnal(8, 600, seed=2, noise=0.6)
    pred = get_forecaster("level").predict(history(values, 600), np.arange(800, 1150), 3)
    assert np.all(pred.p50 >= 0)
    assert np.all(pred.p90 >= pred.p50)


def test_short_history_falls_back_to_a_baseline_with_the_reason() -> None:
    h = history(diurnal(0.05, 60, seed=1), 60, "young")  # 72 minutes
    fit = StackingForecaster("level").fit(h, START.timestamp() + 3600, (1, 2, 4, 8, 16, 20))
    assert fit.reason == "short_history"
    assert fit.method in ("persistence", "hour_mean", "seasonal_naive")


def test_on_a_long_history_the_level_model_fits_only_its_newest_training_rows() -> None:
    values = diurnal(20, 300, seed=4)
    changed = values.copy()
    changed[:6 * 288] *= 3.0  # the first six days: older than anything the newest rows see
    anchor_s = START.timestamp() + 20 * 86_400
    leads = (1, 3, 4)

    def coefs(data: np.ndarray, fit_rows: int) -> list[np.ndarray]:
        settings = ForecasterSettings(max_fit_rows=fit_rows)
        fit = StackingForecaster("level", settings=settings).fit(
            history(data, 300), anchor_s, leads)
        assert isinstance(fit, LinearFit) and fit.reason == ""
        return [fit.coefs[k] for k in leads]

    # the same up to the rounding of running sums over the changed values
    for before, after in zip(coefs(values, 500), coefs(changed, 500), strict=True):
        np.testing.assert_allclose(before, after, rtol=1e-7, atol=1e-9)
    unbounded = zip(coefs(values, 4000), coefs(changed, 4000), strict=True)
    assert any(not np.allclose(before, after, rtol=1e-4) for before, after in unbounded)


def test_a_model_that_did_worse_than_a_baseline_recently_is_replaced() -> None:
    rng = np.random.default_rng(0)
    busy = (3 + rng.normal(0, 0.3, 660)) * (1 + 0.5 * np.sin(np.arange(660) / 30))
    quiet = np.where(rng.random(300) < 0.1, 0.2, 0.0)  # traffic collapses
    h = history(np.concatenate([busy, quiet]), 60, "regime")
    fit = StackingForecaster("level").fit(h, START.timestamp() + 15.5 * 3600,
                                          (1, 2, 4, 8, 16, 20))
    assert fit.reason == "worse_than_baseline"
    assert fit.method in ("persistence", "hour_mean", "seasonal_naive")
    assert math.isfinite(fit.backtest_wape)


@pytest.mark.parametrize("method", ["auto", "hybrid", "level"])
def test_a_model_whose_traffic_starts_after_a_history_of_zeros_is_forecast_at_its_new_level(
        method: str) -> None:
    values = np.zeros(3 * 1440)
    model = get_forecaster(method)
    assert isinstance(model, AnchoredForecaster)
    anchor_s = model.anchor_for(history(values, 60, "new-model"), values.size)
    start = int((anchor_s - START.timestamp()) // 60) + 1
    assert start <= values.size - 10  # the refit before the forecast saw nothing but zeros
    values[start:] = 3.0  # traffic since just after the latest refit, none for days before
    made = forecast(series(values, 60, "new-model"), 1200, method=method)
    assert made.method == "persistence" and made.fallback_reason == "no_traffic_before_anchor"
    assert made.p50 == (3.0,) * 20
    assert min(made.p90) >= 3.0


def test_a_history_of_zeros_with_no_traffic_yet_is_still_forecast_at_zero() -> None:
    made = forecast(series(np.zeros(3 * 1440), 60, "idle-model"), 1200)
    assert made.p50 == (0.0,) * 20 and made.p90 == (0.0,) * 20


def test_api_forecast_covers_the_horizon_from_the_series_end() -> None:
    s = series(diurnal(3, 60, seed=4), 60)
    made = forecast(s, 1200, method="level")
    assert made.origin_at == s.end_at
    assert len(made.p50) == len(made.p90) == 20
    assert made.method == "level"
    assert made.backtest_wape is not None and made.backtest_wape > 0
    assert made.fallback_reason == ""


def test_api_never_returns_a_silent_zero_for_an_empty_series() -> None:
    made = forecast(series(np.full(30, np.nan), 60), 1200)
    assert made.fallback_reason == "no_observations"
    assert made.p50 == (0.0,) * 20


def test_a_stale_series_is_flagged() -> None:
    values = diurnal(2, 60)
    values[-180:] = np.nan  # three hours without data
    made = forecast(series(values, 60), 600, method="persistence")
    assert made.fallback_reason == "stale_observations"
    assert made.p50[0] == values[-181]


def test_staleness_outranks_the_method_s_own_fallback_reason_as_keda_refuses_only_it() -> None:
    values = diurnal(2, 60)
    values[-180:] = np.nan  # three hours without data, on a history too short for seasonality
    fresh = forecast(series(diurnal(2, 60), 60), 600, method="hybrid")
    assert fresh.fallback_reason == "seasonal_short_history"
    made = forecast(series(values, 60), 600, method="hybrid")
    assert made.fallback_reason == "stale_observations"


class _Broken:
    name = "broken"

    def predict(self, h: History, origins: np.ndarray, n_targets: int) -> Predictions:
        raise RuntimeError("optimizer diverged")


def test_a_failing_fit_falls_back_to_persistence_with_the_reason() -> None:
    register("broken-for-test", lambda s: _Broken(), "always fails (test)")
    values = diurnal(1, 60)
    made = forecast(series(values, 60), 600, method="broken-for-test")
    assert made.method == "persistence"
    assert made.fallback_reason == "fit_failed:RuntimeError"
    assert made.p50 == (values[-1],) * 10
    values[-180:] = np.nan  # a failing fit on stale data: staleness is what consumers refuse
    stale = forecast(series(values, 60), 600, method="broken-for-test")
    assert (stale.method, stale.fallback_reason) == ("persistence", "stale_observations")


def test_unknown_methods_are_named_in_the_error() -> None:
    with pytest.raises(UnknownMethodError, match="unknown forecast method 'magic'"):
        forecast(series(diurnal(1, 60), 60), 600, method="magic")


def test_refit_anchors_are_staggered_per_series() -> None:
    settings = ForecasterSettings()
    a = get_forecaster("level", settings)
    assert isinstance(a, AnchoredForecaster)
    values = diurnal(3, 600)
    anchors = {a.anchor_for(history(values, 600, name), 400) for name in ("a", "b", "c", "d")}
    assert len(anchors) > 1
    assert all(START.timestamp() + 400 * 600 - x <= timedelta(hours=6).total_seconds()
               for x in anchors)


def test_origins_before_the_first_observation_get_explicit_zeros() -> None:
    values = diurnal(2, 600, seed=3)
    values[:50] = np.nan
    pred = get_forecaster("level").predict(history(values, 600, "late"), np.arange(1, 80), 2)
    assert np.all(np.isfinite(pred.p50)) and np.all(np.isfinite(pred.p90))
    assert pred.reason[0] == "no_observations" and pred.p50[0, 0] == 0.0
    assert pred.reason[60] != "no_observations"
