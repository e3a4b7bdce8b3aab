"""Pure data preparation: irregular samples -> a regular ``TrafficSeries``.

Rules (documented fallbacks, never silent zeros):

* the step is the timestamps' spacing in whole seconds, scrape jitter allowed (within
  ``GRID_TOLERANCE``: rows 59.7 s, 60.3 s, 59 s or 61 s apart are a 60-s step), unless given;
  the grid starts at the first timestamp and each sample counts at its nearest grid time;
* timestamps out of order are sorted (reported as ``unsorted``); exact duplicates are an error
  naming the series and the timestamp (as ``headroom simulate`` refuses a second row of a model
  at one time): two rows at one instant are a repeated export or two series under one name,
  whose rates should be summed, and averaging them would halve the sum without a word;
* several samples in one step are averaged (counted as ``merged``, ``step_means``); a step with
  no sample is a gap (NaN), never zero;
* non-finite values become gaps, as do values above ``MAX_VALUE`` (a source turns them into
  infinite ones); negative rates are clipped to zero (counted; a source that knows the
  forecast starts from a clipped step says so: ``last_clipped``);
* a series with no positive value but a negative one is unusable (``unusable_problem``): bad
  data, not zero traffic, so no source or command turns it into a zero forecast.

Clipping is point-wise on purpose: anything computed over the whole series (a global outlier
threshold, say) would let later data change earlier forecasts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from forecaster.errors import InputError, SeriesError
from forecaster.types import TrafficSeries

NS_PER_S = 1_000_000_000
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
#: the longest horizon, step or history: a year (a longer one overflows dates or memory)
MAX_DURATION_S = 366 * 86400
#: larger values are missing data, not forecast: no request rate or count comes near it, and
#: the forecaster's sums and quantiles of values near the float maximum overflow to inf/NaN
MAX_VALUE = 1e15
#: ``unusable_problem`` of values without a finite one
NO_NUMBERS = "no numeric values"
#: of a step: how far off its grid a row may be and still count as on it (scrape jitter); the
#: same rule for ``headroom simulate``'s traces and the forecaster's CSV rows
GRID_TOLERANCE = 0.05
#: of a step: how far the rows' typical (median) spacing may be from whole seconds. Jitter
#: around a whole-second schedule leaves the median near it; rows regularly 30.5 s apart would
#: drift off any whole-second grid, a row more every 60, so they are refused
STEP_DRIFT = 0.01


@dataclass(frozen=True, slots=True)
class CleaningReport:
    """What preparation changed in one series (shown to the user as warnings)."""

    series_id: str
    samples: int
    unsorted: bool
    nonfinite: int
    negatives_clipped: int
    merged: int  # samples averaged into a step that already had one
    gaps: int  # steps with no sample
    infinite: int = 0  # of ``nonfinite``: infinite or above MAX_VALUE (the rest NaN or text)
    #: the last observation's clipped text when clipping changed it (``last_clipped``), or ''
    last_clipped: str = ""

    def warnings(self) -> list[str]:
        out = []
        if self.unsorted:
            out.append("timestamps were out of order (sorted)")
        if self.nonfinite - self.infinite:
            out.append(f"{self.nonfinite - self.infinite} non-numeric/NaN value(s) treated as "
                       "missing")
        if self.infinite:
            out.append(f"{self.infinite} infinite value(s) or above {MAX_VALUE:g} treated as "
                       "missing")
        if self.negatives_clipped:
            out.append(f"{self.negatives_clipped} negative value(s) clipped to 0"
                       + (f", {self.last_clipped}" if self.last_clipped else ""))
        if self.merged:
            out.append(f"{self.merged} sample(s) averaged into an occupied step")
        if self.gaps:
            out.append(f"{self.gaps} step(s) without a sample: missing data, not zeros (no "
                       "forecast is scored where the actual is missing)")
        return out


@dataclass(frozen=True, slots=True)
class Prepared:
    series: TrafficSeries
    report: CleaningReport


def unusable_problem(values: FloatArray) -> str | None:
    """Why a series' values leave nothing to forecast, or None when they can be forecast.

    No finite value: ``no numeric values``. No positive value but a negative one (every value
    negative, or negatives among zeros): bad data (a wrong metric, sign or counter), not a model
    without traffic; clipping negatives to 0, right for a glitch among real rates, would make it
    a confident zero forecast. Zeros alone are zero traffic, and usable. Backtest, the CSV and
    Prometheus sources of the forecast job all name an unusable series with this text.
    """
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return NO_NUMBERS
    negatives = int(np.sum(finite < 0))
    if negatives == 0 or bool(np.any(finite > 0)):
        return None
    zeros = finite.size - negatives
    found = (f"all {negatives} numeric value(s) are negative" if zeros == 0
             else f"no positive value ({negatives} negative, {zeros} zero)")
    return f"{found}: bad data (a wrong metric or sign?), not zero traffic; nothing to forecast"


def parse_duration_s(text: str, what: str = "duration") -> int:
    """'20m', '1200s', '1h', '7d', '90' (seconds) -> whole seconds (> 0, at most 366 days)."""
    match = _DURATION.match(text or "")
    if not match:
        raise InputError(f"{what} {text!r}: give a number with a unit, e.g. 20m, 1200s, 1h, 7d")
    seconds = float(match.group(1)) * _UNIT_S[(match.group(2) or "s").lower()]
    if not seconds <= MAX_DURATION_S:  # also an infinite one (a number of 400 digits)
        raise InputError(f"{what} {text!r}: at most 366 days (366d)")
    if seconds < 1 or seconds != int(seconds):
        raise InputError(f"{what} {text!r} must be a whole number of seconds >= 1")
    return int(seconds)


def infer_step_s(series_id: str, times_ns: IntArray) -> int:
    """The step of the timestamps in whole seconds: the spacing with the most spacings within
    ``GRID_TOLERANCE`` of it (ties: the most common exactly, then the smaller), taken as the
    median of those spacings rounded to whole seconds when it is within ``STEP_DRIFT`` of
    them. Rows 60 s apart but for scrape jitter (59.7 s, 60.3 s; or 59 s and 61 s) are a 60-s
    step; regular rows (one spacing, and gaps that are multiples of it) give that spacing."""
    diffs = np.diff(np.unique(times_ns))
    if diffs.size == 0:
        raise SeriesError(series_id, "fewer than two distinct timestamps; cannot infer its step")
    vals, counts = np.unique(diffs, return_counts=True)
    below = np.concatenate([[0], np.cumsum(counts)])
    lo = np.searchsorted(vals, vals * (1 - GRID_TOLERANCE), side="left")
    hi = np.searchsorted(vals, vals * (1 + GRID_TOLERANCE), side="right")
    near_count = below[hi] - below[lo]
    best = int(np.lexsort((vals, -counts, -near_count))[0])
    near = diffs[np.abs(diffs - vals[best]) <= GRID_TOLERANCE * vals[best]]
    typical_ns = float(np.median(near))
    whole_s = round(typical_ns / NS_PER_S)
    if whole_s < 1 or abs(typical_ns - whole_s * NS_PER_S) > STEP_DRIFT * whole_s * NS_PER_S:
        raise SeriesError(series_id, f"sampling step {typical_ns / NS_PER_S:g}s is not a whole "
                                     "number of seconds")
    return int(whole_s)


def grid_index(offsets_ns: IntArray, step_ns: int, tolerance_ns: float) -> IntArray:
    """The step of a grid (``offsets_ns`` from its start) each row counts in: the nearest grid
    time when the row is within ``tolerance_ns`` of it (scrape jitter: 10:00:59.7 is the 10:01
    row), else the step it falls in, [t, t + step). A row is never put in a step that starts
    after it by more than ``tolerance_ns``, nor in one before the step it falls in."""
    nearest = (offsets_ns + step_ns // 2) // step_ns
    on_grid = np.abs(offsets_ns - nearest * step_ns) <= tolerance_ns
    return np.asarray(np.where(on_grid, nearest, offsets_ns // step_ns), dtype=np.int64)


def duplicate_timestamps(series_id: str, sorted_ns: IntArray) -> SeriesError | None:
    """The error naming the first repeated timestamp of sorted times (None when all differ)."""
    dup = np.flatnonzero(np.diff(sorted_ns) == 0)
    if not dup.size:
        return None
    at = datetime.fromtimestamp(int(sorted_ns[dup[0]]) / NS_PER_S, tz=UTC)
    return SeriesError(series_id, f"duplicate timestamp {at.isoformat()} "
                                  f"({dup.size} duplicate(s)): rows of one series at one time "
                                  "cannot be told apart (a repeated export, or two series "
                                  "under one name?); keep one")


def step_means(series_id: str, times_ns: IntArray, values: FloatArray, step_of: IntArray,
               steps: int) -> tuple[FloatArray, CleaningReport]:
    """Rows (in file order; ``step_of[i]`` the step, 0 <= it < ``steps``, row i counts in) ->
    the mean of each step's rows (NaN: none), and what that cleaned: rows out of order,
    non-finite values (missing), negative values (clipped to 0), rows averaged into a step that
    already had one, steps without a row between the first row's and the last's. The backtest
    (``regularize``) and the forecast job's CSV source clean rows with it alike."""
    finite = np.isfinite(values)
    idx = step_of[finite]
    sums = np.bincount(idx, weights=np.maximum(values[finite], 0.0), minlength=steps)
    counts = np.bincount(idx, minlength=steps)
    means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)[:steps]
    occupied = np.bincount(step_of, minlength=steps)[int(step_of.min()):int(step_of.max()) + 1]
    report = CleaningReport(series_id=series_id, samples=int(times_ns.size),
                            unsorted=bool(np.any(np.diff(times_ns) < 0)),
                            nonfinite=int(np.sum(~finite)),
                            infinite=int(np.sum(np.isinf(values))),
                            negatives_clipped=int(np.sum(finite & (values < 0))),
                            merged=int(np.sum(np.maximum(occupied - 1, 0))),
                            gaps=int(np.sum(occupied == 0)))
    return means, report


