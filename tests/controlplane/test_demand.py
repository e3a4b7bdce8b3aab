"""Demand: forecast p90 over the lookahead, never below the observed load; stale ones fall back."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from controlplane.domain.demand import (
    DEMAND_UNMEASURED,
    FORECAST_P90,
    FUTURE_FORECAST,
    MAX_CLOCK_SKEW_S,
    NO_FORECAST,
    OBSERVED_ABOVE_FORECAST,
    OBSERVED_LOAD,
    REACTIVE,
    STALE_FORECAST,
    DemandPolicy,
    demand_for,
    demand_from,
)
from controlplane.domain.observed import ObservedModel, ObservedState
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


def test_a_forecast_from_beyond_the_clock_skew_tolerance_in_the_future_falls_back_with_a_reason(
        ) -> None:
    ahead = _forecast(T0 + timedelta(hours=1), (99.0,) * 90)
    demand = demand_for(SPEC, ahead, 10.0, POLICY, T0)
    assert demand.reason == FUTURE_FORECAST and not demand.is_fresh
    assert demand.rate_rps == 10.0 * 1.5 / 0.5


def test_a_forecast_from_within_a_step_and_the_clock_skew_tolerance_in_the_future_is_used(
        ) -> None:
    skewed = _forecast(T0 + timedelta(seconds=60 + MAX_CLOCK_SKEW_S), (30.0,) * 5)
    demand = demand_for(SPEC, skewed, 5.0, POLICY, T0)
    assert (demand.reason, demand.forecast_p90_rps) == (FORECAST_P90, 30.0)


def test_an_unmeasured_load_with_a_forecast_from_the_future_holds_the_ready_capacity() -> None:
    ahead = _forecast(T0 + timedelta(hours=1), (99.0,) * 90)
    demands = demand_from((SPEC,), {SPEC.name: ahead}, _unmeasured(80.0), POLICY, T0)
    assert (demands[0].reason, demands[0].rate_rps) == (DEMAND_UNMEASURED, 80.0)


def _unmeasured(capacity_rps: float) -> ObservedState:
    model = ObservedModel(SPEC.name, 2, 0, 2, 0.0, capacity_rps, demand_measured=False)
    return ObservedState(T0, (), (), (model,))


def test_an_unmeasured_load_is_sized_from_a_fresh_forecast_without_the_fast_path() -> None:
    forecast = _forecast(T0, (10.0, 30.0, 20.0))
    (demand,) = demand_from([SPEC], {SPEC.name: forecast}, _unmeasured(80.0), POLICY, T0)
    assert (demand.reason, demand.rate_rps, demand.observed_rps) == (FORECAST_P90, 60.0, 0.0)
    assert demand.is_fresh


def test_an_unmeasured_load_without_a_usable_forecast_holds_the_ready_capacity_as_stale() -> None:
    stale = _forecast(T0 - timedelta(hours=1), (99.0,))
    for forecasts in ({}, {SPEC.name: stale}):
        (demand,) = demand_from([SPEC], forecasts, _unmeasured(80.0), POLICY, T0)
        assert (demand.reason, demand.rate_rps) == (DEMAND_UNMEASURED, 80.0)
        assert not demand.is_fresh  # the planner scales nothing down on it


def test_an_unmeasured_load_under_the_reactive_policy_holds_instead_of_scaling_to_zero() -> None:
    reactive = replace(POLICY, mode=REACTIVE)
    (demand,) = demand_from([SPEC], {}, _unmeasured(80.0), reactive, T0)
    assert (demand.reason, demand.rate_rps) == (DEMAND_UNMEASURED, 80.0)
    measured_zero = ObservedState(T0, (), (), (ObservedModel(SPEC.name, 2, 0, 2, 0.0, 80.0),))
    (zero,) = demand_from([SPEC], {}, measured_zero, reactive, T0)
    assert (zero.reason, zero.rate_rps) == (OBSERVED_LOAD, 0.0)  # what a stored 0 would do


def _saturated(queued: float | None, growth_rps: float | None = None) -> ObservedState:
    """Two replicas completing 20 rps, all they can, with ``queued`` requests waiting, the
    queue growing by ``growth_rps``."""
    return ObservedState(T0, (), (), (ObservedModel(SPEC.name, 2, 0, 2, 20.0, 20.0,
                                                    queued_requests=queued,
                                                    queue_growth_rps=growth_rps),))


def test_a_queue_counts_as_its_growth_plus_its_backlog_served_within_the_drain_time() -> None:
    queueing = replace(POLICY, queue_drain_s=300.0)
    forecast = {SPEC.name: _forecast(T0, (20.0,) * 5)}
    # completions alone match the forecast: it covers them, and nothing more is asked for
    (plain,) = demand_from([SPEC], forecast, _saturated(None), queueing, T0)
    assert (plain.reason, plain.observed_rps) == (FORECAST_P90, 20.0)
    # arrivals outrun completions by 5 rps, and 1,500 waiting are served within 300 s: 5 more
    (queued,) = demand_from([SPEC], forecast, _saturated(1500.0, 5.0), queueing, T0)
    assert (queued.reason, queued.observed_rps) == (OBSERVED_ABOVE_FORECAST, 30.0)
    assert queued.rate_rps == 30.0 * 1.5 / 0.5
    (reactive,) = demand_from([SPEC], {}, _saturated(1500.0, 5.0),
                              replace(queueing, mode=REACTIVE), T0)
    assert (reactive.reason, reactive.rate_rps) == (OBSERVED_LOAD, 30.0 / 0.5)
    # a queue that drains (its growth read as 0) still counts its backlog, not less
    (draining,) = demand_from([SPEC], {}, _saturated(1500.0, 0.0),
                              replace(queueing, mode=REACTIVE), T0)
    assert draining.observed_rps == 25.0


def test_a_queue_drain_time_of_zero_leaves_the_queue_uncounted() -> None:
    (demand,) = demand_from([SPEC], {}, _saturated(600.0, 5.0), replace(POLICY, mode=REACTIVE),
                            T0)
    assert demand.observed_rps == 20.0


def _kv_bound(replicas: int, usage: float | None, queued: float | None = None) -> ObservedState:
    """``replicas`` of 10 rps each serving 8 rps in all, their KV cache ``usage`` full (long
    requests fill it before the request rate nears the profile's)."""
    return ObservedState(T0, (), (), (ObservedModel(SPEC.name, replicas, 0, replicas, 8.0,
                                                    10.0 * replicas, kv_cache_usage=usage,
                                                    queued_requests=queued),))


def test_a_full_kv_cache_sizes_the_replicas_to_the_target_usage_as_hpa_would() -> None:
    reactive = replace(POLICY, mode=REACTIVE, kv_cache_target=0.6)
    (full,) = demand_from([SPEC], {}, _kv_bound(2, 0.9), reactive, T0)
    # 2 replicas at 90 % want 2 x 0.9 / 0.6 = 3: the load 3 replicas serve at utilization 0.5
    assert (full.reason, full.observed_rps) == (OBSERVED_LOAD, 15.0)
    assert full.rate_rps == 30.0  # 3 replicas of 10 rps
    # the same requests spread over 4 replicas hold half as much of each: the same load, so
    # adding replicas does not make the sizing swing back
    (spread,) = demand_from([SPEC], {}, _kv_bound(4, 0.45), reactive, T0)
    assert spread.observed_rps == 15.0
    # a KV cache with room leaves the request rate in charge; an unread one is not a 0
    (roomy,) = demand_from([SPEC], {}, _kv_bound(2, 0.3), reactive, T0)
    (unread,) = demand_from([SPEC], {}, _kv_bound(2, None), reactive, T0)
    assert roomy.observed_rps == unread.observed_rps == 8.0
    # the predictive fast path reads it too, above a forecast of the request rate; a full KV
    # cache is no burst, so it sizes to the target without the fast path's x 1.5 (which, as
    # the forecast never sees it, would stay on and hold the usage at 0.6 / 1.5)
    forecast = {SPEC.name: _forecast(T0, (8.0,) * 5)}
    predictive = replace(POLICY, kv_cache_target=0.6)
    (fast,) = demand_from([SPEC], forecast, _kv_bound(2, 0.9), predictive, T0)
    assert (fast.reason, fast.observed_rps) == (OBSERVED_ABOVE_FORECAST, 15.0)
    assert fast.rate_rps == 30.0
    (blind,) = demand_from([SPEC], {}, _kv_bound(2, 0.9), predictive, T0)
    assert (blind.reason, blind.rate_rps) == (NO_FORECAST, 30.0)  # not 8 x 1.5 / 0.5 = 24
    # a forecast above it covers it, as it covers the request rate
    (covered,) = demand_from([SPEC], {SPEC.name: _forecast(T0, (20.0,) * 5)},
                             _kv_bound(2, 0.9), predictive, T0)
    assert (covered.reason, covered.rate_rps) == (FORECAST_P90, 40.0)


def test_the_kv_cache_and_the_queue_each_ask_and_the_larger_load_counts() -> None:
    both = replace(POLICY, mode=REACTIVE, kv_cache_target=0.6, queue_drain_s=300.0)
    (kv_larger,) = demand_from([SPEC], {}, _kv_bound(2, 0.9, queued=600.0), both, T0)
    assert kv_larger.observed_rps == 15.0  # not 8 + 600 / 300 = 10
    (queue_larger,) = demand_from([SPEC], {}, _kv_bound(2, 0.9, queued=3000.0), both, T0)
    assert queue_larger.observed_rps == 18.0  # 8 + 3,000 / 300
    (off,) = demand_from([SPEC], {}, _kv_bound(2, 0.9), replace(POLICY, mode=REACTIVE), T0)
    assert off.observed_rps == 8.0  # a target of 0 does not count the KV cache


def test_a_kv_cache_target_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="kv_cache_target must be in"):
        replace(POLICY, kv_cache_target=1.5)
