"""The health ``headroom status`` judges and the forecast point it shows (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controlplane.domain.fleet_status import (
    FleetStatus,
    LeaseStatus,
    PlanStatus,
    TickSummary,
    forecast_point,
    judge_health,
)

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _status(started_at: datetime | None, tick_status: str = "applied",
            reason: str = "") -> FleetStatus:
    tick = None if started_at is None else TickSummary(
        4, started_at, started_at, tick_status, reason, 8, 10.0, 20.0, True, (), 4)
    return FleetStatus("sqlite:///h.db", tick, None if tick is None else 4, started_at, None, (),
                       (), None, ())


def test_a_tick_within_the_limit_is_healthy_and_its_age_is_from_now() -> None:
    health = judge_health(_status(T0), T0 + timedelta(seconds=90), 90.0)
    assert health.healthy and health.tick_age_s == 90.0


def test_a_simulated_fleets_tick_ahead_of_the_wall_clock_is_not_stale() -> None:
    simulated = replace(_status(T0 + timedelta(minutes=5)),
                        lease=LeaseStatus("sim-fleet", "demo-1", T0, T0, 15, 1))
    health = judge_health(simulated, T0, 90.0)
    assert health.healthy and health.tick_age_s == -300.0


def test_a_running_simulated_fleets_ticks_days_behind_the_wall_clock_are_not_stale() -> None:
    """A demo started with --start days in the past (or resumed later) ticks on its own clock:
    while it renews its lease by the wall clock, the loop is alive."""
    running = replace(_status(T0 - timedelta(days=3)), lease=LeaseStatus(
        "sim-fleet", "demo-1", T0 - timedelta(seconds=20), T0 - timedelta(seconds=3), 15, 1))
    health = judge_health(running, T0, 90.0)
    assert health.healthy
    assert (health.tick_age_s, health.lease_age_s) == (3 * 86400.0, 3.0)


def test_a_stopped_simulated_fleets_old_ticks_are_stale_its_lease_released_or_expired() -> None:
    behind = _status(T0 - timedelta(days=3))
    released = LeaseStatus("sim-fleet", "", T0 - timedelta(hours=1), T0 - timedelta(seconds=3),
                           1, 1)
    crashed = LeaseStatus("sim-fleet", "demo-1", T0 - timedelta(hours=1),
                          T0 - timedelta(seconds=16), 15, 1)  # not renewed for its duration
    for lease in (released, crashed):
        health = judge_health(replace(behind, lease=lease), T0, 90.0)
        assert health.lease_age_s is None
        assert [(p.code, p.message) for p in health.problems] == [
            ("stale_tick", "the last tick (#4) started 259200 s ago, more than 90 s")]


def test_a_simulated_fleets_lease_renewed_longer_ago_than_the_limit_is_stale() -> None:
    running = replace(_status(T0 - timedelta(days=3)), lease=LeaseStatus(
        "sim-fleet", "demo-1", T0 - timedelta(seconds=20), T0 - timedelta(seconds=12), 15, 1))
    health = judge_health(running, T0, 10.0)
    assert [(p.code, p.message) for p in health.problems] == [
        ("stale_tick", "the simulated fleet's lease sim-fleet was renewed 12 s ago, more than "
                       "10 s (its ticks are on its own clock)")]


def test_a_real_loops_tick_further_ahead_than_the_limit_is_a_wrong_clock() -> None:
    assert judge_health(_status(T0 + timedelta(seconds=90)), T0, 90.0).healthy
    health = judge_health(_status(T0 + timedelta(seconds=91)), T0, 90.0)
    assert [(p.code, p.message) for p in health.problems] == [
        ("future_tick", "the last tick (#4) started 91 s after this clock's now, more than "
                        "90 s: the writer's clock or this one is wrong (a stopped loop looks "
                        "alive until the wall clock passes its last tick)")]


def test_a_stale_failed_tick_names_both_problems() -> None:
    health = judge_health(_status(T0, "failed", "source_rejected"),
                          T0 + timedelta(seconds=91), 90.0)
    assert [(p.code, p.message) for p in health.problems] == [
        ("stale_tick", "the last tick (#4) started 91 s ago, more than 90 s"),
        ("failed_tick", "the last tick (#4) failed: source_rejected")]


def test_a_skipped_tick_is_healthy_and_no_tick_is_not() -> None:
    assert judge_health(_status(T0, "skipped", "snapshot_unsynced"), T0, 90.0).healthy
    health = judge_health(_status(None), T0, 90.0)
    assert health.tick_age_s is None
    assert [p.code for p in health.problems] == ["no_tick"]


def test_a_plan_that_leaves_a_model_unplaced_is_unhealthy_and_names_it() -> None:
    unplaced = ("bert-t4: no_pool_for_profile (no pool offers a product the model was "
                "profiled on)",)
    status = replace(_status(T0), plan=PlanStatus(7, 4, T0, 7, False, 0.0, 0, 0, unplaced, (),
                                                  ()))
    health = judge_health(status, T0, 90.0)
    assert [(p.code, p.message) for p in health.problems] == [
        ("unplaced_models", "the newest plan (#7) leaves 1 model(s) unplaced: bert-t4: "
                            "no_pool_for_profile (no pool offers a product the model was "
                            "profiled on)")]


def test_the_forecast_point_is_the_step_ending_twenty_minutes_after_the_origin() -> None:
    p50, p90 = [float(i) for i in range(20)], [float(i) + 0.5 for i in range(20)]
    point = forecast_point("hybrid", "", T0, T0, 60, p50, p90)
    assert point is not None
    assert (point.target_at, point.ahead_s, point.p50_rps, point.p90_rps) == (
        T0 + timedelta(minutes=19), 1200, 19.0, 19.5)
    by_five = forecast_point("hybrid", "", T0, T0, 300, p50[:4], p90[:4])
    assert by_five is not None and (by_five.ahead_s, by_five.p50_rps) == (1200, 3.0)


def test_a_shorter_forecast_shows_its_last_step_and_an_empty_one_none() -> None:
    point = forecast_point("persistence", "too_short", T0, T0, 60, [1.0, 2.0], [3.0, 4.0])
    assert point is not None and (point.ahead_s, point.p50_rps, point.p90_rps) == (120, 2.0, 4.0)
    assert forecast_point("persistence", "", T0, T0, 60, [], []) is None
