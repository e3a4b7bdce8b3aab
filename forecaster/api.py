"""The forecaster's entry point for the control plane: one call, one ``Forecast``.

``forecast(series, horizon_s, method="auto")`` returns p50/p90 for the steps
``series.end_at, end_at + step, ..., end_at + horizon - step`` (``ceil(horizon / step)`` values),
the method actually used, why it fell back (``fallback_reason``, empty when it did not) and the
method's recent held-out WAPE in percent (``backtest_wape``). It never returns a silent zero: a
series without observations gets zeros *with* ``fallback_reason="no_observations"``.

Values reach the methods as ``forecaster.prepare`` cleans a source's samples (``History.of``):
``inf`` is missing like NaN, a negative value is 0, and the forecast's ``notes`` say how many were
clipped and whether the last observation, the one it starts from, was one of them (the numbers are
those of the clipped series). A series with numbers but none usable
(``unusable_problem``: none positive but some negative) raises ``SeriesError`` naming it, as the
sources do: bad data, not zero traffic. A ``horizon_s`` of 0 s or less raises ``ValueError``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from datetime import timedelta

import numpy as np

from forecaster.errors import SeriesError, UnknownMethodError
from forecaster.features import History
from forecaster.models import Predictions
from forecaster.prepare import (
    NO_NUMBERS,
    last_observation_clipped,
    unusable_problem,
    values_array,
)
from forecaster.registry import get_forecaster
from forecaster.settings import DEFAULT_SETTINGS, ForecasterSettings
from forecaster.types import Forecast, TrafficSeries

log = logging.getLogger("headroom.forecaster")


def n_targets(horizon_s: int, step_s: int) -> int:
    """Steps per forecast: enough to reach ``horizon_s`` (> 0) after the last observation."""
    if not horizon_s > 0:
        raise ValueError(f"forecast horizon must be > 0 s, got {horizon_s}")
    return max(1, math.ceil(horizon_s / step_s))


def forecast(series: TrafficSeries, horizon_s: int, method: str = "auto",
             settings: ForecasterSettings = DEFAULT_SETTINGS,
             history: History | None = None) -> Forecast:
    """Forecast ``series`` from its end for ``horizon_s`` (see the module docstring).
    ``history`` is ``History.of(series)`` when the caller already built it."""
    try:
        steps = n_targets(horizon_s, series.step_s)
    except ValueError as error:  # a horizon of 0 s or less
        raise ValueError(f"series {series.series_id!r}: {error}") from None
    problem = unusable_problem(values_array(series))
    if problem is not None and problem != NO_NUMBERS:  # no numbers: the no_observations zeros
        raise SeriesError(series.series_id, problem)
    h = history if history is not None else History.of(series)
    origin = np.array([h.size], dtype=np.int64)
    last = float(h.last_before(origin)[0]) if h.size else math.nan
    if not math.isfinite(last):
        return _constant(series, steps, 0.0, "no_observations")
    notes = clipped_notes(series)
    forecaster = get_forecaster(method, settings)  # unknown names raise UnknownMethodError
    try:
        pred = forecaster.predict(h, origin, steps)
        _check_finite(pred)
    except UnknownMethodError:
        raise
    except Exception as exc:  # a fit failure falls back per model, with the reason recorded
        log.warning("series %r: %s failed (%s: %s); using persistence", series.series_id,
                    method, type(exc).__name__, exc)
        return replace(_constant(series, steps, last, _staleness(h, series.step_s)
                                 or f"fit_failed:{type(exc).__name__}"), notes=notes)
    # stale data outranks the method's own fallback: consumers (KEDA) refuse only a stale one
    reason = _staleness(h, series.step_s) or pred.reason[0]
    wape = float(pred.backtest_wape[0])
    return Forecast(series_id=series.series_id, origin_at=series.end_at, step_s=series.step_s,
                    p50=tuple(float(x) for x in pred.p50[0]),
                    p90=tuple(float(x) for x in pred.p90[0]),
                    method=pred.method[0], fallback_reason=reason,
                    backtest_wape=wape if math.isfinite(wape) else None,
                    diagnostics={"observed_points": float(h.ccount[-1]),
                                 "last_observed_age_s": _age_s(h, series.step_s)},
                    notes=notes)


def clipped_notes(series: TrafficSeries) -> tuple[str, ...]:
    """The note on the negative values ``History.of`` clipped to 0, naming the last observation
    when it was one of them (every method anchors on it, as 0), or () when there were none."""
    values = values_array(series)
    finite = np.flatnonzero(np.isfinite(values))
    negatives = int(np.sum(values[finite] < 0))
    if not negatives:
        return ()
    last = int(finite[-1])
    if values[last] >= 0:
        return (f"{negatives} negative value(s) clipped to 0",)
    at = series.start_at + timedelta(seconds=series.step_s * last)
    return (f"{negatives} negative value(s) clipped to 0, "
            f"{last_observation_clipped(float(values[last]), at)}",)


def _constant(series: TrafficSeries, steps: int, level: float, reason: str) -> Forecast:
    return Forecast(series_id=series.series_id, origin_at=series.end_at, step_s=series.step_s,
                    p50=(level,) * steps, p90=(level,) * steps, method="persistence",
                    fallback_reason=reason)


def _check_finite(pred: Predictions) -> None:
    if not (np.all(np.isfinite(pred.p50)) and np.all(np.isfinite(pred.p90))):
        raise FloatingPointError("non-finite forecast")


def _age_s(h: History, step_s: int) -> float:
    valid = np.flatnonzero(np.isfinite(h.values))
    return float((h.size - 1 - valid[-1]) * step_s) if valid.size else math.inf


def stale_after_s(step_s: int) -> int:
    """Age of the newest observation beyond which a series is stale: max(1 h, 3 steps)."""
    return max(3600, 3 * step_s)


def _staleness(h: History, step_s: int) -> str:
    return "stale_observations" if _age_s(h, step_s) > stale_after_s(step_s) else ""
