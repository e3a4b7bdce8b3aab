"""Causal features of a regular series for direct multi-step forecasting (pure numpy/pandas).

A forecast *origin* ``o`` is an index: the model may use ``values[:o]`` only. For lead ``k``
(steps after the last observation ``o - 1``) the target is index ``o - 1 + k``. Every feature
below reads indices ``< o`` only, which the tests check by perturbing the future.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.prepare import start_epoch_ns, values_array
from forecaster.seasonal import SeasonalCurve
from forecaster.types import TrafficSeries

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Level features; the seasonal pair is appended when a seasonal curve is available.
FEATURES = ("last", "mean3", "hour_mean", "last_plus_days", "mean3_plus_days", "day_ago",
            "week_ago", "ewma", "hour_plus_days")
SEASONAL_FEATURES = ("last_plus_season", "mean3_plus_season")
SEASON_DAYS = 7


@dataclass(frozen=True, slots=True, eq=False)
class History:
    """A regular series as arrays, with the running sums every feature needs."""

    series_id: str
    values: FloatArray
    step_s: int
    start_ns: int  # exact time of index 0 (Unix ns)
    last: FloatArray  # last valid value at index <= i (NaN before the first)
    csum: FloatArray  # csum[i] = sum of valid values before index i
    ccount: FloatArray
    ewma: FloatArray  # EWMA (alpha 0.5) of valid non-zero values up to index i
    trailing: dict[int, FloatArray]  # width -> window_mean(i, width) at every index i

    @classmethod
    def of(cls, series: TrafficSeries) -> History:
        return cls.from_array(series.series_id, values_array(series), series.step_s,
                              start_epoch_ns(series))

    @classmethod
    def from_array(cls, series_id: str, values: FloatArray, step_s: int,
                   start_ns: int) -> History:
        """``values`` as ``forecaster.prepare`` cleans a source's samples: a non-finite value
        (``inf`` too, not only NaN) is missing and a negative one is 0, so a ``TrafficSeries``
        built by hand reaches every method under the same rules (a finite, non-negative value
        is kept as it is)."""
        values = np.where(np.isfinite(values), np.maximum(values, 0.0), np.nan)
        valid = np.isfinite(values)
        pos = np.where(valid, np.arange(values.size), -1)
        last_pos = np.maximum.accumulate(pos) if values.size else pos
        last = np.where(last_pos >= 0, values[np.maximum(last_pos, 0)], np.nan)
        csum = np.concatenate([[0.0], np.cumsum(np.where(valid, values, 0.0))])
        ccount = np.concatenate([[0.0], np.cumsum(valid.astype(np.float64))])
        # zeros are skipped: scrape gaps that arrive as zeros must not drag this level down
        nonzero = np.where(values != 0, values, np.nan)
        ewma = pd.Series(nonzero).ewm(alpha=0.5, ignore_na=True).mean().to_numpy(np.float64)
        idx = np.arange(values.size)
        trailing = {w: _window_mean(csum, ccount, idx, w, values.size)
                    for w in {3, max(1, 3600 // step_s)}}
        return cls(series_id, values, step_s, start_ns, last, csum, ccount, ewma, trailing)

    @property
    def start_s(self) -> float:
        return self.start_ns / 1e9

    def times_ns(self, idx: IntArray) -> IntArray:
        """Exact Unix-ns times of indices (for output files)."""
        return np.asarray(self.start_ns + np.asarray(idx, dtype=np.int64) * self.step_s * 10**9)

    @property
    def size(self) -> int:
        return int(self.values.size)

    def steps(self, seconds: int) -> int | None:
        """``seconds`` in whole steps, or None when the step does not divide it."""
        return seconds // self.step_s if seconds % self.step_s == 0 else None

    def index_at(self, epoch_s: float) -> int:
        """First index whose time is >= ``epoch_s`` (data before it = indices below it)."""
        return int(np.ceil((epoch_s - self.start_s) / self.step_s - 1e-9))

    def time_of(self, idx: IntArray | int) -> FloatArray:
        return np.asarray(self.start_s + np.asarray(idx, dtype=np.float64) * self.step_s)

    def window_mean(self, end: IntArray, width: int) -> FloatArray:
        """Mean of the valid values in indices (end - width, end]; NaN when there are none.
        The 3-step and hourly means are looked up in ``trailing`` (same numbers, fewer ops)."""
        table = self.trailing.get(width)
        if table is not None and end.size and int(end.max()) < self.size:
            return np.where(end >= 0, table[np.maximum(end, 0)], np.nan)
        return _window_mean(self.csum, self.ccount, end, width, self.size)

    def at(self, idx: IntArray) -> FloatArray:
        ok = (idx >= 0) & (idx < self.size)
        return np.where(ok, self.values[np.clip(idx, 0, max(self.size - 1, 0))], np.nan)

    def last_before(self, origins: IntArray) -> FloatArray:
        """The last valid value before each origin (NaN when there is none)."""
        j = origins - 1
        ok = (j >= 0) & (j < self.size)
        return np.where(ok, self.last[np.clip(j, 0, max(self.size - 1, 0))], np.nan)


def feature_matrix(h: History, origins: IntArray, lead: int,
                   curve: SeasonalCurve | None = None) -> FloatArray:
    """Rows = origins, columns = FEATURES (+ SEASONAL_FEATURES with a curve)."""
    j = origins - 1
    t = j + lead
    last = h.last_before(origins)
    mean3 = _or(h.window_mean(j, 3), last)
    hour = _or(h.window_mean(j, max(1, 3600 // h.step_s)), last)
    plus_last, plus_mean3, plus_hour = _daily(h, j, t, lead, last, mean3, hour)
    day_ago = _or(_lagged(h, t, h.steps(86_400), origins), last)
    week_ago = _or(_lagged(h, t, h.steps(7 * 86_400), origins), last)
    ewma = _or(h.ewma[np.clip(j, 0, max(h.size - 1, 0))] if h.size else last, last)
    cols = [last, mean3, hour, plus_last, plus_mean3, day_ago, week_ago, ewma, plus_hour]
    if curve is not None:
        n = origins.size
        s = _curve_at(h, curve, np.concatenate([t, j, j - 1, j - 2]))
        s_t, s_j = s[:n], s[n:2 * n]
        s_j3 = (s_j + s[2 * n:3 * n] + s[3 * n:]) / 3.0
        cols += [last + s_t - s_j, mean3 + s_t - s_j3]
    return np.column_stack(cols)


#: (curve, start_ns, step_s) -> (first index, the curve at that index and on): one fit evaluates
#: its curve on the same index range for every lead, its validation and its calibration
_CURVE_MEMO: OrderedDict[tuple[SeasonalCurve, int, int], tuple[int, FloatArray]] = OrderedDict()
_CURVE_MEMO_ENTRIES = 8


def _curve_at(h: History, curve: SeasonalCurve, idx: IntArray) -> FloatArray:
    """The curve at indices ``idx`` (a pure function of the curve and the index times)."""
    if idx.size == 0:
        return np.zeros(0)
    lo, hi = int(idx.min()), int(idx.max())
    if hi - lo + 1 >= 4 * idx.size:  # a few scattered points: evaluate just those
        return curve.evaluate(h.time_of(idx))
    key = (curve, h.start_ns, h.step_s)
    hit = _CURVE_MEMO.get(key)
    if hit is not None and hit[0] <= lo and hi < hit[0] + hit[1].size:
        _CURVE_MEMO.move_to_end(key)
        return hit[1][idx - hit[0]]
    if hit is not None:  # extend the cached span rather than thrash between two ranges
        lo, hi = min(lo, hit[0]), max(hi, hit[0] + hit[1].size - 1)
    values = curve.evaluate(h.time_of(np.arange(lo, hi + 1)))
    _CURVE_MEMO[key] = (lo, values)
    while len(_CURVE_MEMO) > _CURVE_MEMO_ENTRIES:
        _CURVE_MEMO.popitem(last=False)
    return values[idx - lo]


def level_scale(h: History, origins: IntArray) -> FloatArray:
    """Typical level before each origin (trailing-day mean, else hour mean, else last)."""
    j = origins - 1
    last = h.last_before(origins)
    hour = _or(h.window_mean(j, max(1, 3600 // h.step_s)), last)
    day = _or(h.window_mean(j, max(1, 86_400 // h.step_s)), hour)
    return np.nan_to_num(day, nan=0.0)


def _daily(h: History, j: IntArray, t: IntArray, lead: int, last: FloatArray,
           mean3: FloatArray, hour: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Latest level (last, 3-step mean, hour mean) plus the change seen from the same clock time
    to the target's clock time on each of the last days (averaged over the days with data)."""
    day = h.steps(86_400)
    if day is None or day <= lead + 1:
        return last, mean3, hour
    width = max(1, 3600 // h.step_s)
    days_ago = np.arange(1, SEASON_DAYS + 1) * day  # one column per day back
    a, b = t[:, None] - days_ago, j[:, None] - days_ago
    centred = h.window_mean(a + 1, 3)  # centred on a; a + 1 < origin
    point = h.at(a) - h.at(b)
    smooth = centred - h.window_mean(b, 3)
    hourly = centred - h.window_mean(b, width)
    return (last + _nanmean_or_zero(point), mean3 + _nanmean_or_zero(smooth),
            hour + _nanmean_or_zero(hourly))


def _lagged(h: History, t: IntArray, period: int | None, origins: IntArray) -> FloatArray:
    if period is None:
        return np.full(t.size, np.nan)
    src = t - period
    return np.where(src < origins, h.at(src), np.nan)


def _window_mean(csum: FloatArray, ccount: FloatArray, end: IntArray, width: int,
                 size: int) -> FloatArray:
    hi = np.clip(end + 1, 0, size)
    lo = np.clip(hi - width, 0, size)
    cnt = ccount[hi] - ccount[lo]
    tot = csum[hi] - csum[lo]
    return np.where(cnt > 0, tot / np.maximum(cnt, 1.0), np.nan)


def _nanmean_or_zero(stack: FloatArray) -> FloatArray:
    """Row means of the finite entries (0 for a row without any)."""
    cnt = np.sum(np.isfinite(stack), axis=1)
    tot = np.nansum(stack, axis=1)
    return np.where(cnt > 0, tot / np.maximum(cnt, 1), 0.0)


def _or(primary: FloatArray, fallback: FloatArray) -> FloatArray:
    return np.where(np.isfinite(primary), primary, fallback)


def log_seen(h: History, idx: IntArray, origins: IntArray) -> FloatArray:
    """log1p of the value at ``idx`` where it precedes the origin (NaN otherwise)."""
    v = np.where(idx < origins, h.at(idx), np.nan)
    return np.asarray(np.log1p(np.maximum(v, 0.0)))


def row_mean(d: FloatArray) -> FloatArray:
    """Mean of each row's finite entries (NaN for rows with none)."""
    ok = np.isfinite(d)
    n = ok.sum(axis=1)
    return np.asarray(np.where(n > 0, np.where(ok, d, 0.0).sum(axis=1) / np.maximum(n, 1),
                               np.nan))
