"""Hot headroom: hot replicas cover a quantile of the next forecast step, chosen per model from
the price of a short model-minute (few replicas buy a high quantile cheaply)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from controlplane.autoscaling.calibration import ForecastErrors, calibrated
from controlplane.autoscaling.core import Budgets, FleetModel, size
from controlplane.autoscaling.headroom import QUANTILES, best_quantile, next_step_headroom
from controlplane.autoscaling.policies import ladder_rungs, predictive_policy
from controlplane.autoscaling.sizing import ReplicaShape
from controlplane.domain.demand import (
    CALIBRATION_GRID,
    FORECAST_QUANTILE,
    HOT_HEADROOM,
    OBSERVED_ABOVE_FORECAST,
    demand_for,
    ratio_key,
    step_quantile,
)
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.sim.catalog import DEMO_MODELS
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
SPEC = DEMO_MODELS[0]
STEP_S = 600


def _ratios(spread: float = 0.3) -> dict[float, float]:
    """Ratio to p50 growing with the quantile: 1 at the median, 1 + spread near the top."""
    return {q: 1.0 + spread * (q - 0.5) / 0.5 for q in QUANTILES}


def _forecast(p50: float, p90: float, origin_at: datetime = T0) -> Forecast:
    """A 10-minute forecast whose first step starts at the next step boundary."""
    return Forecast(SPEC.name, origin_at, STEP_S, (p50, p50), (p90, p90), "test")


def test_a_model_with_few_replicas_holds_a_higher_quantile_than_a_big_one() -> None:
    small = best_quantile(_ratios(), replicas=10, step_s=STEP_S, short_minute_cost_ratio=20)
    big = best_quantile(_ratios(), replicas=200, step_s=STEP_S, short_minute_cost_ratio=20)
    assert small > big
    assert small == QUANTILES[-1]  # 10 replicas: each point of quantile is cheap


@given(st.floats(1, 500), st.floats(1, 100), st.floats(1.5, 4))
def test_a_dearer_short_minute_never_lowers_the_quantile(replicas: float, price: float,
                                                         factor: float) -> None:
    cheap = best_quantile(_ratios(), replicas, STEP_S, price)
    dear = best_quantile(_ratios(), replicas, STEP_S, price * factor)
    assert dear >= cheap


def test_headroom_reads_the_calibrated_tail_of_the_next_step() -> None:
    errors = ForecastErrors(min_count=10)
    for ratio in [1.0] * 80 + [1.4] * 20:  # 20 % of steps come in 1.4 x above the median
        errors = errors.observe(100.0, 100.0 * ratio)
    forecast = calibrated(_forecast(100.0, 105.0), errors)
    found = next_step_headroom(forecast, T0 - timedelta(minutes=3), unit_rps=10.0,
                               short_minute_cost_ratio=40.0)
    assert found is not None
    assert found.quantile > 0.8
    assert found.rps == pytest.approx(step_quantile(forecast, 0, found.quantile))
    assert found.rps == pytest.approx(140.0)


def test_no_price_no_step_ahead_or_no_median_means_no_headroom() -> None:
    forecast = _forecast(100.0, 120.0)
    assert next_step_headroom(forecast, T0, 10.0, 0.0) is None
    assert next_step_headroom(forecast, T0 + timedelta(hours=1), 10.0, 40.0) is None
    assert next_step_headroom(_forecast(0.0, 10.0), T0, 10.0, 40.0) is None


def _size(price: float, observed_rps: float, forecast: Forecast) -> tuple[str, float, int]:
    shape = ReplicaShape(SPEC.name, SPEC.tenant, "A100-80GB", 1.0, 10.0)
    model = FleetModel(SPEC, shape, ladder_rungs(2.0, 1.0, 2.0, 10.0, 300.0), 2.0)
    policy = predictive_policy(shortfall_cost_ratio=1.5, short_minute_cost_ratio=price)
    observed = ObservedState(T0, (), (), (ObservedModel(SPEC.name, 10, 0, 10, observed_rps,
                                                        100.0),))
    sized = size(observed, {SPEC.name: forecast}, [model], policy, Budgets(),
                 T0 - timedelta(minutes=3))
    demand, request = sized.demands[0], sized.requests[0]
    return demand.reason, demand.rate_rps, request.hot


def test_the_core_raises_hot_replicas_to_the_headroom_and_says_why() -> None:
    forecast = _forecast(100.0, 130.0)
    reason, rate_rps, hot = _size(40.0, 100.0, forecast)
    plain_reason, plain_rps, plain_hot = _size(0.0, 100.0, forecast)
    assert (plain_reason, plain_rps, plain_hot) == (FORECAST_QUANTILE, 100.0, 10)
    assert reason == HOT_HEADROOM and rate_rps > 100.0 and hot > plain_hot


def test_headroom_never_lowers_demand_below_the_load_seen_now() -> None:
    reason, rate_rps, hot = _size(40.0, 400.0, _forecast(100.0, 130.0))
    assert reason != HOT_HEADROOM and rate_rps == pytest.approx(400.0) and hot == 40


def test_load_above_the_forecast_keeps_the_headroom_the_forecast_alone_would_hold() -> None:
    # the next step rises to 30 rps: the forecast alone holds hot replicas for its tail
    rising = Forecast(SPEC.name, T0 - timedelta(minutes=10), STEP_S, (0.0, 30.0), (0.0, 60.0),
                      "test")
    _, alone_rps, alone_hot = _size(40.0, 0.0, rising)
    reason, rate_rps, hot = _size(40.0, 1.0, rising)  # 1 rps seen: the fast path is on
    assert alone_hot > 1
    assert reason == HOT_HEADROOM and rate_rps == pytest.approx(alone_rps) and hot == alone_hot


def _tail_at_the_top(p50: float) -> Forecast:
    """A calibrated forecast flat up to q0.99 whose last half-percent comes in 1.25 x p50."""
    ratios = {ratio_key(q): 1.0 for q in CALIBRATION_GRID} | {ratio_key(0.995): 1.25}
    return Forecast(SPEC.name, T0, STEP_S, (p50, p50), (p50, p50), "test", diagnostics=ratios)


def test_a_larger_forecast_never_lowers_the_headroom_where_the_quantile_steps_down() -> None:
    # at 214 rps the tail is worth its price; at 240.75 the newsvendor drops to the flat part
    smaller = next_step_headroom(_tail_at_the_top(214.0), T0, 10.0, 200.0)
    larger = next_step_headroom(_tail_at_the_top(240.75), T0, 10.0, 200.0)
    assert smaller is not None and larger is not None
    assert smaller.rps == pytest.approx(267.5)
    assert larger.rps >= smaller.rps


@settings(max_examples=200, deadline=None)
@given(p50=st.floats(0.01, 2000), spread=st.floats(1.0, 2.5), factor=st.floats(1.0, 2.0),
       tail=st.one_of(st.none(), st.lists(st.floats(0, 0.5), min_size=6, max_size=6)),
       price=st.sampled_from([5.0, 40.0, 200.0, 2000.0]))
def test_more_forecast_never_lowers_the_headroom(p50: float, spread: float, factor: float,
                                                  tail: list[float] | None, price: float) -> None:
    ratios: dict[str, float] = {}
    if tail is not None:  # a calibrated tail: ratio 1 at the median, rising by ``tail``
        ratio = 1.0
        for q, rise in zip(CALIBRATION_GRID, [0.0, *tail], strict=True):
            ratio += rise
            ratios[ratio_key(q)] = ratio
    forecasts = [Forecast(SPEC.name, T0, STEP_S, (k * p50, k * p50 / 2), (
        k * p50 * spread, k * p50 / 2 * spread), "test", diagnostics=ratios) for k in (1, factor)]
    smaller, larger = (next_step_headroom(f, T0, 10.0, price) for f in forecasts)
    assert smaller is not None and larger is not None
    assert larger.rps >= smaller.rps * (1 - 1e-9)


_RATES = st.lists(st.floats(0, 300), min_size=3, max_size=3)
_SPREADS = st.lists(st.floats(1, 2), min_size=3, max_size=3)
_TAILS = st.one_of(st.none(), st.lists(st.floats(0, 0.5), min_size=6, max_size=6))
_PRICES = st.sampled_from([0.0, 20.0, 40.0, 200.0])
_LAGS = st.sampled_from([0.0, 60.0])


def _sized(p50s: list[float], spreads: list[float], tail: list[float] | None,
           observed_rps: float, price: float, lag_s: float, scale: float = 1.0
           ) -> tuple[int, str]:
    """(hot replicas, demand reason before headroom) of one model whose forecast (three
    10-minute steps from 10 minutes ago, every quantile x ``scale``) and load are given."""
    ratios: dict[str, float] = {}
    if tail is not None:
        ratio = 1.0
        for q, rise in zip(CALIBRATION_GRID, [0.0, *tail], strict=True):
            ratio += rise
            ratios[ratio_key(q)] = ratio
    forecast = Forecast(SPEC.name, T0 - timedelta(minutes=10), STEP_S,
                        tuple(scale * p for p in p50s),
                        tuple(scale * p * s for p, s in zip(p50s, spreads, strict=True)),
                        "test", diagnostics=ratios)
    shape = ReplicaShape(SPEC.name, SPEC.tenant, "A100-80GB", 1.0, 10.0)
    model = FleetModel(SPEC, shape, ladder_rungs(2.0, 1.0, 2.0, 10.0, 300.0), 2.0)
    policy = predictive_policy(short_minute_cost_ratio=price, observed_lag_s=lag_s)
    now = T0 - timedelta(minutes=3)
    observed = ObservedState(now, (), (), (ObservedModel(SPEC.name, 10, 0, 10, observed_rps,
                                                         100.0),))
    sized = size(observed, {SPEC.name: forecast}, [model], policy, Budgets(), now)
    plain = demand_for(SPEC, forecast, observed_rps, policy.demand, now)
    return sized.requests[0].hot, plain.reason


@settings(max_examples=200, deadline=None)
@given(p50s=_RATES, spreads=_SPREADS, tail=_TAILS, observed_rps=st.floats(0, 400),
       more_rps=st.floats(0, 100), price=_PRICES, lag_s=_LAGS)
def test_more_load_seen_never_gives_fewer_hot_replicas(
        p50s: list[float], spreads: list[float], tail: list[float] | None, observed_rps: float,
        more_rps: float, price: float, lag_s: float) -> None:
    less, _ = _sized(p50s, spreads, tail, observed_rps, price, lag_s)
    more, _ = _sized(p50s, spreads, tail, observed_rps + more_rps, price, lag_s)
    assert more >= less


@settings(max_examples=200, deadline=None)
@given(p50s=_RATES, spreads=_SPREADS, tail=_TAILS, observed_rps=st.floats(0, 400),
       scale=st.floats(1, 2), price=_PRICES, lag_s=_LAGS)
def test_more_forecast_never_gives_fewer_hot_replicas_unless_it_ends_the_fast_path(
        p50s: list[float], spreads: list[float], tail: list[float] | None, observed_rps: float,
        scale: float, price: float, lag_s: float) -> None:
    less, less_reason = _sized(p50s, spreads, tail, observed_rps, price, lag_s)
    more, more_reason = _sized(p50s, spreads, tail, observed_rps, price, lag_s, scale)
    # A forecast raised past the load seen ends the fast path (observed x stale_headroom): a
    # step down by design (see the report of this test's commit), not covered here.
    assume(not (less_reason == OBSERVED_ABOVE_FORECAST != more_reason))
    assert more >= less
