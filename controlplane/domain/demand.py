"""Demand: how much capacity each model needs over the next cold-start window (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedState
from forecaster.types import Forecast

STALE_FORECAST = "stale_forecast"
NO_FORECAST = "no_forecast"
FORECAST_P90 = "forecast_p90"
OBSERVED_ABOVE_FORECAST = "observed_above_forecast"


@dataclass(frozen=True, slots=True)
class DemandPolicy:
    target_utilization: float  # provision capacity = need / target_utilization
    lookahead_s: float  # window of the forecast to cover (provisioning + cold start)
    max_forecast_age_s: float
    stale_headroom: float  # multiplier on observed load when there is no usable forecast


@dataclass(frozen=True, slots=True)
class Demand:
    model: str
    rate_rps: float  # capacity to provision
    observed_rps: float
    forecast_p90_rps: float
    reason: str


def _window_p90(forecast: Forecast, now: datetime, lookahead_s: float) -> float:
    """Highest p90 among forecast steps from now to now + lookahead (the origin may be in the past)."""
    values: list[float] = []
    for i, p90 in enumerate(forecast.p90):
        at = forecast.origin_at + timedelta(seconds=i * forecast.step_s)
        if at + timedelta(seconds=forecast.step_s) <= now:
            continue
        if at > now + timedelta(seconds=lookahead_s):
            break
        values.append(p90)
    return max(values, default=forecast.p90[-1] if forecast.p90 else 0.0)


def demand_for(
    spec: ModelSpec,
    forecast: Forecast | None,
    observed_rps: float,
    policy: DemandPolicy,
    now: datetime,
) -> Demand:
    """Capacity a model needs: forecast p90 over the lookahead, never below what it sees now."""
    if forecast is None:
        need, p90, reason = observed_rps * policy.stale_headroom, 0.0, NO_FORECAST
    elif (now - forecast.origin_at).total_seconds() > policy.max_forecast_age_s:
        need, p90, reason = observed_rps * policy.stale_headroom, 0.0, STALE_FORECAST
    else:
        p90 = _window_p90(forecast, now, policy.lookahead_s)
        need, reason = (p90, FORECAST_P90) if p90 >= observed_rps else (
            observed_rps * policy.stale_headroom, OBSERVED_ABOVE_FORECAST)
    return Demand(
        model=spec.name,
        rate_rps=need / policy.target_utilization,
        observed_rps=observed_rps,
        forecast_p90_rps=p90,
        reason=reason,
    )


def demand_from(
    specs: Sequence[ModelSpec],
    forecasts: Mapping[str, Forecast],
    observed: ObservedState,
    policy: DemandPolicy,
    now: datetime,
) -> tuple[Demand, ...]:
    out = []
    for spec in specs:
        seen = observed.model(spec.name)
        out.append(demand_for(spec, forecasts.get(spec.name), seen.demand_rps if seen else 0.0,
                              policy, now))
    return tuple(out)
