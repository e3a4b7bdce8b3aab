"""The hybrid forecaster: a median (quantile) regression that stacks level features (last value,
short means, EWMA, same-time-yesterday deltas, seasonal naive) and, when a seasonal backend is
given, Prophet's daily/weekly shape applied to the latest level. With a seasonal backend, coarse
dense series (``forecaster.boosted.eligible``: steps of 10 minutes or more) use the boosted
model instead, under the same guard.

Per anchor: fit on the pairs whose targets fall in the training window before the anchor (its
rows thinned evenly to ``max_train_rows``, of which the fits use the newest ``max_fit_rows``: on a
7-day 1-minute history, its last ~5 days: recent data is what a level model needs); with
``guard`` on, first refit on all but the last ``validation_s`` and compare that model's WAPE on
the held-out pairs with the naive baselines; fall back to the best baseline when the model is
worse by more than ``guard_margin`` (reason ``worse_than_baseline``). Too little history falls
back to the baseline that did best on what there is (reason ``short_history``), and training
targets that are all zero to persistence (reason ``no_traffic_before_anchor``: a model whose
traffic starts between two anchors is followed at once, not forecast at zero until the next).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from forecaster.boosted import eligible, fit_boosted
from forecaster.calibrate import training_origins
from forecaster.features import FEATURES, SEASONAL_FEATURES, History, feature_matrix
from forecaster.models import (
    BASELINE_FEATURES,
    AnchoredForecaster,
    Fitted,
    LinearFit,
    baseline_fit,
)
from forecaster.quantreg import quantile_regression
from forecaster.seasonal import SeasonalCurve
from forecaster.settings import DEFAULT_SETTINGS, ForecasterSettings

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
NO_TRAFFIC = "no_traffic_before_anchor"


class SeasonalBackend(Protocol):
    """Fits a seasonal shape on data before an anchor (Prophet in production)."""

    def curve_at(self, h: History, anchor_s: float) -> SeasonalCurve:
        """The shape fitted on data before the latest seasonal anchor <= ``anchor_s``.
        Raises ``SeasonalFitError`` when it cannot fit (too little data, optimizer failure)."""
        ...


class SeasonalFitError(Exception):
    """The seasonal backend could not fit (the level model carries on without it).

    ``reason`` is ``seasonal_short_history`` (under two days of data before the anchor) or
    ``seasonal_fit_failed`` (the optimizer failed)."""

    def __init__(self, message: str, reason: str = "seasonal_fit_failed") -> None:
        super().__init__(message)
        self.reason = reason


class StackingForecaster(AnchoredForecaster):
    def __init__(self, name: str, seasonal: SeasonalBackend | None = None, guard: bool = True,
                 settings: ForecasterSettings = DEFAULT_SETTINGS) -> None:
        super().__init__(settings)
        self.name = name
        self.seasonal = seasonal
        self.guard = guard

    def fit(self, h: History, anchor_s: float, leads: tuple[int, ...]) -> Fitted:
        s = self.settings
        if self.seasonal is not None and eligible(h, anchor_s, s):
            boosted = self._boosted(h, anchor_s, leads)
            if boosted is not None:
                return boosted
        curve, reason = None, ""
        if self.seasonal is not None:
            try:
                curve = self.seasonal.curve_at(h, anchor_s)
            except SeasonalFitError as exc:
                reason = exc.reason
        width = len(FEATURES) + (len(SEASONAL_FEATURES) if curve is not None else 0)
        head = leads[-1]
        rows = training_origins(h, anchor_s, head, s.train_window_s, s.max_train_rows)
        if rows.size < s.min_train_rows:
            name, wape = best_baseline(h, anchor_s, head, s)
            fit = baseline_fit(BASELINE_FEATURES[name], leads, name, "short_history", curve, width)
            fit.backtest_wape = wape
            return fit
        if not np.any(h.values[rows - 1 + head] > 0):
            # nothing but zeros to learn from (a model whose traffic starts after the anchor):
            # a regression fitted on them predicts zero until the next anchor, whatever comes
            return baseline_fit(BASELINE_FEATURES["persistence"], leads, "persistence",
                                NO_TRAFFIC, curve, width)
        wape, fallback, previous = self._validate(h, anchor_s, head, curve, reason)
        if fallback is not None:
            return fallback_fit(fallback, leads, curve, width, wape)
        coefs: dict[int, FloatArray] = {}
        for k in reversed(leads):  # the headline lead first; each fit warm-starts the next
            origins = training_origins(h, anchor_s, k, s.train_window_s, s.max_train_rows)
            coefs[k] = previous = _median_fit(h, origins[-s.max_fit_rows:], k, curve, previous)
        return LinearFit(coefs, curve, self.name, reason, wape)

    def _boosted(self, h: History, anchor_s: float, leads: tuple[int, ...]) -> Fitted | None:
        """The boosted model, guarded like the hybrid against the baselines on the held-out
        window; None when it has too little data (the hybrid carries on)."""
        s = self.settings
        valid_s = validation_window_s(h, anchor_s, s)
        fit = fit_boosted(h, anchor_s, leads, s, valid_s)
        if fit is None or not np.isfinite(fit.backtest_wape):
            return None
        head = leads[-1]
        val_rows = training_origins(h, anchor_s, head, valid_s, s.max_train_rows)
        y = h.values[val_rows - 1 + head]
        base = baseline_wapes(h, val_rows, head, y, float(np.sum(np.abs(y))))
        best = min(base, key=lambda k: base[k])
        if self.guard and fit.backtest_wape > base[best] * (1 + s.guard_margin):
            return fallback_fit(best, leads, None, len(FEATURES), base[best])
        return fit

    def _validate(self, h: History, anchor_s: float, lead: int, curve: SeasonalCurve | None,
                  reason: str) -> tuple[float, str | None, FloatArray | None]:
        """(recent WAPE % of the chosen method, baseline to fall back to or None, the
        held-out model's coefficients)."""
        s = self.settings
        valid_s = validation_window_s(h, anchor_s, s)
        split_s = anchor_s - valid_s
        fit_rows = training_origins(h, split_s, lead, s.train_window_s - valid_s,
                                    s.max_train_rows)
        val_rows = training_origins(h, anchor_s, lead, valid_s, s.max_train_rows)
        if fit_rows.size < s.min_train_rows or val_rows.size < s.min_baseline_pairs:
            return float("nan"), None, None
        y = h.values[val_rows - 1 + lead]
        denom = float(np.sum(np.abs(y)))
        if denom <= 0:
            return float("nan"), None, None
        coef = _median_fit(h, fit_rows[-s.max_fit_rows:], lead, curve)
        x = _design(h, val_rows, lead, curve)
        model_wape = 100 * float(np.sum(np.abs(y - np.maximum(x @ coef, 0.0)))) / denom
        base = baseline_wapes(h, val_rows, lead, y, denom)
        best = min(base, key=lambda k: base[k])
        if self.guard and model_wape > base[best] * (1 + s.guard_margin):
            return base[best], best, coef
        return model_wape, None, coef


def validation_window_s(h: History, anchor_s: float, s: ForecasterSettings) -> float:
    """``validation_s``, or a quarter of the history before the anchor when that is shorter."""
    valid = np.flatnonzero(np.isfinite(h.values[:max(0, min(h.index_at(anchor_s), h.size))]))
    if valid.size == 0:
        return float(s.validation_s)
    span_s = min(anchor_s - float(h.time_of(int(valid[0]))), float(s.train_window_s))
    return min(float(s.validation_s), span_s / 4)


def fallback_fit(name: str, leads: tuple[int, ...], curve: SeasonalCurve | None, width: int,
                 wape: float) -> LinearFit:
    fit = baseline_fit(BASELINE_FEATURES[name], leads, name, "worse_than_baseline", curve, width)
    fit.backtest_wape = wape
    return fit


def baseline_wapes(h: History, origins: IntArray, lead: int, y: FloatArray,
                   denom: float) -> dict[str, float]:
    x = feature_matrix(h, origins, lead)
    return {name: 100 * float(np.nansum(np.abs(y - x[:, FEATURES.index(col)]))) / denom
            for name, col in BASELINE_FEATURES.items()}


def best_baseline(h: History, anchor_s: float, lead: int,
                  s: ForecasterSettings) -> tuple[str, float]:
    """The baseline with the lowest WAPE on the pairs before the anchor (persistence if none)."""
    rows = training_origins(h, anchor_s, lead, s.train_window_s, s.max_train_rows)
    rows = rows[np.isfinite(h.last_before(rows))]
    if rows.size < s.min_baseline_pairs:
        return "persistence", float("nan")
    y = h.values[rows - 1 + lead]
    denom = float(np.sum(np.abs(y)))
    if denom <= 0:
        return "persistence", float("nan")
    wapes = baseline_wapes(h, rows, lead, y, denom)
    best = min(wapes, key=lambda k: wapes[k])
    return best, wapes[best]


def _design(h: History, origins: IntArray, lead: int, curve: SeasonalCurve | None) -> FloatArray:
    x = feature_matrix(h, origins, lead, curve)
    return np.column_stack([x, np.ones(origins.size)])


def _median_fit(h: History, origins: IntArray, lead: int, curve: SeasonalCurve | None,
                start: FloatArray | None = None) -> FloatArray:
    x = _design(h, origins, lead, curve)
    y = h.values[origins - 1 + lead]
    ok = np.all(np.isfinite(x), axis=1) & np.isfinite(y)
    if ok.sum() < x.shape[1]:
        coef = np.zeros(x.shape[1])
        coef[FEATURES.index("last")] = 1.0
        return coef
    return quantile_regression(x[ok], y[ok], 0.5, start=start)
