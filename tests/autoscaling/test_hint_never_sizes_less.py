"""A demand hint never sizes a model fewer replicas than no hint: raising the forecast must not
turn off the fast path the forecaster's own forecast would have taken (observed load above it,
observed x ``stale_headroom``), so the core sizes the higher of the demand with and without the
hints, and the reason says which one sized it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.autoscaling.core import Budgets, FleetModel, Sizing, size
from controlplane.autoscaling.hint_capacity import hints_capped
from controlplane.autoscaling.hints import hinted_inputs
from controlplane.autoscaling.policies import ladder_rungs, predictive_policy
from controlplane.autoscaling.sizing import ReplicaShape
from controlplane.domain.demand import (
    CALIBRATION_GRID,
    FORECAST_QUANTILE,
    HINTED,
    OBSERVED_ABOVE_FORECAST,
    ratio_key,
)
from controlplane.domain.hints import DemandHint
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.sim.catalog import DEMO_MODELS
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
SPEC = DEMO_MODELS[0]
STEP_S = 600
LEAD_S = 600.0
SHAPE = ReplicaShape(SPEC.name, SPEC.tenant, "A100-80GB", 1.0, 10.0)  # 10 rps a replica
MODEL = FleetModel(SPEC, SHAPE, ladder_rungs(2.0, 1.0, 2.0, 10.0, 300.0), 2.0)


def _observed(now: datetime, rps: float) -> ObservedState:
    return ObservedState(now, (), (), (ObservedModel(SPEC.name, 10, 0, 10, rps, 100.0),))


def _sized(forecast: Forecast, hints: list[DemandHint], observed_rps: float, now: datetime,
           price: float = 0.0, lag_s: float = 0.0) -> Sizing:
    """The model sized as the reconcile loop and ``headroom simulate`` size it: forecasts
    floored by the hints in force, ``size``, then the reasons tagged (``hints_capped``)."""
    policy = predictive_policy(short_minute_cost_ratio=price, observed_lag_s=lag_s)
    hinted = hinted_inputs({SPEC.name: forecast}, hints, now, LEAD_S, policy.demand.lookahead_s)
    sizing = size(_observed(now, observed_rps), hinted.forecasts, [MODEL], policy, Budgets(),
                  now, (), hinted.floors, unhinted=hinted.calibrated)
    return hints_capped(sizing, hinted, [MODEL], policy.demand)[0]


def _hint(rps: float, start_min: float = 0.0, end_min: float = 60.0) -> DemandHint:
    return DemandHint(SPEC.name, rps, T0 + timedelta(minutes=start_min),
                      T0 + timedelta(minutes=end_min), "launch")


def test_a_hint_between_the_forecast_and_the_fast_path_sizes_what_no_hint_sizes() -> None:
    forecast = Forecast(SPEC.name, T0, STEP_S, (100.0, 100.0), (120.0, 120.0), "test")
    now = T0 + timedelta(minutes=2)
    # 130 rps runs above the forecast's ~118 rps: the fast path sizes 130 x 1.3 = 169 rps
    alone = _sized(forecast, [], 130.0, now)
    assert (alone.demands[0].reason, alone.requests[0].hot) == (OBSERVED_ABOVE_FORECAST, 17)
    # a 125-rps hint raises the forecast to ~147 rps, above the load: before, that turned the
    # fast path off and the hint sized 15 replicas where no hint sized 17
    hinted = _sized(forecast, [_hint(125.0)], 130.0, now)
    assert hinted.requests[0].hot == 17
    assert hinted.demands[0].reason == OBSERVED_ABOVE_FORECAST  # the fast path sized it
    assert hinted.hint_outsized == (SPEC.name,)
    # a hint above the fast path sizes from the hint, and says so
    high = _sized(forecast, [_hint(200.0)], 130.0, now)
    assert high.requests[0].hot > 17
    assert high.demands[0].reason == FORECAST_QUANTILE + HINTED
    assert high.hint_outsized == ()


@settings(max_examples=300, deadline=None)
@given(p50s=st.lists(st.floats(0, 300), min_size=1, max_size=4),
       spreads=st.lists(st.floats(1, 3), min_size=4, max_size=4),
       tail=st.one_of(st.none(), st.lists(st.floats(0, 0.5), min_size=6, max_size=6)),
       observed_rps=st.floats(0, 600), hint_rps=st.floats(0, 600),
       start_min=st.floats(-20, 40), length_min=st.floats(0.1, 60),
       ahead_min=st.floats(-25, 5), price=st.sampled_from([0.0, 80.0]),
       lag_s=st.sampled_from([0.0, 60.0]))
def test_a_hint_never_sizes_fewer_replicas_than_no_hint(
        p50s: list[float], spreads: list[float], tail: list[float] | None, observed_rps: float,
        hint_rps: float, start_min: float, length_min: float, ahead_min: float, price: float,
        lag_s: float) -> None:
    """Same load, same forecast (calibrated or not, its origin before or after now), same
    policy (hot headroom on or off, a load metric's window or none): the replicas and the rate
    sized with a hint are at least those sized without it."""
    ratios: dict[str, float] = {}
    if tail is not None:
        ratio = 1.0
        for q, rise in zip(CALIBRATION_GRID, [0.0, *tail], strict=True):
            ratio += rise
            ratios[ratio_key(q)] = ratio
    forecast = Forecast(SPEC.name, T0, STEP_S, tuple(p50s),
                        tuple(p * s for p, s in zip(p50s, spreads, strict=False)), "test",
                        diagnostics=ratios)
    now = T0 - timedelta(minutes=ahead_min)
    alone = _sized(forecast, [], observed_rps, now, price, lag_s)
    hinted = _sized(forecast, [_hint(hint_rps, start_min, start_min + length_min)],
                    observed_rps, now, price, lag_s)
    assert hinted.requests[0].hot >= alone.requests[0].hot
    assert hinted.demands[0].rate_rps >= alone.demands[0].rate_rps
    if hinted.hint_outsized:  # the sizing without the hint stood: the hint is not named
        assert not hinted.demands[0].reason.endswith(HINTED)
