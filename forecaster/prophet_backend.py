"""The only module that imports Prophet (import-linter enforces it).

Prophet carries the daily/weekly shape; it is refitted once per seasonal anchor (daily by
default, per-series offset) on data before the anchor, averaged to ``seasonal_step_s`` so a fit
costs ~0.1 s. Refits are *warm-started* from the previous day's parameters; chains restart cold at
``warm_chain_s`` boundaries, and a backtest replays the chain from that boundary, so a fit depends
only on data before its anchor (never on where a file happens to start or end). Quantiles come
from recent residuals (``forecaster.calibrate``), not from posterior sampling
(``uncertainty_samples=0``). cmdstanpy's logging is silenced here.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.features import History
from forecaster.models import (
    AnchoredForecaster,
    Fitted,
    baseline_fit,
    fingerprint,
    series_offset_s,
)
from forecaster.seasonal import SeasonalCurve
from forecaster.settings import DEFAULT_SETTINGS, ForecasterSettings
from forecaster.stacking import SeasonalFitError

for _name in ("cmdstanpy", "prophet", "prophet.plot", "prophet.models"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)
    logging.getLogger(_name).propagate = False

from prophet import Prophet  # noqa: E402  (after silencing its import-time logging)

logging.getLogger("cmdstanpy").disabled = True

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Params = dict[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class ProphetFit:
    anchor_s: float
    model: Any  # prophet.Prophet (kept in process for the plain-Prophet method)
    curve: SeasonalCurve
    params: Params  # warm-start parameters (k, m, sigma_obs, delta, beta)


class ProphetSeasonal:
    """``SeasonalBackend``: the Prophet shape at the latest seasonal anchor (warm-start chains)."""

    def __init__(self, settings: ForecasterSettings = DEFAULT_SETTINGS) -> None:
        self.settings = settings
        self._fits: OrderedDict[tuple[object, ...], ProphetFit | None] = OrderedDict()
        self.fits_done = 0

    def curve_at(self, h: History, anchor_s: float) -> SeasonalCurve:
        return self.fit_at(h, anchor_s).curve

    def seasonal_anchor(self, series_id: str, anchor_s: float) -> float:
        period = self.settings.seasonal_period_s
        off = series_offset_s(series_id, period)
        return float(np.floor((anchor_s - off) / period) * period + off)

    def fit_at(self, h: History, anchor_s: float) -> ProphetFit:
        """The fit at the seasonal anchor <= anchor_s, replaying its warm-start chain."""
        period = self.settings.seasonal_period_s
        day = self.seasonal_anchor(h.series_id, anchor_s)
        per_chain = max(1, self.settings.warm_chain_s // period)
        off = series_offset_s(h.series_id, period)
        chain_start = off + (np.floor((day - off) / period) // per_chain * per_chain) * period
        anchors = np.arange(chain_start, day + 1, period, dtype=np.float64)
        prev: ProphetFit | None = None
        for a in anchors:
            prev = self._fit_one(h, float(a), prev)
        if prev is None:
            raise SeasonalFitError(f"series {h.series_id!r}: not enough data for a seasonal fit")
        return prev

    def _fit_one(self, h: History, anchor_s: float, prev: ProphetFit | None) -> ProphetFit | None:
        key = (h.series_id, h.step_s, anchor_s, prev.anchor_s if prev else None,
               fingerprint(h, anchor_s))
        if key in self._fits:
            self._fits.move_to_end(key)
            cached = self._fits[key]
            return cached if cached is not None else prev
        frame = training_frame(h, anchor_s, self.settings)
        fit = None
        if frame is not None:
            try:
                fit = fit_prophet(frame, anchor_s, prev.params if prev else None)
                self.fits_done += 1
            except (RuntimeError, ValueError) as exc:  # optimizer failure, degenerate data
                logging.getLogger("headroom.forecaster").debug("prophet fit failed: %s", exc)
        self._fits[key] = fit
        while len(self._fits) > self.settings.cache_entries:
            self._fits.popitem(last=False)
        return fit if fit is not None else prev


def training_frame(h: History, anchor_s: float, s: ForecasterSettings) -> pd.DataFrame | None:
    """Data before the anchor in the seasonal window, averaged to >= ``seasonal_step_s``
    in groups counted back from the anchor (so the grid does not depend on the file start)."""
    r = min(h.index_at(anchor_s), h.size)
    lo = max(0, h.index_at(anchor_s - s.seasonal_window_s))
    if r - lo < 2:
        return None
    m = max(1, s.seasonal_step_s // h.step_s) if s.seasonal_step_s % h.step_s == 0 else 1
    groups = (r - lo) // m
    if groups < 2:
        return None
    block = h.values[r - groups * m:r].reshape(groups, m)
    cnt = np.sum(np.isfinite(block), axis=1)
    mean = np.where(cnt > 0, np.nansum(block, axis=1) / np.maximum(cnt, 1), np.nan)
    centres = h.time_of(np.arange(r - groups * m, r, m)) + (m - 1) * h.step_s / 2.0
    ok = cnt * 2 >= m
    if ok.sum() < s.min_seasonal_points:
        return None
    ds = pd.to_datetime(np.floor(centres[ok]).astype(np.int64), unit="s")
    return pd.DataFrame({"ds": ds, "y": mean[ok]})


def fit_prophet(frame: pd.DataFrame, anchor_s: float, init: Params | None) -> ProphetFit:
    span_days = (frame["ds"].iloc[-1] - frame["ds"].iloc[0]).total_seconds() / 86_400
    if span_days < 2:
        raise ValueError("less than two days of data")
    model = Prophet(growth="linear", yearly_seasonality=False, daily_seasonality=True,
                    weekly_seasonality=span_days >= 14, uncertainty_samples=0,
                    n_changepoints=min(25, max(1, len(frame) // 20)))
    kwargs: dict[str, Any] = {"seed": 0}
    if init is not None and _compatible(init, model, len(frame)):
        kwargs["init"] = {k: (np.asarray(v, dtype=float) if isinstance(v, list) else v)
                          for k, v in init.items()}
    model.fit(frame, **kwargs)
    terms = tuple((float(p["period"]), int(p["fourier_order"]))
                  for p in model.seasonalities.values())
    beta = tuple(float(b) for b in np.ravel(model.params["beta"][0]))
    curve = SeasonalCurve(terms=terms, beta=beta, y_scale=float(model.y_scale or 1.0))
    return ProphetFit(anchor_s, model, curve, warm_start_params(model))


def warm_start_params(model: Any) -> Params:
    """Prophet's documented warm-start recipe (parameters of the previous fit)."""
    out: Params = {}
    for name in ("k", "m", "sigma_obs"):
        out[name] = float(np.ravel(model.params[name])[0])
    for name in ("delta", "beta"):
        out[name] = np.ravel(model.params[name][0]).astype(float).tolist()
    return out


