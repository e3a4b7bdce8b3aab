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


def _ticks(every_s: int, from_s: int, to_s: int, value: int) -> tuple[Recommendation, ...]:
    return tuple(Recommendation(T0 + timedelta(seconds=s), value)
                 for s in range(from_s, to_s + 1, every_s))


def test_a_scale_down_on_a_new_memory_waits_the_whole_window_out() -> None:
    memory: tuple[Recommendation, ...] = ()
    for at_s in range(0, 300, 10):  # a new process: the lower target from its first tick on
        held, memory = stabilize("pool/a", 6, 3, memory, LIMITS, T0 + timedelta(seconds=at_s))
        assert held.allowed == 6 and held.reason == STABILIZATION_WINDOW
    after, _ = stabilize("pool/a", 6, 3, memory, LIMITS, T0 + timedelta(seconds=300))
    assert after.allowed == 3 and after.reason == ""


def test_a_memory_carried_over_that_covers_the_window_scales_down_at_once() -> None:
    carried = _ticks(10, -400, -10, 3)  # a restarted process, its last tick's memory
    decision, memory = stabilize("pool/a", 6, 3, carried, LIMITS, T0)
    assert decision.allowed == 3 and decision.reason == ""
    assert memory[0] == Recommendation(T0 - timedelta(seconds=310), 3)  # in force at its start
    assert memory[1:] == (*_ticks(10, -300, -10, 3), Recommendation(T0, 3))


@given(current=st.integers(0, 50), wanted=st.integers(0, 50),
       history=st.lists(st.tuples(st.integers(0, 600), st.integers(0, 50)), max_size=6))
def test_guards_never_move_more_than_max_step(current: int, wanted: int,
                                              history: list[tuple[int, int]]) -> None:
    memory = tuple(Recommendation(T0 - timedelta(seconds=s), v)
                   for s, v in sorted(history, reverse=True))
    decision, new_memory = stabilize("x", current, wanted, memory, LIMITS, T0)
    assert abs(decision.allowed - current) <= LIMITS.max_step
    assert min(current, wanted) <= decision.allowed <= max(current, wanted)
    assert new_memory[-1] == Recommendation(T0, wanted)
    horizon = T0 - timedelta(seconds=LIMITS.stabilization_s)
    assert len([r for r in new_memory if r.at < horizon]) <= 1  # the one in force at its start


@given(current=st.integers(1, 50), drop=st.integers(1, 50),
       made_s=st.lists(st.integers(0, 299), max_size=8))
def test_no_scale_down_before_the_memory_covers_the_window(
        current: int, drop: int, made_s: list[int]) -> None:
    """Recommendations made only within the window, however low, never allow a scale-down."""
    memory = tuple(Recommendation(T0 - timedelta(seconds=s), 0)
                   for s in sorted(made_s, reverse=True))
    decision, _ = stabilize("x", current, max(0, current - drop), memory, LIMITS, T0)
    assert decision.allowed == current and decision.reason == STABILIZATION_WINDOW


@given(current=st.integers(1, 50), drop=st.integers(1, 50), start_s=st.integers(300, 900),
       every_s=st.integers(1, 60))
def test_a_lower_target_held_over_the_whole_window_scales_down(
        current: int, drop: int, start_s: int, every_s: int) -> None:
    wanted = max(0, current - drop)
    memory = _ticks(every_s, -start_s, -1, wanted)
    decision, _ = stabilize("x", current, wanted, memory, LIMITS, T0)
    assert decision.allowed == max(wanted, current - LIMITS.max_step)


def test_a_recommendation_dated_after_a_clock_step_back_holds_one_window_not_the_step() -> None:
    """The leader's clock ran an hour ahead, then stepped back: its high recommendation,
    dated an hour from now, holds the scale-down one window from now, not an hour more."""
    ahead = T0 + timedelta(seconds=3600)
    memory = (*_ticks(10, -400, -10, 6), Recommendation(ahead, 6))
    for at_s in range(0, 301, 10):
        held, memory = stabilize("pool/a", 6, 3, memory, LIMITS, T0 + timedelta(seconds=at_s))
        assert held.allowed == 6 and held.reason == STABILIZATION_WINDOW
    assert all(r.at <= T0 + timedelta(seconds=300) for r in memory)
    after, _ = stabilize("pool/a", 6, 3, memory, LIMITS, T0 + timedelta(seconds=310))
    assert after.allowed == 3 and after.reason == ""


@given(current=st.integers(1, 50), drop=st.integers(1, 50), ahead_s=st.integers(1, 7200),
       every_s=st.integers(1, 60), waited_s=st.integers(0, 600))
def test_a_future_dated_recommendation_holds_a_scale_down_exactly_one_window_from_now(
        current: int, drop: int, ahead_s: int, every_s: int, waited_s: int) -> None:
    """However far ahead the clock was, the guard holds no less than one window after the
    step back (the future record may have been made just before it) and no more."""
    wanted = max(0, current - drop)
    memory = (*_ticks(every_s, -900, -1, wanted),
              Recommendation(T0 + timedelta(seconds=ahead_s), current))
    _, memory = stabilize("x", current, wanted, memory, LIMITS, T0)
    decision, _ = stabilize("x", current, wanted, memory, LIMITS,
                            T0 + timedelta(seconds=waited_s))
    if waited_s <= LIMITS.stabilization_s:
        assert decision.allowed == current and decision.reason == STABILIZATION_WINDOW
    else:
        assert decision.allowed == max(wanted, current - LIMITS.max_step)


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
