"""Guards: scale-up immediate within max step, scale-down only after the stabilization window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from controlplane.domain.guards import (
    MAX_STEP,
    STABILIZATION_WINDOW,
    Change,
    GuardLimits,
    GuardMemory,
    Recommendation,
    newer_memory,
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


def _memory_at(*ats: datetime) -> GuardMemory:
    return GuardMemory((("pool/a", tuple(Recommendation(at, 1) for at in ats)),),
                       (("model/b", (Change(T0, 2),)),))


def test_a_memory_is_as_new_as_its_newest_recommendation_or_change() -> None:
    assert _memory_at(T0 - timedelta(seconds=60), T0 + timedelta(seconds=30)).newest_at == (
        T0 + timedelta(seconds=30))
    assert _memory_at(T0 - timedelta(seconds=60)).newest_at == T0  # the change at T0
    assert GuardMemory().newest_at is None


def test_the_newer_memory_is_the_second_only_when_written_later() -> None:
    early, late = _memory_at(T0), _memory_at(T0 + timedelta(seconds=30))
    assert newer_memory(early, late) is late and newer_memory(late, early) is late
    tie = _memory_at(T0)
    assert newer_memory(early, tie) is early  # a tie keeps the first
    assert newer_memory(GuardMemory(), early) is early
    assert newer_memory(early, GuardMemory()) is early
