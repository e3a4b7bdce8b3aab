"""Demand hints floor a model's forecast over their window: steps the window meets get at least
the hint's rate, nothing is ever lowered, ended hints and other models are left alone."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane.autoscaling.headroom import next_step_headroom
from controlplane.autoscaling.hints import hint_floors, hinted_demands, with_hints
from controlplane.domain.demand import (
    DEMAND_UNMEASURED,
    FORECAST_P90,
    HINTED,
    NO_FORECAST,
    OBSERVED_ABOVE_FORECAST,
    OBSERVED_LOAD,
    PREDICTIVE,
    REACTIVE,
    STALE_FORECAST,
    STATIC,
    STATIC_PEAK,
    Demand,
    DemandPolicy,
    demand_from,
    ratio_key,
    step_quantile,
)
from controlplane.domain.hints import DemandHint
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.sim.catalog import DEMO_MODELS
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
STEP_S = 300


def _forecast(model: str, p50: tuple[float, ...], p90: tuple[float, ...] | None = None
              ) -> Forecast:
    return Forecast(model, T0, STEP_S, p50, p90 if p90 is not None else tuple(1.2 * v for v in p50),
                    "hybrid")


def _hint(model: str, rps: float, start_min: float, end_min: float) -> DemandHint:
    return DemandHint(model, rps, T0 + timedelta(minutes=start_min),
                      T0 + timedelta(minutes=end_min), "launch")


def test_steps_the_window_meets_get_at_least_the_hint_and_the_others_stay() -> None:
    # steps of 5 minutes from T0: [0, 5), [5, 10), [10, 15), [15, 20); the window is [7, 12)
    got = with_hints({"chat": _forecast("chat", (100.0, 100.0, 100.0, 100.0))},
                     [_hint("chat", 400.0, 7, 12)], T0)["chat"]
    assert got.p50 == (100.0, 400.0, 400.0, 100.0)
    assert got.p90 == (120.0, 480.0, 480.0, 120.0)  # the forecast's spread on top of the floor
    assert got.diagnostics["hint_rps"] == 400.0


def test_a_lead_opens_the_window_early_so_the_fleet_is_ready_when_it_starts() -> None:
    # the window [17, 30) opened 10 minutes early meets the steps from [5, 10) on
    got = with_hints({"chat": _forecast("chat", (100.0, 100.0, 100.0, 100.0))},
                     [_hint("chat", 400.0, 17, 30)], T0, lead_s=600)["chat"]
    assert got.p50 == (100.0, 400.0, 400.0, 400.0)


def test_the_calibrated_tail_applies_on_top_of_a_floored_step() -> None:
    ratios = {ratio_key(0.5): 1.0, ratio_key(0.99): 1.3}
    calibrated = replace(_forecast("chat", (100.0, 100.0)), diagnostics=ratios)
    got = with_hints({"chat": calibrated}, [_hint("chat", 400.0, 5, 10)], T0)["chat"]
    assert step_quantile(got, 0, 0.99) == pytest.approx(130.0)
    assert step_quantile(got, 1, 0.99) == pytest.approx(520.0)


def test_a_hint_below_the_forecast_changes_nothing() -> None:
    forecast = _forecast("chat", (100.0, 300.0), (150.0, 350.0))
    got = with_hints({"chat": forecast}, [_hint("chat", 120.0, 5, 60)], T0)
    assert got["chat"].p50 == (100.0, 300.0)
    assert got["chat"].p90 == (150.0, 350.0)
    assert "hint_rps" not in got["chat"].diagnostics


def test_a_hint_between_p50_and_p90_lifts_the_p90_with_the_p50() -> None:
    got = with_hints({"chat": _forecast("chat", (100.0,), (150.0,))},
                     [_hint("chat", 130.0, 0, 5)], T0)["chat"]
    assert got.p50 == (130.0,)
    assert got.p90[0] == pytest.approx(195.0)


def test_ended_hints_other_models_and_overlapping_hints() -> None:
    forecasts = {"chat": _forecast("chat", (100.0, 100.0)), "embed": _forecast("embed", (50.0,))}
    hints = [_hint("chat", 900.0, -60, -1),  # ended before now
             _hint("chat", 200.0, 0, 10), _hint("chat", 250.0, 4, 6),  # the higher one wins
             _hint("asr", 70.0, 0, 10)]  # a model without a forecast: nothing to floor
    got = with_hints(forecasts, hints, T0)
    assert got["chat"].p50 == (250.0, 250.0)
    assert got["embed"] == forecasts["embed"]
    assert set(got) == {"chat", "embed"}


def test_a_hint_ending_before_a_first_step_that_starts_after_now_holds_until_its_end() -> None:
    """A replay's forecast on a 10-minute grid starts at the next step: the policy reads its
    first step for the minutes from now to its origin too, so a hint ending in them floors it
    until its end (before: only from its origin on, and the hint was dropped minutes early)."""
    forecast = Forecast("chat", T0 + timedelta(minutes=10), 600, (100.0, 100.0), (120.0, 120.0),
                        "hybrid")
    hints = [_hint("chat", 400.0, -60, 10)]  # ends at the forecast's origin
    policy = _policy()
    for minute in (2, 9):
        now = T0 + timedelta(minutes=minute)
        floored = with_hints({"chat": forecast}, hints, now)
        assert floored["chat"].p50 == (400.0, 100.0) and floored["chat"].p90 == (480.0, 120.0)
        observed = ObservedState(now, (), (), (ObservedModel("chat", 2, 0, 2, 100.0, 200.0),))
        demand, = demand_from([_spec("chat")], floored, observed, policy, now)
        assert demand.rate_rps == 480.0  # the forecast's p90 spread on top of the hint
        tagged, = hinted_demands((demand,), {"chat": forecast}, floored, {}, policy, now)
        assert tagged.reason == FORECAST_P90 + HINTED
    # at its end the hint floors nothing, and a first step at or before now is read from its
    # start as before
    assert with_hints({"chat": forecast}, hints, T0 + timedelta(minutes=10))["chat"] == forecast
    assert with_hints({"chat": _forecast("chat", (100.0,))}, [_hint("chat", 400.0, -60, -1)],
                      T0 + timedelta(minutes=2))["chat"].p50 == (100.0,)


@given(p50=st.lists(st.floats(0, 1e4), min_size=1, max_size=8),
       rps=st.floats(0, 1e4), start_min=st.floats(-30, 60), length_min=st.floats(0.01, 90))
def test_hints_never_lower_a_forecast_and_touch_only_steps_their_window_meets(
        p50: list[float], rps: float, start_min: float, length_min: float) -> None:
    forecast = _forecast("chat", tuple(p50))
    hint = _hint("chat", rps, start_min, start_min + length_min)
    got = with_hints({"chat": forecast}, [hint], T0)["chat"]
    for i, (before, after, high_before, high_after) in enumerate(
            zip(forecast.p50, got.p50, forecast.p90, got.p90, strict=True)):
        assert after >= before and high_after >= high_before
        step_at = T0 + timedelta(seconds=i * STEP_S)
        if hint.overlaps(step_at, step_at + timedelta(seconds=STEP_S)):
            assert min(after, high_after) >= rps
        else:
            assert (after, high_after) == (before, high_before)


def test_a_hint_above_an_uncalibrated_forecast_raises_every_quantile_the_sizing_reads() -> None:
    """No calibrated tail yet (a fresh store): the quantiles come from the lognormal through p50
    and p90. A hint of 80 rps on p50 50 / p90 97.7 raised p50 alone, the lognormal narrowed, and
    the 99th percentile and the hot headroom fell below the forecaster's own (before: 80 rps
    provisioned 149.6 rps where no hint provisioned 240.4)."""
    forecast = _forecast("chat", (50.0, 50.0), (97.7, 97.7))
    got = with_hints({"chat": forecast}, [_hint("chat", 80.0, 0, 60)], T0)["chat"]
    assert (got.p50[0], got.p90[0]) == pytest.approx((80.0, 97.7 * 1.6))
    for q in (0.5, 0.8, 0.9, 0.99, 0.995):
        assert step_quantile(got, 0, q) == pytest.approx(1.6 * step_quantile(forecast, 0, q))
    before = next_step_headroom(forecast, T0, 10.0, 1.0)
    after = next_step_headroom(got, T0, 10.0, 1.0)
    assert before is not None and after is not None and after.rps >= before.rps


def test_a_hint_on_a_sparse_step_stands_the_forecasters_p90_on_top_of_it() -> None:
    # under one request per step (1/300 rps) p50 is no level to take a ratio to
    got = with_hints({"chat": _forecast("chat", (0.001,), (2.0,))},
                     [_hint("chat", 80.0, 0, 5)], T0)["chat"]
    assert (got.p50, got.p90) == ((80.0,), (82.0,))


_QUANTILES = (0.5, 0.6, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999)


@given(p50=st.lists(st.floats(0, 1e4), min_size=1, max_size=8),
       spread=st.lists(st.floats(0, 20), min_size=8, max_size=8),
       ratios=st.one_of(st.none(), st.lists(st.floats(0.05, 50), min_size=2, max_size=7)),
       rps=st.floats(0, 1e4), start_min=st.floats(-30, 60), length_min=st.floats(0.01, 90))
def test_a_hint_never_lowers_a_quantile_the_sizing_reads_calibrated_or_not(
        p50: list[float], spread: list[float], ratios: list[float] | None, rps: float,
        start_min: float, length_min: float) -> None:
    """Every quantile ``step_quantile`` (so ``window_quantile``) reads is at least the
    forecaster's own once a hint floors the forecast. A calibrated forecast's steps here count
    one request at least: a sparse step's quantiles ignore the calibration, and a floor above
    one request per step brings it back (the forecast's errors on top of the hint)."""
    counted = ratios is not None
    medians = tuple(v + 1.0 if counted else v for v in p50)
    forecast = Forecast("chat", T0, STEP_S, medians,
                        tuple(v * s for v, s in zip(medians, spread, strict=False)), "hybrid")
    if ratios is not None:
        grid = (0.5, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995)
        forecast = replace(forecast, diagnostics={
            ratio_key(q): r for q, r in zip(grid, sorted(ratios), strict=False)})
    hint = _hint("chat", rps, start_min, start_min + length_min)
    got = with_hints({"chat": forecast}, [hint], T0)["chat"]
    for i in range(len(medians)):
        for q in _QUANTILES:
            assert step_quantile(got, i, q) >= step_quantile(forecast, i, q) * (1 - 1e-9)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"rate_rps": float("nan")}, "rate_rps must be a number"),
    ({"rate_rps": -1.0}, "rate_rps must be a number"),
    ({"end_at": T0}, "is not after start_at"),
    ({"model": " "}, "model is empty"),
    ({"start_at": T0.replace(tzinfo=None)}, "need a time zone"),
])
def test_a_bad_hint_is_refused_naming_the_model_and_the_field(kwargs: dict[str, Any],
                                                               message: str) -> None:
    valid = DemandHint("chat", 10.0, T0, T0 + timedelta(hours=1))
    with pytest.raises(ValueError, match=message):
        replace(valid, **kwargs)


