"""Which plans a cost window holds: every recorded one from its tick (the exact integral the
Cost page and `headroom cost export` bill), or, past the page's read budget, the plan in force
sampled at a step that reads about that many placed GPUs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.cost_reader import PlannedTick, bounded_step_s, held_ticks

T0 = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)


def _tick(i: int, at: datetime, gpus_placed: int = 10) -> PlannedTick:
    return PlannedTick(i, i, at, False, 0, {}, gpus_placed=gpus_placed)


def test_every_plan_is_held_from_its_tick_and_the_one_before_the_window_from_its_start() -> None:
    before = _tick(1, T0 - timedelta(minutes=3))
    burst = _tick(2, T0 + timedelta(minutes=5))  # 7 minutes: between any 20-minute samples
    after = _tick(3, T0 + timedelta(minutes=12))
    at_end = _tick(4, T0 + timedelta(hours=1))
    held = held_ticks([before, burst, after, at_end], T0, T0 + timedelta(hours=1))
    assert held == [(T0, before), (burst.at, burst), (after.at, after)]


def test_a_tick_at_the_windows_start_supersedes_the_one_before() -> None:
    before, first = _tick(1, T0 - timedelta(minutes=3)), _tick(2, T0)
    assert held_ticks([before, first], T0, T0 + timedelta(hours=1)) == [(T0, first)]


def test_a_window_within_the_read_budget_holds_every_plan_and_a_larger_one_is_sampled() -> None:
    ticks = [_tick(i, T0 + timedelta(seconds=30 * i), gpus_placed=24) for i in range(2880)]
    until_at = T0 + timedelta(days=1)
    assert bounded_step_s(ticks, T0, until_at, 2880 * 24) is None
    # 4x the budget: a sample every 4 ticks reads about the budget
    assert bounded_step_s(ticks, T0, until_at, 2880 * 6) == 120.0
