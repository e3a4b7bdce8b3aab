"""What replica bounds and a pause make of KEDA's metric and activity (pure): KEDA's HPA asks for
``ceil(metric / target)`` replicas, counted in thousandths, and that count always lies within
the bounds, or equals the replicas a pause holds."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from controlplane.domain.scaler_limits import (
    ReplicaLimits,
    fixed_activity,
    keda_replicas,
    replicas_metric,
    scaler_metric,
)

#: any target the scaler accepts (scalerMetadata.targetRps: 0.001 to 1e12 requests/s)
targets = st.floats(min_value=0.001, max_value=1e12, allow_nan=False)
#: a target in whole thousandths, as an operator writes one ("40", "12.5", "0.25")
written_targets = st.integers(min_value=1, max_value=10**9).map(lambda k: k / 1000)
replicas = st.integers(min_value=0, max_value=1_000_000)
forecasts = st.floats(min_value=0.0, max_value=9e15, allow_nan=False)


@st.composite
def bounds(draw: st.DrawFn) -> ReplicaLimits:
    low = draw(st.none() | st.integers(min_value=0, max_value=1000))
    high = draw(st.none() | st.integers(min_value=max(1, low or 0), max_value=2000))
    return ReplicaLimits(low, high)


@given(replicas, targets)
def test_a_held_count_is_exactly_the_replicas_keda_asks_for(held: int, target: float) -> None:
    assert keda_replicas(replicas_metric(held, target), target) == held


@given(replicas, written_targets)
@example(2, 2097.151)  # found by hypothesis: a target whose thousandths a float truncates
@example(679, 32.443)  # found by hypothesis: a whole thousandth under, to the last ulp
def test_a_held_count_of_a_written_target_is_ceil_of_metric_over_target_and_n_times_it(
        held: int, target: float) -> None:
    metric = replicas_metric(held, target)
    if held < int(target * 1000):  # the target's thousandths can tell the counts apart
        assert math.ceil(metric / target) == held
        # N x the target as KEDA reads it: its thousandths truncated as a float (2097.151 is
        # 2097150 thousandths), so at most a thousandth per replica under N x the written value
        # (a few ulps of slack: a metric exactly a thousandth a replica under is within it)
        assert metric == pytest.approx(held * target, abs=held / 1000 * (1 + 1e-9))


def test_three_replicas_of_a_tenth_are_three_not_four_as_float_rounding_would_ask() -> None:
    assert math.ceil(3 * 0.1 / 0.1) == 4  # the naive metric
    metric = replicas_metric(3, 0.1)
    assert math.ceil(metric / 0.1) == 3 and keda_replicas(metric, 0.1) == 3


@given(forecasts, targets, bounds())
def test_the_replicas_asked_for_always_lie_within_the_bounds(
        forecast: float, target: float, limits: ReplicaLimits) -> None:
    asked = keda_replicas(scaler_metric(forecast, target, limits), target)
    assert asked >= (limits.min_replicas or 0)
    assert limits.max_replicas is None or asked <= limits.max_replicas


@given(forecasts, targets, bounds())
def test_a_forecast_within_the_bounds_is_served_as_it_is(
        forecast: float, target: float, limits: ReplicaLimits) -> None:
    asked = keda_replicas(forecast, target)
    if (limits.min_replicas or 0) <= asked <= (limits.max_replicas or asked):
        assert scaler_metric(forecast, target, limits) == forecast


@given(st.none() | forecasts, targets, bounds(), replicas)
def test_a_pause_holds_its_replicas_whatever_the_forecast_and_the_bounds(
        forecast: float | None, target: float, limits: ReplicaLimits, held: int) -> None:
    paused = ReplicaLimits(limits.min_replicas, limits.max_replicas, held)
    assert keda_replicas(scaler_metric(forecast, target, paused), target) == held
    assert fixed_activity(paused) is (held > 0)


def test_min_replicas_above_zero_makes_a_model_active_and_no_bound_leaves_it_to_the_forecast(
        ) -> None:
    assert fixed_activity(ReplicaLimits(min_replicas=1)) is True
    assert fixed_activity(ReplicaLimits(min_replicas=0, max_replicas=3)) is None
    assert fixed_activity(ReplicaLimits()) is None


def test_a_model_that_is_not_paused_needs_its_forecast() -> None:
    with pytest.raises(ValueError, match="forecast"):
        scaler_metric(None, 40.0, ReplicaLimits(min_replicas=2))


def test_bounds_that_cannot_hold_and_a_negative_held_count_are_refused() -> None:
    with pytest.raises(ValueError, match="max_replicas"):
        ReplicaLimits(min_replicas=5, max_replicas=3)
    with pytest.raises(ValueError, match="held"):
        ReplicaLimits(held=-1)
