"""The live loop's record of the forecasts it acted on, and the calibration rebuilt from it (pure).

``headroom simulate`` keeps its forecast errors in memory (``simulation.engine``); the reconcile
loop keeps them in the store, so a restarted process rebuilds the same calibration. It records
what the simulator scores: the first step of every forecast (p50 and p90 at the forecast's origin,
and the series' volatility then) and, once that step has passed, the mean rate observed over it.
``errors_from`` turns the scored records, oldest first, into ``ForecastErrors`` and
``calibrated_forecasts`` attaches the upper tail with ``calibration.calibrated``: the functions
the simulator uses. A record is keyed by (model, target_at) and is scored once, so a tick that
runs twice records each forecast and each error once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from controlplane.autoscaling.calibration import ForecastErrors, calibrated
from controlplane.domain.demand import one_request_rps
from controlplane.domain.forecast_accuracy import ForecastAccuracy
from forecaster.types import Forecast


@dataclass(frozen=True, slots=True)
class IssuedForecast:
    """The first step of one forecast of one model and, once scored, what was observed."""

    model: str
    target_at: datetime  # the forecast's origin: start of its first step
    step_s: int
    p50_rps: float
    p90_rps: float
    sigma: float  # the series' recent volatility at the origin (``recent_volatility``)
    observed_rps: float | None = None  # mean observed rate over the step; None: no data
    scored_at: datetime | None = None

    @property
    def key(self) -> tuple[str, datetime]:
        return self.model, self.target_at

    @property
    def end_at(self) -> datetime:
        return self.target_at + timedelta(seconds=self.step_s)

    def is_due(self, now: datetime) -> bool:
        """Not scored yet and its step has passed."""
        return self.scored_at is None and self.end_at <= now

    def scored(self, observed_rps: float | None, now: datetime) -> IssuedForecast:
        return replace(self, observed_rps=observed_rps, scored_at=now)


def issued(forecast: Forecast, sigma: float) -> IssuedForecast | None:
    """The record of ``forecast``'s first step; None for a forecast without steps."""
    if not forecast.p50:
        return None
    return IssuedForecast(forecast.series_id, forecast.origin_at, forecast.step_s,
                          forecast.p50[0], forecast.p90[0], sigma)


def unrecorded(forecasts: Mapping[str, Forecast], records: Iterable[IssuedForecast],
               since_at: datetime) -> tuple[Forecast, ...]:
    """Forecasts with steps, from ``since_at`` on, whose first step is not recorded yet."""
    known = {r.key for r in records}
    return tuple(f for f in forecasts.values()
                 if f.p50 and f.origin_at >= since_at and (f.series_id, f.origin_at) not in known)


def errors_from(records: Iterable[IssuedForecast], max_errors: int) -> ForecastErrors:
    """The volatility-scaled errors of the scored records, oldest target first (the newest
    ``max_errors`` kept); records without an observed rate carry no error."""
    scored = sorted((r for r in records if r.observed_rps is not None), key=lambda r: r.target_at)
    step_s = max((r.step_s for r in scored), default=0)
    floor_rps = one_request_rps(step_s) if step_s > 0 else 0.0
    return ForecastErrors(max_size=max_errors, min_p50_rps=floor_rps).observe_all(
        (r.p50_rps, r.observed_rps, r.sigma) for r in scored if r.observed_rps is not None)


def calibrated_forecasts(forecasts: Mapping[str, Forecast], records: Iterable[IssuedForecast],
                         max_errors: int) -> dict[str, Forecast]:
    """Each forecast with its upper tail calibrated from its model's scored records, at the
    volatility recorded for its own origin; a forecast without a record is returned as it is."""
    by_model: dict[str, list[IssuedForecast]] = {}
    for record in records:
        by_model.setdefault(record.model, []).append(record)
    out = {}
    for name, forecast in forecasts.items():
        own = by_model.get(name, [])
        current = next((r for r in own if r.target_at == forecast.origin_at), None)
        out[name] = forecast if current is None else calibrated(
            forecast, errors_from(own, max_errors), current.sigma)
    return out


def accuracy(records: Iterable[IssuedForecast], since_at: datetime) -> tuple[ForecastAccuracy, ...]:
    """Per model, over the records scored with an observation whose step starts at or after
    ``since_at``: WAPE of p50 and p90 coverage (by model name)."""
    by_model: dict[str, list[tuple[float, float, float]]] = {}  # (observed, p50, p90)
    for r in records:
        if r.observed_rps is not None and r.target_at >= since_at:
            by_model.setdefault(r.model, []).append((r.observed_rps, r.p50_rps, r.p90_rps))
    out = []
    for model, scored in sorted(by_model.items()):
        observed = sum(y for y, _, _ in scored)
        missed = sum(abs(y - p50) for y, p50, _ in scored)
        covered = sum(1 for y, _, p90 in scored if y <= p90)
        out.append(ForecastAccuracy(model, len(scored), missed / observed if observed > 0 else None,
                                    covered / len(scored)))
    return tuple(out)
