"""Calibrating the forecast's upper tail from its own recent errors (pure).

A forecaster's p90 says little about its 99th percentile: traffic jumps have heavier tails than a
lognormal through p50 and p90, and they cluster (a volatile hour is followed by a volatile hour).
The warm-pool ladder needs those high quantiles, so it learns them the conformal way, scaled by
volatility: it keeps the recent errors ``log(actual / p50) / sigma`` of forecasts whose target has
since been observed, ``sigma`` being the series' recent volatility when the forecast was made
(mean absolute log change over the last steps), and reads the quantile ``q`` of a new forecast as
``p50 x exp(z_q x sigma_now)``. ``calibrated`` attaches these ratios to a forecast
(``Forecast.diagnostics["upper_ratio_q<q>"]``); ``controlplane.domain.demand.step_quantile`` uses
them when present. Only targets already observed enter, so nothing looks ahead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from controlplane.domain.demand import CALIBRATION_GRID, ratio_key
from forecaster.types import Forecast, TrafficSeries

#: Volatility never counts as less than this (a flat series would otherwise divide by ~0).
MIN_SIGMA = 0.01
#: Steps of history the volatility of a forecast's origin is measured over.
VOLATILITY_STEPS = 12
#: Errors seen before the tail is calibrated (fewer: the forecast's own p90 shape is used).
MIN_ERRORS = 48
#: Changes between non-zero values needed to measure the volatility. A sparse series (a few
#: requests now and then) has fewer: its volatility is ``UNMEASURED``, its errors are not scaled
#: by a made-up one, and its forecasts keep their own p90 shape (with ``ForecastErrors``'
#: ``min_p50_rps``: a forecast of less than one request per step is never scored as a ratio).
#: Before both, scaled errors of ~50 read calibrated medians 1,000x the forecast's: hundreds of
#: replicas for a model that served 0.07 requests/s at its peak.
MIN_CHANGES = VOLATILITY_STEPS // 2
UNMEASURED = 0.0
#: The tail is never read as more than this many times the forecast's median: past it the errors
#: say nothing a fleet should be sized from, and the fast path serves what comes.
MAX_RATIO = 1000.0


def recent_volatility(series: TrafficSeries, steps: int = VOLATILITY_STEPS) -> float:
    """Mean absolute log change over the last ``steps`` steps (zeros and gaps skipped), at
    least ``MIN_SIGMA``; ``UNMEASURED`` when fewer than ``MIN_CHANGES`` changes are left."""
    values = [v for v in series.values[-(steps + 1):] if v > 0 and math.isfinite(v)]
    changes = [abs(math.log(b / a)) for a, b in pairwise(values)]
    if len(changes) < MIN_CHANGES:
        return UNMEASURED
    return max(MIN_SIGMA, sum(changes) / len(changes))


def scaled_error(predicted_p50: float, actual: float, sigma: float = 1.0) -> float | None:
    """log(actual / p50) / sigma; None for zero or missing values (collection gaps) and for an
    unmeasured volatility."""
    if not (predicted_p50 > 0 and actual > 0) or not math.isfinite(actual / predicted_p50):
        return None
    if not sigma > UNMEASURED:
        return None
    return math.log(actual / predicted_p50) / max(MIN_SIGMA, sigma)


@dataclass(frozen=True, slots=True)
class ForecastErrors:
    """Recent volatility-scaled errors log(actual / p50) / sigma of one model, oldest first."""

    scaled_errors: tuple[float, ...] = ()
    max_size: int = 4032
    min_count: int = MIN_ERRORS
    #: a forecast whose median is below this carries no error: under one request per step
    #: (``one_request_rps``) its misses are whole requests, not ratios to a median near zero
    min_p50_rps: float = 0.0

    def observe(self, predicted_p50: float, actual: float, sigma: float = 1.0) -> ForecastErrors:
        """Add one error; zero or missing values (collection gaps) and a median under
        ``min_p50_rps`` carry no ratio: skipped."""
        return self.observe_all([(predicted_p50, actual, sigma)])

    def observe_all(self, observed: Iterable[tuple[float, float, float]]) -> ForecastErrors:
        """``observe`` each (predicted_p50, actual, sigma) in order, in one step."""
        errors = [e for e in (scaled_error(*o) for o in observed if o[0] >= self.min_p50_rps)
                  if e is not None]
        return replace(self, scaled_errors=(*self.scaled_errors, *errors)[-self.max_size:])

    def ratios(self, sigma: float = 1.0,
               grid: Sequence[float] = CALIBRATION_GRID) -> dict[float, float] | None:
        """Quantiles of actual / p50 on ``grid`` at volatility ``sigma``; None until
        ``min_count`` errors were seen, and at an unmeasured volatility."""
        if len(self.scaled_errors) < self.min_count or not sigma > UNMEASURED:
            return None
        ordered = sorted(self.scaled_errors)
        out = {}
        for q in grid:
            pos = q * (len(ordered) - 1)
            low = math.floor(pos)
            high = min(low + 1, len(ordered) - 1)
            z = ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
            out[q] = math.exp(min(z * max(MIN_SIGMA, sigma), math.log(MAX_RATIO)))
        return out


def calibrated(forecast: Forecast, errors: ForecastErrors, sigma: float = 1.0) -> Forecast:
    """``forecast`` with its upper-tail ratios at volatility ``sigma`` attached, or unchanged
    while errors are few."""
    ratios = errors.ratios(sigma)
    if ratios is None:
        return forecast
    extra = {ratio_key(q): r for q, r in ratios.items()}
    return replace(forecast, diagnostics={**forecast.diagnostics, **extra})
