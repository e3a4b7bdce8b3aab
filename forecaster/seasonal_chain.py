"""Seasonal fits per anchor with warm-start chains, independent of the fitting library.

Prophet carries the daily/weekly shape. It is refitted once per seasonal anchor (daily by default,
per-series offset) on data before the anchor, averaged to ``seasonal_step_s`` (a cold fit costs
~0.1 s). Each refit is *warm-started* from the previous anchor's parameters; chains restart cold
at ``warm_chain_s`` boundaries. Without a cached previous fit, a backtest replays the chain from
its start (``replay_chain``), so a fit depends only on data before its anchor; the job instead
fits cold and stores the result for tomorrow's warm start.

The fitter (``forecaster.prophet_backend.fit_prophet``) is imported by module name on the first
fit, so restoring stored state or serving cached fits never imports Prophet.
"""

from __future__ import annotations

import importlib
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from forecaster.features import History
from forecaster.models import fingerprint, series_offset_s
from forecaster.seasonal import SeasonalCurve
from forecaster.settings import DEFAULT_SETTINGS, ForecasterSettings
from forecaster.stacking import SeasonalFitError

FITTER_MODULE = "forecaster.prophet_backend"
MIN_SPAN_DAYS = 2.0
Params = dict[str, Any]
log = logging.getLogger("headroom.forecaster")


@dataclass(frozen=True, slots=True, eq=False)
class SeasonalFit:
    anchor_s: float
    model: Any  # the library's model object (in process only; None when restored)
    curve: SeasonalCurve
    params: Params  # warm-start parameters


class SeasonalChain:
    """``SeasonalBackend``: the shape fitted at the latest seasonal anchor <= a given time."""

    def __init__(self, settings: ForecasterSettings = DEFAULT_SETTINGS,
                 fitter_module: str = FITTER_MODULE) -> None:
        self.settings = settings
        self.fitter_module = fitter_module
        self._fits: OrderedDict[tuple[object, ...], SeasonalFit | None] = OrderedDict()
        self.fits_done = 0

    @property
    def period(self) -> int:
        return self.settings.seasonal_period_s

    def curve_at(self, h: History, anchor_s: float) -> SeasonalCurve:
        return self.fit_at(h, anchor_s).curve

    def seasonal_anchor(self, series_id: str, anchor_s: float) -> float:
        off = series_offset_s(series_id, self.period)
        return float(np.floor((anchor_s - off) / self.period) * self.period + off)

    def fit_at(self, h: History, anchor_s: float) -> SeasonalFit:
        day = self.seasonal_anchor(h.series_id, anchor_s)
        fit = self._resolve(h, day, depth=0)
        if fit is None:
            frame = training_frame(h, day, self.settings)
            short = frame is None or span_days(frame) < MIN_SPAN_DAYS
            raise SeasonalFitError(
                f"series {h.series_id!r}: " + ("under two days of data for a seasonal fit"
                                               if short else "the seasonal fit failed"),
                "seasonal_short_history" if short else "seasonal_fit_failed")
        return fit

    def key(self, h: History, day: float) -> tuple[object, ...]:
        return (h.series_id, h.step_s, day, fingerprint(h, day))

    def cached(self, h: History, day: float) -> SeasonalFit | None:
        return self._fits.get(self.key(h, day))

    def restore(self, h: History, day: float, curve: SeasonalCurve, params: Params) -> None:
        """A stored fit (no model object): serves its curve and warm-starts the next anchor."""
        self._put(self.key(h, day), SeasonalFit(day, None, curve, params))

    def forget(self, series_id: str) -> None:
        """Drop every fit of ``series_id`` (``AnchoredForecaster.forget``)."""
        for key in [k for k in self._fits if k[0] == series_id]:
            del self._fits[key]

    def _resolve(self, h: History, day: float, depth: int) -> SeasonalFit | None:
        key = self.key(h, day)
        if key in self._fits:
            self._fits.move_to_end(key)
            return self._fits[key]
        prev = None
        if not self._chain_start(h.series_id, day) and depth < 64 and (
                self.settings.replay_chain or self.key(h, day - self.period) in self._fits):
            prev = self._resolve(h, day - self.period, depth + 1)
        frame = training_frame(h, day, self.settings)
        fit = None
        if frame is not None and span_days(frame) >= MIN_SPAN_DAYS:
            try:
                fit = self._fitter().fit_prophet(frame, day, prev.params if prev else None)
                self.fits_done += 1
            except (RuntimeError, ValueError) as exc:  # optimizer failure, degenerate data
                log.debug("series %r: seasonal fit failed: %s", h.series_id, exc)
        fit = fit if fit is not None else prev  # a failed refit keeps the previous shape
        self._put(key, fit)
        return fit

    def _fitter(self) -> Any:
        return importlib.import_module(self.fitter_module)

    def _put(self, key: tuple[object, ...], fit: SeasonalFit | None) -> None:
        self._fits[key] = fit
        while len(self._fits) > self.settings.cache_entries:
            self._fits.popitem(last=False)

    def _chain_start(self, series_id: str, day: float) -> bool:
        off = series_offset_s(series_id, self.period)
        per_chain = max(1, self.settings.warm_chain_s // self.period)
        return round((day - off) / self.period) % per_chain == 0


def training_frame(h: History, anchor_s: float, s: ForecasterSettings) -> pd.DataFrame | None:
    """Data before the anchor in the seasonal window, averaged to >= ``seasonal_step_s`` in
    groups counted back from the anchor (so the grid does not depend on the file start)."""
    r = min(h.index_at(anchor_s), h.size)
    lo = max(0, h.index_at(anchor_s - s.seasonal_window_s))
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


def span_days(frame: pd.DataFrame) -> float:
    return float((frame["ds"].iloc[-1] - frame["ds"].iloc[0]).total_seconds()) / 86_400
