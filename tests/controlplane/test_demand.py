"""Demand: forecast p90 over the lookahead, never below the observed load; stale ones fall back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.domain.demand import (
    FORECAST_P90,
    NO_FORECAST,
    OBSERVED_ABOVE_FORECAST,
    STALE_FORECAST,
    DemandPolicy,
    demand_for,
)
from controlplane.sim.catalog import DEMO_MODELS
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
POLICY = DemandPolicy(target_utilization=0.5, lookahead_s=180, max_forecast_age_s=600,
                      stale_headroom=1.5)
SPEC = DEMO_MODELS[0]


def _forecast(origin_at: datetime, p90: tuple[float, ...]) -> Forecast:
    return Forecast(SPEC.name, origin_at, 60, p90, p90, "test")


def test_demand_covers_the_highest_p90_inside_the_lookahead_only() -> None:
    forecast = _forecast(T0, (10.0, 30.0, 20.0, 15.0, 500.0))
    demand = demand_for(SPEC, forecast, 5.0, POLICY, T0)
    assert demand.reason == FORECAST_P90
    assert demand.forecast_p90_rps == 30.0  # the 500 at +4 min lies beyond the 3-min lookahead
    assert demand.rate_rps == 60.0


def test_observed_load_above_the_forecast_wins() -> None:
    demand = demand_for(SPEC, _forecast(T0, (10.0,) * 5), 40.0, POLICY, T0)
    assert demand.reason == OBSERVED_ABOVE_FORECAST and demand.rate_rps == 40.0 * 1.5 / 0.5


def test_stale_or_missing_forecasts_fall_back_to_observed_load_with_a_reason() -> None:
    stale = demand_for(SPEC, _forecast(T0 - timedelta(hours=1), (99.0,)), 10.0, POLICY, T0)
    missing = demand_for(SPEC, None, 10.0, POLICY, T0)
    assert (stale.reason, missing.reason) == (STALE_FORECAST, NO_FORECAST)
    assert stale.rate_rps == missing.rate_rps == 10.0 * 1.5 / 0.5
