from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from forecaster.features import FEATURES, SEASONAL_FEATURES, feature_matrix
from forecaster.seasonal import SeasonalCurve, fourier_matrix
from tests.forecasting.builders import diurnal, history

CURVE = SeasonalCurve(terms=((1.0, 2),), beta=(0.1, -0.2, 0.05, 0.3), y_scale=50.0)


@settings(max_examples=40, deadline=None)
@given(origin_frac=st.floats(0.05, 1.0), lead=st.integers(1, 25), seed=st.integers(0, 10**6),
       gap=st.booleans())
def test_features_at_an_origin_never_read_data_at_or_after_it(origin_frac: float, lead: int,
                                                              seed: int, gap: bool) -> None:
    values = diurnal(9, 600, seed=seed)
    if gap:
        values[100:130] = np.nan
    origin = max(1, int(origin_frac * values.size))
    future = values.copy()
    future[origin:] = future[origin:] * 3 + 7  # change everything the origin must not see
    before = feature_matrix(history(values, 600), np.array([origin]), lead, CURVE)
    after = feature_matrix(history(future, 600), np.array([origin]), lead, CURVE)
    np.testing.assert_array_equal(before, after)


def test_features_with_a_curve_add_the_seasonal_pair() -> None:
    h = history(diurnal(3, 600), 600)
    x = feature_matrix(h, np.array([200, 300]), 2, CURVE)
    assert x.shape == (2, len(FEATURES) + len(SEASONAL_FEATURES))
    last = x[:, FEATURES.index("last")]
    times = h.time_of(np.array([201, 301]))
    lag = h.time_of(np.array([199, 299]))
    expected = last + CURVE.evaluate(times) - CURVE.evaluate(lag)
    np.testing.assert_allclose(x[:, len(FEATURES)], expected)


def test_baseline_features_follow_the_judges_conventions() -> None:
    values = np.arange(1, 2 * 144 + 1, dtype=float)  # 2 days at 10 min
    h = history(values, 600)
    origin = np.array([200])
    x = feature_matrix(h, origin, 2)
    assert x[0, FEATURES.index("last")] == values[199]
    assert x[0, FEATURES.index("hour_mean")] == values[194:200].mean()
    assert x[0, FEATURES.index("day_ago")] == values[201 - 144]


def test_last_skips_gaps_and_is_missing_before_the_first_value() -> None:
    values = np.array([np.nan, np.nan, 5.0, np.nan, np.nan])
    h = history(values, 60)
    assert np.isnan(h.last_before(np.array([1]))[0])
    assert h.last_before(np.array([5]))[0] == 5.0


def test_fourier_columns_are_sine_cosine_pairs_per_order() -> None:
    t = np.array([0.0, 21_600.0])  # midnight and 06:00
    m = fourier_matrix(t, ((1.0, 1),))
    np.testing.assert_allclose(m, [[0.0, 1.0], [1.0, 0.0]], atol=1e-12)
