"""Tests that fit real Prophet models (few and small: 30-minute data, a handful of fits)."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from forecaster.features import History
from forecaster.persist import export_state, import_state
from forecaster.seasonal_chain import SeasonalChain, training_frame
from forecaster.settings import ForecasterSettings
from forecaster.stacking import StackingForecaster
from tests.forecasting.builders import diurnal, history

pytestmark = pytest.mark.prophet
STEP = 1800
LEADS = (1,)


def hybrid(settings: ForecasterSettings) -> StackingForecaster:
    return StackingForecaster("hybrid", SeasonalChain(settings), guard=True, settings=settings)


def test_stored_fourier_coefficients_reproduce_prophets_seasonal_component() -> None:
    backend = importlib.import_module("forecaster.prophet_backend")
    h = history(diurnal(4, STEP, seed=5), STEP)
    frame = training_frame(h, h.start_s + 4 * 86_400, ForecasterSettings())
    assert frame is not None
    fit = backend.fit_prophet(frame, h.start_s + 4 * 86_400, None)
    predicted = fit.model.predict(frame[["ds"]])["additive_terms"].to_numpy()
    epoch_s = frame["ds"].to_numpy().astype("datetime64[s]").astype(np.int64).astype(float)
    np.testing.assert_allclose(fit.curve.evaluate(epoch_s), predicted, rtol=1e-9, atol=1e-9)


def test_the_faster_prophet_setup_fits_exactly_what_stock_prophet_fits() -> None:
    from prophet import Prophet

    backend = importlib.import_module("forecaster.prophet_backend")
    h = history(diurnal(16, STEP, seed=3), STEP)  # two weeks: daily + weekly seasonality
    anchor_s = h.start_s + 16 * 86_400
    frame = training_frame(h, anchor_s, ForecasterSettings())
    assert frame is not None
    shorter = frame.iloc[:-1].reset_index(drop=True)  # same changepoints: a warm start
    assert len(shorter) // 20 == len(frame) // 20
    cold = backend.fit_prophet(frame, anchor_s, None)
    warm = backend.fit_prophet(shorter, anchor_s, cold.params)
    for fit, data, init in ((cold, frame, None), (warm, shorter, cold.params)):
        stock = Prophet(**{k: getattr(fit.model, k) for k in (
            "growth", "yearly_seasonality", "daily_seasonality", "weekly_seasonality",
            "uncertainty_samples", "n_changepoints")})
        kwargs = {"seed": 0} | ({"init": {k: np.asarray(v, dtype=float) if isinstance(v, list)
                                          else v for k, v in init.items()}} if init else {})
        stock.fit(data, **kwargs)
        assert backend.warm_start_params(stock) == fit.params  # bit for bit
        pd.testing.assert_frame_equal(stock.train_component_cols,
                                      fit.model.train_component_cols)


def test_hybrid_forecast_depends_only_on_data_before_its_origin() -> None:
    values = diurnal(6, STEP, seed=9)
    origin = 270  # day 5.6: the origin's seasonal fit sits inside a warm-start chain
    origins = np.arange(250, origin + 1)
    settings = ForecasterSettings(min_train_rows=48)
    full = hybrid(settings).predict(history(values, STEP), origins, 1)
    changed = values.copy()
    changed[origin:] = 2 * changed[origin:] + 1
    perturbed = hybrid(settings).predict(history(changed, STEP), origins, 1)
    cut = hybrid(settings).predict(history(values[:origin + 1], STEP), np.array([origin]), 1)
    assert set(full.method) == {"hybrid"}
    np.testing.assert_array_equal(full.p50, perturbed.p50)
    np.testing.assert_allclose(full.p50[-1], cut.p50[0], rtol=1e-9)
    np.testing.assert_allclose(full.p90[-1], cut.p90[0], rtol=1e-9)


def test_stored_state_serves_the_next_run_without_refitting() -> None:
    values = diurnal(5, STEP, seed=3)
    settings = ForecasterSettings(min_train_rows=48, replay_chain=False)
    h: History = history(values, STEP)
    first = hybrid(settings)
    origin = np.array([h.size])
    before = first.predict(h, origin, 1)
    doc = export_state(first, h, h.size, LEADS)
    assert doc["level"]["method"] == "hybrid" and doc["seasonal"]["params"]["beta"]
    fresh = hybrid(settings)
    assert import_state(fresh, h, doc) == 2
    after = fresh.predict(h, origin, 1)
    assert isinstance(fresh.seasonal, SeasonalChain)
    assert fresh.seasonal.fits_done == 0
    np.testing.assert_array_equal(before.p50, after.p50)


def test_state_for_changed_history_is_not_reused() -> None:
    values = diurnal(5, STEP, seed=3)
    settings = ForecasterSettings(min_train_rows=48, replay_chain=False)
    h = history(values, STEP)
    model = hybrid(settings)
    model.predict(h, np.array([h.size]), 1)
    doc = export_state(model, h, h.size, LEADS)
    edited = values.copy()
    edited[-10] += 50  # the data before the anchor changed: the stored fit no longer applies
    assert import_state(hybrid(settings), history(edited, STEP), doc) < 2


def test_plain_prophet_forecasts_trend_and_season_without_the_level() -> None:
    values = diurnal(5, STEP, seed=1, noise=0.02)
    model = importlib.import_module("forecaster.prophet_backend").ProphetForecaster(
        ForecasterSettings())
    pred = model.predict(history(values, STEP), np.array([230, 231]), 1)
    assert set(pred.method) == {"prophet"}
    assert pred.p50.shape == (2, 1)
    assert np.all(np.abs(pred.p50[:, 0] - values[[230, 231]]) < 0.3 * values.mean())
    assert pd.notna(pred.p90).all()
