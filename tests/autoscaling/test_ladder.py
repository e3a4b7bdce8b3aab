"""The warm-pool ladder: each rung covers the forecast's upper quantile until the next, slower
rung could serve; the quantile is the newsvendor's trade of idle cost against shortfall."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane.autoscaling.core import Budgets, FleetModel, size
from controlplane.autoscaling.distribution import Durations, expected_shortfall
from controlplane.autoscaling.ladder import (
    LadderPolicy,
    Rung,
    critical_quantile,
    size_ladder,
)
from controlplane.autoscaling.policies import ladder_rungs, predictive_policy
from controlplane.autoscaling.sizing import ReplicaShape
from controlplane.domain.demand import FUTURE_FORECAST, STALE_FORECAST
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.sim.catalog import DEMO_MODELS
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
POLICY = LadderPolicy(reaction_s=60, shortfall_usd_per_rps_h=2.0)
RUNGS = ladder_rungs(replica_usd_per_h=5.0, idle_gpu_fraction=0.25, idle_wake_s=2.0,
                     cached_start_p90_s=5.0, cold_start_p90_s=300.0)


def _forecast(p50: float, p90: float, steps: int = 10) -> Forecast:
    return Forecast("m", T0, 60, (p50,) * steps, (p90,) * steps, "test")


def test_a_dearer_shortfall_or_a_slower_next_rung_raises_the_quantile() -> None:
    cheap = critical_quantile(5.0, 10.0, LadderPolicy(60, 1.0))
    dear = critical_quantile(5.0, 10.0, LadderPolicy(60, 4.0))
    slow_next = critical_quantile(5.0, 10.0, LadderPolicy(60, 1.0), next_wake_s=300)
    assert cheap < dear and cheap < slow_next
    assert critical_quantile(5.0, 10.0, LadderPolicy(60, 1.0, max_quantile=0.9),
                             next_wake_s=3000) == 0.9


def test_rungs_hold_more_the_slower_the_rung_behind_them() -> None:
    ladder = size_ladder("m", _forecast(100.0, 130.0), 100.0, T0, 10.0, 10, RUNGS, POLICY)
    sizes = {r.rung: r for r in ladder.rungs}
    assert [r.rung for r in ladder.rungs] == [Rung.HOT, Rung.IDLE, Rung.CACHED]
    assert sizes[Rung.HOT].replicas == 10
    assert sizes[Rung.CACHED].window_s > sizes[Rung.IDLE].window_s
    assert sizes[Rung.CACHED].quantile > sizes[Rung.HOT].quantile
    assert sizes[Rung.CACHED].cumulative >= sizes[Rung.IDLE].cumulative >= 10
    assert sizes[Rung.CACHED].cumulative * 10.0 >= sizes[Rung.CACHED].covered_rps


def test_a_cheap_idle_rung_holds_replicas_a_dear_one_does_not() -> None:
    dear = ladder_rungs(5.0, 1.0, 2.0, 5.0, 300.0)
    cheap_ladder = size_ladder("m", _forecast(100.0, 130.0), 100.0, T0, 10.0, 11, RUNGS, POLICY)
    dear_ladder = size_ladder("m", _forecast(100.0, 130.0), 100.0, T0, 10.0, 11, dear, POLICY)
    assert cheap_ladder.replicas(Rung.IDLE) > dear_ladder.replicas(Rung.IDLE)


def test_without_a_forecast_only_the_load_seen_now_is_covered() -> None:
    ladder = size_ladder("m", None, 95.0, T0, 10.0, 10, RUNGS, POLICY)
    assert ladder.replicas(Rung.IDLE) == ladder.replicas(Rung.CACHED) == 0


def test_the_warm_rung_covers_the_keep_time_too() -> None:
    rising = Forecast("m", T0, 60, (100.0,) * 8 + (300.0,) * 2, (120.0,) * 8 + (360.0,) * 2, "t")
    short = size_ladder("m", rising, 100.0, T0, 10.0, 10, RUNGS, POLICY)
    kept = size_ladder("m", rising, 100.0, T0, 10.0, 10, RUNGS,
                       LadderPolicy(60, 2.0, keep_s=600))
    assert kept.replicas(Rung.CACHED) > short.replicas(Rung.CACHED)


def test_expected_shortfall_shrinks_as_capacity_grows_and_matches_sampling() -> None:
    values = [expected_shortfall(100, 130, c) for c in (0, 80, 100, 130, 200)]
    assert values == sorted(values, reverse=True) and values[-1] < 1.0
    rng = random.Random(3)
    draws = Durations.lognormal(100, 130)
    sampled = [draws.draw(rng.random()) for _ in range(20_000)]
    monte_carlo = sum(max(0.0, d - 120) for d in sampled) / len(sampled)
    assert expected_shortfall(100, 130, 120) == pytest.approx(monte_carlo, rel=0.1)


def test_durations_from_p50_p90_and_from_samples() -> None:
    lognormal = Durations.lognormal(22.0, 39.0)
    assert lognormal.quantile(0.5) == pytest.approx(22.0, rel=0.02)
    assert lognormal.quantile(0.9) == pytest.approx(39.0, rel=0.03)
    fast, slow = Durations.of([3.0, 2.5, 21.0, 40.0, 3.2]).split(10.0)
    assert fast is not None and slow is not None
    assert fast.samples_s == (2.5, 3.0, 3.2) and slow.samples_s == (21.0, 40.0)
    with pytest.raises(ValueError):
        Durations.lognormal(40.0, 20.0)


@given(u=st.floats(0.0, 1.0))
def test_draws_stay_within_the_samples(u: float) -> None:
    durations = Durations.of([3.0, 22.0, 39.0])
    assert 3.0 <= durations.draw(u) <= 39.0


def _warm_replicas(origin_at: datetime) -> tuple[str, int, int]:
    """(demand reason, idle, cached) sized at T0 for a model seeing 100 rps on 10 replicas of
    10 rps, from a two-hour forecast of 1,000 rps (p50) starting at ``origin_at``."""
    spec = DEMO_MODELS[0]
    model = FleetModel(spec, ReplicaShape(spec.name, spec.tenant, "A100-80GB", 1.0, 10.0),
                       ladder_rungs(2.0, 1.0, 2.0, 10.0, 300.0), 2.0)
    forecast = Forecast(spec.name, origin_at, 60, (1000.0,) * 120, (1200.0,) * 120, "test")
    observed = ObservedState(T0, (), (), (ObservedModel(spec.name, 10, 0, 10, 100.0, 100.0),))
    sized = size(observed, {spec.name: forecast}, [model],
                 predictive_policy(shortfall_cost_ratio=1.5), Budgets(), T0)
    request = sized.requests[0]
    return sized.demands[0].reason, request.idle, request.cached


def test_the_ladder_warms_no_replicas_for_a_forecast_the_demand_refused_as_stale_or_future(
        ) -> None:
    assert _warm_replicas(T0 - timedelta(minutes=40)) == (STALE_FORECAST, 0, 0)
    assert _warm_replicas(T0 + timedelta(minutes=10)) == (FUTURE_FORECAST, 0, 0)
