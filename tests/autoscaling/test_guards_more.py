"""Guards with state in and out: hysteresis, stale-data hold, cooldown, disruption budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.domain.demand import Demand
from controlplane.domain.desired import DesiredState, DesiredTarget
from controlplane.domain.guards import (
    COOLDOWN,
    DISRUPTION_BUDGET,
    STALE_DATA,
    TOLERANCE,
    Change,
    GuardLimits,
    GuardMemory,
    guard,
)
from controlplane.domain.observed import ObservedModel, ObservedPool, ObservedState
from controlplane.domain.planner import plan

T0 = datetime(2026, 1, 5, tzinfo=UTC)


def test_changes_within_the_tolerance_are_ignored() -> None:
    limits = GuardLimits(max_step=10, stabilization_s=0, tolerance=0.1)
    small, _, _ = guard("m", 20, 22, (), (), limits, T0)
    large, _, _ = guard("m", 20, 23, (), (), limits, T0)
    assert (small.allowed, small.reason) == (20, TOLERANCE)
    assert large.allowed == 23


def test_scale_down_on_stale_data_is_held_but_scale_up_is_not() -> None:
    limits = GuardLimits(max_step=10, stabilization_s=0)
    down, _, _ = guard("m", 8, 4, (), (), limits, T0, fresh=False)
    up, _, _ = guard("m", 8, 12, (), (), limits, T0, fresh=False)
    assert (down.allowed, down.reason) == (8, STALE_DATA)
    assert up.allowed == 12


def test_no_scale_down_during_the_cooldown_after_a_scale_up() -> None:
    limits = GuardLimits(max_step=10, stabilization_s=0, cooldown_s=300)
    _, _, changes = guard("m", 4, 8, (), (), limits, T0)
    held, _, _ = guard("m", 8, 5, (), changes, limits, T0 + timedelta(seconds=120))
    later, _, _ = guard("m", 8, 5, (), changes, limits, T0 + timedelta(seconds=301))
    assert (held.allowed, held.reason) == (8, COOLDOWN)
    assert later.allowed == 5


def test_the_disruption_budget_limits_removals_per_window() -> None:
    limits = GuardLimits(max_step=10, stabilization_s=0, disruption_budget=3,
                         disruption_window_s=600)
    first, _, changes = guard("pool/a", 10, 8, (), (), limits, T0)
    second, _, changes = guard("pool/a", 8, 4, (), changes, limits, T0 + timedelta(minutes=1))
    later, _, _ = guard("pool/a", 7, 4, (), changes, limits, T0 + timedelta(minutes=12))
    assert first.allowed == 8
    assert (second.allowed, second.reason) == (7, DISRUPTION_BUDGET)
    assert later.allowed == 4


@given(steps=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 120)), min_size=1,
                      max_size=12),
       budget=st.integers(0, 6))
def test_removals_never_exceed_the_disruption_budget_in_any_window(
        steps: list[tuple[int, int]], budget: int) -> None:
    limits = GuardLimits(max_step=8, stabilization_s=0, disruption_budget=budget,
                         disruption_window_s=600)
    current, at = 20, T0
    changes: tuple[Change, ...] = ()
    removals: list[tuple[datetime, int]] = []
    for wanted, gap_s in steps:
        at += timedelta(seconds=gap_s)
        decision, _, changes = guard("pool/a", current, wanted, (), changes, limits, at)
        assert abs(decision.allowed - current) <= limits.max_step
        if decision.allowed < current:
            removals.append((at, current - decision.allowed))
        current = decision.allowed
        window = [n for t, n in removals if t > at - timedelta(seconds=600)]
        assert sum(window) <= budget


def test_the_planner_holds_scale_down_of_targets_fed_by_stale_inputs() -> None:
    observed = ObservedState(T0, (ObservedPool("a100", "A100-80GB", 8, 4, 0, 4),), (),
                             (ObservedModel("m", 6, 0, 6, 10.0, 60.0),))
    desired = DesiredState((DesiredTarget("a100", 1, "r"),), (DesiredTarget("m", 2, "r"),),
                           stale=("m", "a100"))
    limits = GuardLimits(max_step=10, stabilization_s=0)
    made, _ = plan(observed, desired, GuardMemory(), limits, limits, T0)
    assert made.is_noop
    assert {s.reason for s in made.skipped} == {STALE_DATA}


def test_a_demand_from_a_stale_forecast_is_not_fresh() -> None:
    assert not Demand("m", 1.0, 1.0, 0.0, "stale_forecast").is_fresh
    assert Demand("m", 1.0, 1.0, 1.0, "forecast_p90").is_fresh


def test_planning_again_at_the_same_now_does_not_count_its_own_removal_twice() -> None:
    limits = GuardLimits(max_step=10, stabilization_s=0, disruption_budget=2,
                         disruption_window_s=600)
    first, history, changes = guard("pool/a", 10, 5, (), (), limits, T0)
    again, _, again_changes = guard("pool/a", 10, 5, history, changes, limits, T0)
    assert first.allowed == again.allowed == 8
    assert again_changes == (Change(T0, -2),)  # the tick's change, recorded once


LIMITS = st.builds(GuardLimits, max_step=st.integers(1, 5),
                   stabilization_s=st.sampled_from([0.0, 300.0]),
                   tolerance=st.sampled_from([0.0, 0.2]), cooldown_s=st.sampled_from([0.0, 120.0]),
                   disruption_budget=st.none() | st.integers(0, 4),
                   disruption_window_s=st.sampled_from([0.0, 600.0]))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(targets=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12), st.booleans()),
                        min_size=1, max_size=3),
       earlier=st.lists(st.tuples(st.integers(1, 600), st.integers(-4, 4)), max_size=3),
       limits=LIMITS)
def test_planning_again_from_the_same_snapshot_and_its_memory_sets_the_same_targets(
        targets: list[tuple[int, int, bool]], earlier: list[tuple[int, int]],
        limits: GuardLimits) -> None:
    observed = ObservedState(T0, (), (), tuple(ObservedModel(f"m{i}", now_at, 0, now_at, 1.0, 1.0)
                                               for i, (now_at, _, _) in enumerate(targets)))
    desired = DesiredState((), tuple(DesiredTarget(f"m{i}", wanted, "r")
                                     for i, (_, wanted, _) in enumerate(targets)),
                           stale=tuple(f"m{i}" for i, (_, _, s) in enumerate(targets) if s))
    past = tuple(Change(T0 - timedelta(seconds=s), d) for s, d in sorted(earlier, reverse=True)
                 if d)
    memory = GuardMemory((), tuple((f"model/m{i}", past) for i in range(len(targets)) if past))
    first, after_first = plan(observed, desired, memory, limits, limits, T0)
    again, after_again = plan(observed, desired, after_first, limits, limits, T0)
    assert [(a.target, a.to_value) for a in again.actions] == [
        (a.target, a.to_value) for a in first.actions]
    assert after_again.changes == after_first.changes
