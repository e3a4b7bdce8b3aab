"""Guards: scale-up immediate within max step, scale-down only after the stabilization window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from controlplane.domain.guards import (
    MAX_STEP,
    STABILIZATION_WINDOW,
    GuardLimits,
    Recommendation,
    stabilize,
)

T0 = datetime(2026, 1, 5, tzinfo=UTC)
LIMITS = GuardLimits(max_step=4, stabilization_s=300)


def test_scale_up_is_immediate_within_max_step() -> None:
    decision, _ = stabilize("pool/a", 2, 5, (), LIMITS, T0)
    assert decision.allowed == 5 and decision.reason == ""


def test_scale_up_beyond_max_step_is_clamped_with_reason() -> None:
    decision, _ = stabilize("pool/a", 2, 20, (), LIMITS, T0)
    assert decision.allowed == 6 and decision.reason == MAX_STEP


def test_scale_down_waits_for_the_stabilization_window() -> None:
    memory = (Recommendation(T0 - timedelta(seconds=120), 6),)
    held, memory2 = stabilize("pool/a", 6, 3, memory, LIMITS, T0)
    assert held.allowed == 6 and held.reason == STABILIZATION_WINDOW
    later, _ = stabilize("pool/a", 6, 3, memory2, LIMITS, T0 + timedelta(seconds=301))
    assert later.allowed == 3 and later.reason == ""


def test_budget_clamps_growth() -> None:
    decision, _ = stabilize("pool/a", 3, 10, (), GuardLimits(8, 300, budget=4), T0)
    assert decision.allowed == 4


@given(current=st.integers(0, 50), wanted=st.integers(0, 50),
       history=st.lists(st.tuples(st.integers(0, 600), st.integers(0, 50)), max_size=6))
def test_guards_never_move_more_than_max_step(current: int, wanted: int,
                                              history: list[tuple[int, int]]) -> None:
    memory = tuple(Recommendation(T0 - timedelta(seconds=s), v) for s, v in sorted(history))
    decision, new_memory = stabilize("x", current, wanted, memory, LIMITS, T0)
    assert abs(decision.allowed - current) <= LIMITS.max_step
    assert min(current, wanted) <= decision.allowed <= max(current, wanted)
    assert new_memory[-1] == Recommendation(T0, wanted)
    assert all(r.at >= T0 - timedelta(seconds=LIMITS.stabilization_s) for r in new_memory)