def _compatible(init: Params, model: Any, rows: int) -> bool:
    expected_beta = 2 * (4 + (3 if model.weekly_seasonality else 0))
    return bool(len(init["beta"]) == expected_beta
                and len(init["delta"]) == min(25, max(1, rows // 20)))


class ProphetForecaster(AnchoredForecaster):
    """Plain Prophet (trend + seasonality, no recent-level correction): the comparison method."""

    name = "prophet"

    def __init__(self, settings: ForecasterSettings = DEFAULT_SETTINGS) -> None:
        super().__init__(settings)
        self.backend = ProphetSeasonal(settings)

    def period_s(self) -> int:
        return self.settings.seasonal_period_s

    def fit(self, h: History, anchor_s: float, leads: tuple[int, ...]) -> Fitted:
        try:
            return _ProphetPoint(self.backend.fit_at(h, anchor_s), "prophet")
        except SeasonalFitError:
            return baseline_fit("last", leads, "persistence", "short_history")


@dataclass(slots=True)
class _ProphetPoint(Fitted):
    fit: ProphetFit
    method: str = "prophet"
    reason: str = ""
    backtest_wape: float = float("nan")

    def point(self, h: History, origins: IntArray, lead: int) -> FloatArray:
        times = np.floor(h.time_of(origins - 1 + lead)).astype(np.int64)
        frame = pd.DataFrame({"ds": pd.to_datetime(times, unit="s")})
        return np.asarray(self.fit.model.predict(frame)["yhat"].to_numpy(), dtype=np.float64)
