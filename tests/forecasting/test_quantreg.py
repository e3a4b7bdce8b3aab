from __future__ import annotations

import numpy as np
import pytest

from forecaster.quantreg import quantile_regression


def pinball(x: np.ndarray, y: np.ndarray, b: np.ndarray, q: float) -> float:
    r = y - x @ b
    return float(np.mean(np.maximum(q * r, (q - 1) * r)))


@pytest.mark.parametrize("q", [0.5, 0.9])
def test_solution_is_a_minimum_of_the_pinball_loss(q: float) -> None:
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.normal(size=500), rng.normal(size=500), np.ones(500)])
    y = x @ np.array([2.0, -1.0, 5.0]) + rng.standard_t(2, size=500)
    b = quantile_regression(x, y, q)
    best = pinball(x, y, b, q)
    for i in range(3):
        for step in (-0.05, 0.05):
            nudged = b.copy()
            nudged[i] += step
            assert pinball(x, y, nudged, q) >= best - 1e-9


def test_median_regression_ignores_outliers_that_pull_least_squares() -> None:
    rng = np.random.default_rng(1)
    x = np.column_stack([np.arange(200.0), np.ones(200)])
    y = 3 * np.arange(200.0) + 10 + rng.normal(0, 1, 200)
    y[::10] += 5000  # every tenth point is a spike
    b = quantile_regression(x, y, 0.5)
    assert b[0] == pytest.approx(3.0, abs=0.05)
    ols = np.linalg.lstsq(x, y, rcond=None)[0]
    assert abs(ols[1] - 10) > 100


def test_collinear_columns_still_give_finite_coefficients() -> None:
    x = np.column_stack([np.arange(50.0), np.arange(50.0), np.ones(50)])
    b = quantile_regression(x, 2 * np.arange(50.0), 0.5)
    assert np.all(np.isfinite(b))
    assert float(np.max(np.abs(x @ b - 2 * np.arange(50.0)))) < 1e-3


def test_mismatched_shapes_are_rejected() -> None:
    with pytest.raises(ValueError, match="does not match"):
        quantile_regression(np.ones((3, 2)), np.ones(4))