def last_observation_clipped(value: float, at: datetime, starts_from: float = 0.0) -> str:
    """The words, after a count of negative values clipped to 0, that name the last observation
    when it was one of them: the forecast starts from ``starts_from`` (the clipped step)."""
    return (f"the last observation among them ({value:g} at {at.isoformat()}): the forecast "
            f"starts from a last observation of {starts_from:g}")


def last_clipped(times_ns: IntArray, values: FloatArray, step_of: IntArray,
                 means: FloatArray) -> str:
    """When the last step with a finite value (the one a forecast starts from) had a negative
    row clipped to 0: the text naming it and the value the forecast starts from, else ''."""
    finite = np.isfinite(values)
    if not np.any(finite):
        return ""
    last_step = int(step_of[finite].max())
    in_last = np.flatnonzero(finite & (step_of == last_step))
    negative = in_last[values[in_last] < 0]
    if not negative.size:
        return ""
    row = int(negative[-1])
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(times_ns[row]) // 1000)
    return last_observation_clipped(float(values[row]), at, float(means[last_step]))


def regularize(series_id: str, times_ns: IntArray, values: FloatArray,
               step_s: int | None = None) -> Prepared:
    """Samples (any order) -> a regular series starting at the first timestamp, each sample at
    its nearest step (samples at one step are averaged and counted as ``merged``)."""
    if times_ns.size != values.size:
        raise SeriesError(series_id, "timestamps and values differ in length")
    if times_ns.size == 0:
        raise SeriesError(series_id, "no rows")
    t = np.sort(times_ns)
    duplicate = duplicate_timestamps(series_id, t)
    if duplicate is not None:
        raise duplicate
    step = step_s if step_s is not None else (infer_step_s(series_id, t) if t.size > 1 else 60)
    if step <= 0:
        raise SeriesError(series_id, f"step must be > 0 s, got {step}")
    start_ns = int(t[0])
    step_of = np.rint((times_ns - start_ns) / (step * NS_PER_S)).astype(np.int64)
    means, report = step_means(series_id, times_ns, np.asarray(values, dtype=np.float64),
                               step_of, int(step_of.max()) + 1)
    start_at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=start_ns // 1000)
    series = TrafficSeries(series_id=series_id, step_s=step, start_at=start_at,
                           values=tuple(means.tolist()))
    return Prepared(series=series, report=report)


def values_array(series: TrafficSeries) -> FloatArray:
    """The series' values as a float array (NaN = missing)."""
    return np.asarray(series.values, dtype=np.float64)


def start_epoch_ns(series: TrafficSeries) -> int:
    """Exact Unix time of the first value in ns (datetimes carry microseconds)."""
    delta = series.start_at - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta // timedelta(microseconds=1)) * 1000
