"""The forecaster protocol, the anchored fit/predict driver, and the naive baselines.

Every forecaster answers ``predict(history, origins, n_targets)``: for each origin index ``o`` it
may use ``values[:o]`` only, and returns p50/p90 for targets ``o, o+1, ..., o+n_targets-1`` (leads
1..n_targets after the last observation). Fitting happens at *anchors* on a fixed cadence (see
``ForecasterSettings``); the fitted state for an anchor depends only on data before it and is
cached, so a backtest over thousands of origins fits once per anchor and the production job
reuses one fit until its series' next anchor.
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from forecaster.calibrate import calibrate_leads, fitted_leads, interpolate_leads
from forecaster.features import FEATURES, History, feature_matrix, level_scale
from forecaster.seasonal import SeasonalCurve
from forecaster.settings import DEFAULT_SETTINGS, ForecasterSettings
from forecaster.threads import single_threaded_blas

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class Predictions:
    """Per origin (rows) and target step (columns): p50 and p90; per origin: method and reason."""

    p50: FloatArray
    p90: FloatArray
    method: tuple[str, ...]
    reason: tuple[str, ...]
    backtest_wape: FloatArray  # percent, NaN when unknown


class Forecaster(Protocol):
    """One forecasting method (registry entry)."""

    name: str

    def predict(self, h: History, origins: IntArray, n_targets: int) -> Predictions:
        """p50/p90 for targets origin..origin+n_targets-1 of each origin, from data before it."""
        ...


class Fitted(ABC):
    """What a forecaster learned at one anchor."""

    method: str = ""
    reason: str = ""
    backtest_wape: float = float("nan")
    q90: dict[int, float] | None = None  # the fit's own p90 margins (else calibrated in-sample)

    @abstractmethod
    def point(self, h: History, origins: IntArray, lead: int) -> FloatArray:
        """p50 at lead ``lead`` for each origin (origins at or after the anchor)."""


@dataclass(slots=True)
class LinearFit(Fitted):
    """p50 = features @ coef (per fitted lead); baselines are one-hot coefficient vectors."""

    coefs: dict[int, FloatArray]
    curve: SeasonalCurve | None = None  # seasonal features are used when present
    method: str = ""
    reason: str = ""
    backtest_wape: float = float("nan")

    def point(self, h: History, origins: IntArray, lead: int) -> FloatArray:
        x = feature_matrix(h, origins, lead, self.curve)
        coef = self.coefs[lead]
        return np.asarray(np.column_stack([x, np.ones(len(origins))]) @ coef, dtype=np.float64)


class AnchoredForecaster(ABC):
    """Groups origins by anchor, fits once per anchor (cached), calibrates p90, fills leads."""

    name = "anchored"

    def __init__(self, settings: ForecasterSettings = DEFAULT_SETTINGS) -> None:
        self.settings = settings
        self._cache: OrderedDict[tuple[object, ...], tuple[Fitted, dict[int, float]]] = \
            OrderedDict()
        self.fits_done = 0  # fits computed (not served from the cache or stored state)

    @abstractmethod
    def fit(self, h: History, anchor_s: float, leads: tuple[int, ...]) -> Fitted:
        """Learn from data before ``anchor_s`` (indices < h.index_at(anchor_s))."""

    def period_s(self) -> int:
        return self.settings.refit_period_s

    def predict(self, h: History, origins: IntArray, n_targets: int) -> Predictions:
        with single_threaded_blas():
            return self._predict(h, np.asarray(origins, dtype=np.int64), n_targets)

    def _predict(self, h: History, origins: IntArray, n_targets: int) -> Predictions:
        leads = fitted_leads(n_targets)
        anchors = anchor_times(h, origins, self.period_s())
        p50 = np.zeros((origins.size, n_targets))
        p90 = np.zeros((origins.size, n_targets))
        method = [""] * origins.size
        reason = [""] * origins.size
        wape = np.full(origins.size, np.nan)
        for anchor_s in np.unique(anchors):
            rows = np.flatnonzero(anchors == anchor_s)
            fitted, q90 = self._fitted(h, float(anchor_s), leads)
            o = origins[rows]
            points = {k: np.maximum(fitted.point(h, o, k), 0.0) for k in leads}
            unseen = ~np.isfinite(h.last_before(o))  # nothing observed yet: explicit zeros
            for k in leads:
                points[k][unseen] = 0.0
            scale = level_scale(h, o)
            uppers = {k: points[k] + max(q90[k], 0.0) * (points[k] + scale) for k in leads}
            p50[rows] = interpolate_leads(points, n_targets)
            p90[rows] = np.maximum(interpolate_leads(uppers, n_targets), p50[rows])
            for i, blind in zip(rows, unseen, strict=True):
                method[i] = "persistence" if blind else (fitted.method or self.name)
                reason[i] = "no_observations" if blind else fitted.reason
            wape[rows] = fitted.backtest_wape
        return Predictions(p50, p90, tuple(method), tuple(reason), wape)

    def _fitted(self, h: History, anchor_s: float,
                leads: tuple[int, ...]) -> tuple[Fitted, dict[int, float]]:
        key = self.entry_key(h, anchor_s, leads)
        hit = self.get_entry(key)
        if hit is not None:
            return hit
        fitted = self.fit(h, anchor_s, leads)
        q90 = fitted.q90 if fitted.q90 is not None else \
            calibrate_leads(h, anchor_s, leads, fitted.point, self.settings)
        self.fits_done += 1
        self.put_entry(key, fitted, q90)
        return fitted, q90

    def anchor_for(self, h: History, origin: int) -> float:
        return float(anchor_times(h, np.array([origin], dtype=np.int64), self.period_s())[0])

    def entry_key(self, h: History, anchor_s: float, leads: tuple[int, ...]) -> tuple[object, ...]:
        return (self.name, h.series_id, h.step_s, anchor_s, leads, fingerprint(h, anchor_s))

    def get_entry(self, key: tuple[object, ...]) -> tuple[Fitted, dict[int, float]] | None:
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
        return hit

    def put_entry(self, key: tuple[object, ...], fitted: Fitted, q90: dict[int, float]) -> None:
        self._cache[key] = (fitted, q90)
        while len(self._cache) > self.settings.cache_entries:
            self._cache.popitem(last=False)

    def forget(self, series_id: str) -> None:
        """Drop every cached fit of ``series_id`` (and its seasonal fits, if any), e.g. ones
        loaded from a stored state that turned out not to fit the model."""
        for key in [k for k in self._cache if k[1] == series_id]:
            del self._cache[key]
        seasonal = getattr(self, "seasonal", None)
        if seasonal is not None and hasattr(seasonal, "forget"):
            seasonal.forget(series_id)


class BaselineForecaster(AnchoredForecaster):
    """Persistence, hour mean or seasonal naive (the judge's conventions), calibrated p90."""

    def __init__(self, name: str, feature: str,
                 settings: ForecasterSettings = DEFAULT_SETTINGS) -> None:
        super().__init__(settings)
        self.name = name
        self.feature = feature

    def fit(self, h: History, anchor_s: float, leads: tuple[int, ...]) -> Fitted:
        return baseline_fit(self.feature, leads, self.name)


BASELINE_FEATURES = {"persistence": "last", "hour_mean": "hour_mean", "seasonal_naive": "day_ago"}


def baseline_fit(feature: str, leads: tuple[int, ...], method: str, reason: str = "",
                 curve: SeasonalCurve | None = None, n_features: int | None = None) -> LinearFit:
    width = (n_features if n_features is not None else len(FEATURES)) + 1
    coef = np.zeros(width)
    coef[FEATURES.index(feature)] = 1.0
    return LinearFit({k: coef for k in leads}, curve, method, reason)


def anchor_times(h: History, origins: IntArray, period_s: int) -> FloatArray:
    """The latest anchor at or before each origin's time (per-series stable offset)."""
    offset = series_offset_s(h.series_id, period_s)
    t = h.time_of(origins)
    return np.asarray(np.floor((t - offset) / period_s) * period_s + offset)


def series_offset_s(series_id: str, period_s: int) -> int:
    """Stable per-series shift of the refit cadence, so a fleet's refits spread out."""
    return zlib.crc32(series_id.encode()) % period_s


def fingerprint(h: History, anchor_s: float) -> int:
    """Checksum of the last day before the anchor: a cached fit is reused only for that data."""
    r = h.index_at(anchor_s)
    lo = max(0, r - max(1, 86_400 // h.step_s))
    chunk = np.nan_to_num(h.values[lo:max(lo, min(r, h.size))], nan=-1.0)
    return zlib.crc32(chunk.tobytes())
