"""``forecaster.api.forecast`` on a ``TrafficSeries`` built by hand (the store's history, a caller's
own numbers), which no source cleaned: the values reach every method as ``forecaster.prepare``
cleans a source's samples. Never a fit failure from an ``inf``, nor a negative forecast."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.api import forecast
from forecaster.features import History
from forecaster.models import Predictions
from forecaster.registry import register
from tests.forecasting.builders import diurnal, series

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