def test_a_demand_is_tagged_only_when_a_hint_raised_the_window_it_reads() -> None:
    forecasts = {m: _forecast(m, (100.0, 100.0, 100.0, 100.0)) for m in ("soon", "later", "low")}
    hints = [_hint("soon", 400.0, 4, 8),  # meets the first two 5-minute steps
             _hint("later", 400.0, 16, 30),  # only the fourth step
             _hint("low", 50.0, 0, 30)]  # below the forecast: raises nothing
    floored = with_hints(forecasts, hints, T0)
    demands = tuple(Demand(m, 125.0, 90.0, 120.0, FORECAST_P90) for m in forecasts)
    tagged = {d.model: d.reason for d in hinted_demands(
        demands, forecasts, floored, hint_floors(hints, T0, 600), _policy(), T0)}
    assert tagged == {"soon": FORECAST_P90 + HINTED, "later": FORECAST_P90, "low": FORECAST_P90}


def _policy(mode: str = PREDICTIVE) -> DemandPolicy:
    return DemandPolicy(target_utilization=1.0, lookahead_s=600, max_forecast_age_s=900,
                        stale_headroom=1.5, mode=mode)


def _spec(name: str) -> ModelSpec:
    return replace(DEMO_MODELS[0], name=name)


def test_a_stale_or_missing_forecast_sizes_from_the_hint_in_force_when_above_the_load() -> None:
    stale = replace(_forecast("stale", (100.0, 100.0, 100.0, 100.0)),
                    origin_at=T0 - timedelta(hours=2))
    forecasts = {"stale": stale}
    hints = [_hint("stale", 400.0, 5, 30), _hint("missing", 400.0, 5, 30),
             _hint("quiet", 100.0, 0, 30), _hint("after", 900.0, 11, 30)]
    policy = _policy()
    floors = hint_floors(hints, T0, policy.lookahead_s)
    assert floors == {"stale": 400.0, "missing": 400.0, "quiet": 100.0}  # "after": past 10 min
    floored = with_hints(forecasts, hints, T0)
    observed = ObservedState(T0, (), (), tuple(
        ObservedModel(m, 2, 0, 2, 80.0, 200.0) for m in ("stale", "missing", "quiet", "after")))
    demands = demand_from([_spec(m) for m in ("stale", "missing", "quiet", "after")], floored,
                          observed, policy, T0, floors)
    # before: the stale forecast was dropped with its floor, 80 x 1.5 = 120 sized it
    assert [(d.rate_rps, d.reason) for d in demands] == [
        (400.0, STALE_FORECAST), (400.0, NO_FORECAST), (120.0, NO_FORECAST),
        (120.0, NO_FORECAST)]
    tagged = hinted_demands(demands, forecasts, floored, floors, policy, T0)
    assert [d.reason for d in tagged] == [STALE_FORECAST + HINTED, NO_FORECAST + HINTED,
                                          NO_FORECAST, NO_FORECAST]
    assert not any(d.is_fresh for d in tagged)  # still stale inputs: no scale-down on them


