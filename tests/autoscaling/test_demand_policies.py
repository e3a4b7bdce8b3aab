"""Demand under the three policies: forecast upper quantile (predictive), observed load over a
target utilization (reactive), the peak (static); a fast path when load outruns the forecast."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane.autoscaling.calibration import ForecastErrors, calibrated
from controlplane.domain.demand import (
    FORECAST_P90,
    FORECAST_QUANTILE,
    NO_STATIC_PEAK,
    OBSERVED_ABOVE_FORECAST,
    OBSERVED_LOAD,
    STATIC_PEAK,
    DemandPolicy,
    demand_for,
    replicas_for,
    slice_replicas,
    upper_quantile,
    window_quantile,
)
from controlplane.sim.catalog import DEMO_MODELS
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
SPEC = DEMO_MODELS[0]


def _policy(**changes: object) -> DemandPolicy:
    base: dict[str, object] = {"target_utilization": 1.0, "lookahead_s": 120,
                               "max_forecast_age_s": 900, "stale_headroom": 1.5}
    return DemandPolicy(**{**base, **changes})  # type: ignore[arg-type]


def _forecast(p50: tuple[float, ...], p90: tuple[float, ...], origin_at: datetime = T0,
              step_s: int = 60) -> Forecast:
    return Forecast(SPEC.name, origin_at, step_s, p50, p90, "test")


def test_quantile_0_9_is_the_p90_and_higher_quantiles_reach_further() -> None:
    assert upper_quantile(100, 120, 0.9) == 120
    assert 120 < upper_quantile(100, 120, 0.95) < upper_quantile(100, 120, 0.99)
    assert upper_quantile(100, 120, 0.5) == pytest.approx(100)


def test_quantiles_without_spread_or_without_a_median_stay_sensible() -> None:
    assert upper_quantile(100, 100, 0.99) == 100  # no spread: no headroom invented
    assert upper_quantile(0, 10, 0.99) > 10  # linear through 0 and p90


def test_a_median_near_zero_does_not_send_the_tail_orders_of_magnitude_past_p90() -> None:
    # a sparse series (SD LoRA model M0002): p50 ~1e-8 rps, p90 3.6e-3 rps; the lognormal
    # through them put the 99.5th percentile at 320 rps, 6,400 replicas of 0.05 rps
    line = upper_quantile(0, 0.00356, 0.995)
    assert upper_quantile(1e-8, 0.00356, 0.995) == pytest.approx(line)
    assert line < 3 * 0.00356
    # a modest spread keeps its lognormal tail, below that line
    assert upper_quantile(100, 120, 0.995) < upper_quantile(0, 120, 0.995)


@given(p50=st.floats(0.01, 1e4), spread=st.floats(1.0, 3.0), q1=st.floats(0.5, 0.98),
       dq=st.floats(0.001, 0.019))
def test_upper_quantiles_never_decrease_with_the_quantile(p50: float, spread: float, q1: float,
                                                        dq: float) -> None:
    assert upper_quantile(p50, p50 * spread, q1) <= upper_quantile(p50, p50 * spread,
                                                                    q1 + dq) + 1e-9


def test_predictive_demand_covers_the_upper_quantile_inside_the_lookahead() -> None:
    forecast = _forecast((100, 150, 100, 900), (120, 180, 120, 1000))
    demand = demand_for(SPEC, forecast, 90.0, _policy(upper_quantile=0.95), T0)
    assert demand.reason == FORECAST_QUANTILE
    assert demand.rate_rps == pytest.approx(upper_quantile(150, 180, 0.95))
    assert demand.rate_rps < 900  # the spike at +3 min lies beyond the 2-minute lookahead


def test_a_forecast_that_starts_after_the_window_leaves_the_observed_load() -> None:
    later = _forecast((500,), (600,), origin_at=T0 + timedelta(minutes=10), step_s=600)
    demand = demand_for(SPEC, later, 80.0, _policy(upper_quantile=0.95), T0)
    assert demand.rate_rps == 80.0


def test_the_fast_path_takes_over_when_load_runs_above_the_forecast() -> None:
    demand = demand_for(SPEC, _forecast((10,) * 3, (12,) * 3), 40.0,
                        _policy(upper_quantile=0.95), T0)
    assert demand.reason == OBSERVED_ABOVE_FORECAST and demand.rate_rps == 60.0


def test_a_load_above_the_forecast_only_by_float_rounding_does_not_trigger_the_fast_path(
) -> None:
    # a flat series' persistence forecast as stored, and the two readings rate() alternates
    # between: both are the forecast's load, so the demand must not flap between them
    flat = _forecast((99.99999999999999,) * 3, (99.99999999999999,) * 3)
    policy = _policy(observed_lag_s=120)
    demands = [demand_for(SPEC, flat, seen, policy, T0) for seen in (99.99999999999999, 100.0)]
    assert [d.reason for d in demands] == [FORECAST_P90, FORECAST_P90]
    assert demands[0].rate_rps == demands[1].rate_rps
    above = demand_for(SPEC, flat, 100.001, policy, T0)
    assert above.reason == OBSERVED_ABOVE_FORECAST


def test_a_fall_the_forecast_predicted_does_not_trigger_the_fast_path() -> None:
    falling = _forecast((40, 10, 10), (40, 10, 10), origin_at=T0 - timedelta(minutes=1))
    policy = _policy(upper_quantile=0.95, lookahead_s=30, observed_lag_s=30)
    demand = demand_for(SPEC, falling, 40.0, policy, T0 + timedelta(seconds=5))
    assert demand.reason == FORECAST_QUANTILE and demand.rate_rps == 10.0
    missed = demand_for(SPEC, falling, 55.0, policy, T0 + timedelta(seconds=5))
    assert missed.reason == OBSERVED_ABOVE_FORECAST and missed.rate_rps == 55.0 * 1.5


def test_reactive_demand_ignores_forecasts_and_divides_by_the_target() -> None:
    demand = demand_for(SPEC, _forecast((900,), (1000,)), 40.0,
                        _policy(mode="reactive", target_utilization=0.8), T0)
    assert (demand.reason, demand.rate_rps) == (OBSERVED_LOAD, 50.0)


def test_static_demand_is_the_peak_and_a_missing_peak_is_stale() -> None:
    static = _policy(mode="static", static_rps=((SPEC.name, 300.0),))
    assert demand_for(SPEC, None, 40.0, static, T0).rate_rps == 300.0
    assert demand_for(SPEC, None, 40.0, static, T0).reason == STATIC_PEAK
    missing = demand_for(SPEC, None, 40.0, _policy(mode="static"), T0)
    assert missing.reason == NO_STATIC_PEAK and not missing.is_fresh


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        _policy(mode="clairvoyant")


def test_calibrated_ratios_replace_the_lognormal_tail() -> None:
    errors = ForecastErrors(min_count=10)
    for ratio in [1.0] * 80 + [1.5] * 20:  # a heavy tail: 20 % of targets at 1.5 x p50
        errors = errors.observe(100.0, 100.0 * ratio)
    plain = _forecast((100.0,), (110.0,))
    tuned = calibrated(plain, errors)
    assert window_quantile(plain, T0, 60, 0.95) == pytest.approx(upper_quantile(100, 110, 0.95))
    assert window_quantile(tuned, T0, 60, 0.95) == pytest.approx(150.0)


def test_replicas_round_up_and_no_demand_needs_none() -> None:
    assert replicas_for(0.0, 40) == 0
    assert replicas_for(40.0, 40) == 1
    assert replicas_for(40.1, 40) == 2
    demand = demand_for(SPEC, None, 100.0, _policy(mode="reactive"), T0)
    placed = slice_replicas(demand, SPEC)
    assert placed.capacity_rps >= 100.0 and placed.point == SPEC.best_point()


def test_settings_choose_the_policy_and_its_knobs() -> None:
    from controlplane.autoscaling.from_settings import policy_from_settings
    from controlplane.settings import ConfigError, load_settings

    predictive = policy_from_settings(load_settings(autoscaling={
        "shortfall_cost_ratio": 10, "short_minute_cost_ratio": 25}), cold_wake_s=300)
    reactive = policy_from_settings(load_settings(autoscaling={
        "policy": "reactive", "reactive_target_utilization": 0.7}), cold_wake_s=300)
    assert predictive.ladder is not None and predictive.ladder.shortfall_cost_ratio == 10
    assert predictive.ladder.short_minute_cost_ratio == 25
    with pytest.raises(ConfigError, match="short_minute_cost_ratio"):
        load_settings(autoscaling={"short_minute_cost_ratio": -1})
    assert predictive.demand.upper_quantile > 0.9
    assert reactive.ladder is None and reactive.demand.target_utilization == 0.7
    with pytest.raises(ConfigError, match="static_peak_rps"):
        load_settings(autoscaling={"policy": "static"})
    settings = load_settings(autoscaling={"policy": "static",
                                          "static_peak_rps": {SPEC.name: 90.0}})
    with pytest.raises(ValueError, match="peak"):
        policy_from_settings(settings, cold_wake_s=300)
    static = policy_from_settings(settings, cold_wake_s=300,
                                  peak_rps=settings.autoscaling.static_peak_rps)
    assert static.demand.static_peak(SPEC.name) == 90.0


def test_the_safety_cooldown_and_disruption_budgets_reach_both_adaptive_policies_guards() -> None:
    from controlplane.autoscaling.from_settings import policy_from_settings
    from controlplane.domain.guards import GuardLimits
    from controlplane.settings import load_settings

    safety = {"scale_down_cooldown_s": 900, "replica_disruption_budget": 3,
              "node_disruption_budget": 1, "disruption_window_s": 1200}
    for name in ("predictive", "reactive"):
        policy = policy_from_settings(load_settings(autoscaling={"policy": name}, safety=safety),
                                      cold_wake_s=300)
        replicas, pools = policy.replica_limits, policy.pool_limits
        assert (replicas.cooldown_s, replicas.disruption_budget,
                replicas.disruption_window_s) == (900, 3, 1200), name
        assert (pools.cooldown_s, pools.disruption_budget,
                pools.disruption_window_s) == (900, 1, 1200), name
    # off by default: the guards exactly as before these settings
    default = policy_from_settings(load_settings(), cold_wake_s=300)
    assert default.replica_limits == GuardLimits(max_step=8, stabilization_s=60.0)
    assert default.pool_limits == GuardLimits(max_step=4, stabilization_s=120.0)
