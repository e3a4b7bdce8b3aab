"""Upper-tail calibration from the forecast's own recent errors (no look-ahead)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from controlplane.autoscaling.calibration import (
    MAX_RATIO,
    MIN_SIGMA,
    UNMEASURED,
    ForecastErrors,
    calibrated,
    recent_volatility,
    scaled_error,
)
from controlplane.domain.demand import calibrated_ratio, step_quantile, upper_quantile
from forecaster.types import Forecast, TrafficSeries

T0 = datetime(2026, 1, 5, tzinfo=UTC)


def test_no_ratios_until_enough_errors_were_seen() -> None:
    errors = ForecastErrors(min_count=5)
    for _ in range(4):
        errors = errors.observe(10.0, 12.0)
    forecast = Forecast("m", T0, 60, (10.0,), (12.0,), "t")
    assert errors.ratios() is None and calibrated(forecast, errors) is forecast


def test_a_sparse_series_tail_is_read_as_at_most_max_ratio_not_an_overflow() -> None:
    # a median near zero met by whole requests after a flat stretch (volatility at its floor):
    # scaled errors of ~740, read at a volatile moment, were exp(740) and an OverflowError
    errors = ForecastErrors(min_count=3).observe_all([(1e-6, 1 / 600, MIN_SIGMA)] * 3)
    ratios = errors.ratios(sigma=1.0)
    assert ratios is not None and max(ratios.values()) == pytest.approx(MAX_RATIO)
    forecast = calibrated(Forecast("m", T0, 600, (0.01,), (0.02,), "t"), errors, sigma=1.0)
    assert step_quantile(forecast, 0, 0.99) == pytest.approx(0.01 * MAX_RATIO)


def test_a_median_under_one_request_per_step_is_neither_scored_nor_calibrated() -> None:
    # whole requests against a median near zero: the ratio says nothing of the next step
    errors = ForecastErrors(min_count=1, min_p50_rps=1 / 600)
    assert errors.observe(1e-4, 1 / 600).scaled_errors == ()
    assert errors.observe(2 / 600, 1 / 600).scaled_errors == pytest.approx((math.log(0.5),))
    tuned = calibrated(Forecast("m", T0, 600, (1e-4,), (0.004,), "t"),
                       errors.observe(2 / 600, 8 / 600), sigma=1.0)
    assert calibrated_ratio(tuned.diagnostics, 0.99) == pytest.approx(4.0)
    assert step_quantile(tuned, 0, 0.99) == pytest.approx(upper_quantile(1e-4, 0.004, 0.99))


def test_zero_or_missing_values_carry_no_error() -> None:
    errors = ForecastErrors().observe(0.0, 10.0).observe(10.0, 0.0).observe(10.0, float("nan"))
    assert errors.scaled_errors == ()


def test_the_window_keeps_only_the_newest_errors() -> None:
    errors = ForecastErrors(max_size=3, min_count=1)
    for actual in (10.0, 20.0, 30.0, 40.0):
        errors = errors.observe(10.0, actual)
    ratios = errors.ratios(grid=(0.5,))
    assert ratios is not None and ratios[0.5] == pytest.approx(3.0)


def test_a_calibrated_forecast_reads_its_quantiles_off_the_errors() -> None:
    errors = ForecastErrors(min_count=10)
    for i in range(100):
        errors = errors.observe(100.0, 100.0 + i)  # ratios 1.00 .. 1.99, uniform
    tuned = calibrated(Forecast("m", T0, 60, (50.0,), (55.0,), "t"), errors)
    assert calibrated_ratio(tuned.diagnostics, 0.5) == pytest.approx(1.495, abs=0.01)
    assert step_quantile(tuned, 0, 0.95) == pytest.approx(50.0 * 1.94, rel=0.01)
    top_ratio = calibrated_ratio(tuned.diagnostics, 0.995)  # the top of the grid
    assert top_ratio is not None
    assert step_quantile(tuned, 0, 0.999) == pytest.approx(50.0 * top_ratio, rel=1e-9)  # clamped


def test_errors_are_scaled_by_the_volatility_when_the_forecast_was_made() -> None:
    errors = ForecastErrors(min_count=10)
    for i in range(50):
        errors = errors.observe(100.0, 100.0 * (1.2 if i % 2 else 1.0), sigma=0.1)
    calm, wild = errors.ratios(sigma=0.05), errors.ratios(sigma=0.2)
    assert calm is not None and wild is not None
    assert calm[0.95] == pytest.approx(1.2 ** 0.5, rel=1e-6)
    assert wild[0.95] == pytest.approx(1.2 ** 2, rel=1e-6)


def test_recent_volatility_is_the_mean_absolute_log_change() -> None:
    flat = TrafficSeries("m", 600, T0, (10.0,) * 20)
    jumpy = TrafficSeries("m", 600, T0, (10.0, 20.0) * 10)
    with_gaps = TrafficSeries("m", 600, T0, (10.0, 0.0, float("nan"), 20.0) * 4)
    assert recent_volatility(flat) == MIN_SIGMA
    assert recent_volatility(jumpy) == pytest.approx(math.log(2))
    assert recent_volatility(with_gaps, steps=16) == pytest.approx(math.log(2))


def test_a_sparse_series_volatility_is_unmeasured_and_leaves_its_forecasts_uncalibrated() -> None:
    # a request now and then: fewer than MIN_CHANGES changes between non-zero steps
    sparse = TrafficSeries("m", 600, T0, (0.0, 0.0, 1 / 600, 0.0, 0.0, 2 / 600) * 3)
    assert recent_volatility(sparse) == UNMEASURED
    assert scaled_error(0.001, 1 / 600, UNMEASURED) is None
    errors = ForecastErrors(min_count=3).observe_all([(0.001, 1 / 600, 1.0)] * 3)
    forecast = Forecast("m", T0, 600, (0.001,), (0.004,), "t")
    assert errors.ratios(UNMEASURED) is None
    assert calibrated(forecast, errors, UNMEASURED) is forecast
    assert calibrated(forecast, errors, 1.0) is not forecast