def test_a_hint_the_fast_path_outran_or_a_policy_that_reads_no_forecast_is_not_tagged() -> None:
    forecasts = {"chat": _forecast("chat", (100.0, 100.0, 100.0, 100.0))}
    hints = [_hint("chat", 300.0, 0, 30)]
    floored = with_hints(forecasts, hints, T0)
    floors = hint_floors(hints, T0, 600)
    # the load runs above the floored forecast: the fast path sized it, not the hint
    burst = Demand("chat", 750.0, 500.0, 300.0, OBSERVED_ABOVE_FORECAST)
    assert hinted_demands((burst,), forecasts, floored, floors, _policy(), T0) == (burst,)
    for mode, reason in ((REACTIVE, OBSERVED_LOAD), (STATIC, STATIC_PEAK)):
        demand = Demand("chat", 100.0, 100.0, 0.0, reason)
        # before: tagged +demand_hint though these policies never read a forecast
        assert hinted_demands((demand,), forecasts, floored, floors, _policy(mode), T0) == (
            demand,)


def test_a_model_whose_load_is_unmeasured_holds_the_hint_in_force_when_it_asks_for_more(
        ) -> None:
    hints = [_hint("launch", 400.0, 0, 30), _hint("small", 50.0, 0, 30)]
    policy = _policy()
    floors = hint_floors(hints, T0, policy.lookahead_s)
    # the load source could not say (a scaled-to-zero model has no metrics; a failed scrape)
    observed = ObservedState(T0, (), (), tuple(
        ObservedModel(m, 2, 0, 2, 0.0, 200.0, demand_measured=False)
        for m in ("launch", "small", "plain")))
    specs = [_spec(m) for m in ("launch", "small", "plain")]
    demands = demand_from(specs, {}, observed, policy, T0, floors)
    # before: every one held its 200 rps of capacity, the 400-rps launch ignored
    assert [(d.rate_rps, d.reason) for d in demands] == [
        (400.0 / policy.target_utilization, DEMAND_UNMEASURED + HINTED),
        (200.0, DEMAND_UNMEASURED), (200.0, DEMAND_UNMEASURED)]
    assert hinted_demands(demands, {}, {}, floors, policy, T0) == demands  # tagged once
    assert not any(d.is_fresh for d in demands)  # no scale-down on an unmeasured load
    reactive = demand_from(specs, {}, observed, _policy(REACTIVE), T0, floors)
    assert [(d.rate_rps, d.reason) for d in reactive] == [(200.0, DEMAND_UNMEASURED)] * 3
