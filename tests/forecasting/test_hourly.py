"""The hourly-phase signal: detected only where an hourly rhythm is, read only from the past, and
learned by the boosted model when it appears in the recent days (a few small scikit-learn fits)."""

from __future__ import annotations

import json

import numpy as np

from forecaster.boosted import BoostedFit, boosted_features
from forecaster.calibrate import training_origins
from forecaster.hourly import HOURS_MEAN, hourly_columns, hourly_signal
from forecaster.persist import export_state, import_state
from tests.forecasting.builders import boosted_auto as auto
from tests.forecasting.builders import diurnal, history

STEP = 600
DAY = 86_400


def with_bursts(days: int, from_day: int, seed: int = 0) -> np.ndarray:
    """Diurnal traffic; from ``from_day`` on, x1.6 from :30 to :50 of every hour."""
    values = diurnal(days, STEP, seed=seed)
    t = np.arange(values.size) * STEP
    burst = (t >= from_day * DAY) & (t % 3600 >= 1800) & (t % 3600 < 3000)
    return np.asarray(values * np.where(burst, 1.6, 1.0))


def recent(h: object, anchor_s: float) -> np.ndarray:
    return training_origins(h, anchor_s, 2, 2 * DAY)  # type: ignore[arg-type]


def test_the_signal_is_on_where_bursts_recur_every_hour_and_off_in_plain_diurnal_traffic() -> None:
    bursty = history(with_bursts(10, from_day=6), STEP)
    plain = history(diurnal(10, STEP, seed=1), STEP)
    end = bursty.start_s + 10 * DAY
    assert hourly_signal(bursty, recent(bursty, end), 2)
    assert not hourly_signal(bursty, recent(bursty, bursty.start_s + 5 * DAY), 2)  # not yet
    assert not hourly_signal(plain, recent(plain, end), 2)


def test_hourly_columns_read_only_values_before_each_origin() -> None:
    values = with_bursts(4, from_day=1)
    origins = np.arange(400, 500)
    changed = values.copy()
    changed[450:] = 3 * changed[450:] + 7
    before = origins <= 450
    for lead in (1, 2):
        j = origins - 1
        cols = np.column_stack(hourly_columns(history(values, STEP), j, j + lead, origins))
        cols2 = np.column_stack(hourly_columns(history(changed, STEP), j, j + lead, origins))
        assert cols.shape == (origins.size, len(HOURS_MEAN) + 1)
        np.testing.assert_array_equal(cols[before], cols2[before])
        assert np.all(np.isfinite(cols))


def test_the_boosted_model_learns_bursts_that_began_in_the_last_days() -> None:
    values = with_bursts(14, from_day=10, seed=2)
    h = history(values, STEP)
    origins = np.arange(13 * DAY // STEP, h.size - 1)
    fit = auto().fit(h, h.start_s + 13 * DAY, (1, 2))
    assert isinstance(fit, BoostedFit) and fit.hourly
    y = values[origins + 1]
    wape = float(np.sum(np.abs(y - fit.point(h, origins, 2))) / np.sum(y))
    persistence = float(np.sum(np.abs(y - values[origins - 1])) / np.sum(y))
    assert wape < 0.75 * persistence
    quiet = history(diurnal(14, STEP, seed=2), STEP)
    plain_fit = auto().fit(quiet, quiet.start_s + 13 * DAY, (1, 2))
    assert isinstance(plain_fit, BoostedFit) and not plain_fit.hourly
    x_plain, _ = boosted_features(quiet, origins, 2)
    x_hourly, _ = boosted_features(quiet, origins, 2, hourly=True)
    assert x_hourly.shape[1] == x_plain.shape[1] + len(HOURS_MEAN) + 1


def test_a_stored_fit_keeps_its_hourly_features() -> None:
    h = history(with_bursts(12, from_day=8, seed=3), STEP)
    origin = np.array([h.size])
    first = auto()
    before = first.predict(h, origin, 2)
    doc = json.loads(json.dumps(export_state(first, h, h.size, (1, 2))))
    assert doc["boosted"]["hourly"] is True
    fresh = auto()
    assert import_state(fresh, h, doc) == 1
    after = fresh.predict(h, origin, 2)
    assert fresh.fits_done == 0
    np.testing.assert_array_equal(before.p50, after.p50)
