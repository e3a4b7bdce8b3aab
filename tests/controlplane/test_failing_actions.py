"""Which of the newest plan's failed actions keep failing: every deciding tick for 5 minutes,
3 ticks at least; one failure, or a run a success or a dry run ends, is not (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.domain.failing_actions import (
    FAILING_FOR_S,
    FailingAction,
    RecentPlan,
    failing_actions,
)
from controlplane.domain.fleet_status import PlannedAction

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCALE = ("set_replicas", "llama-3-70b")


def _action(ok: bool | None, kind_target: tuple[str, str] = SCALE,
            message: str = "HTTP 500: injected fault 500") -> PlannedAction:
    return PlannedAction(*kind_target, 3, 5, "paused", ok, "" if ok else message)


def _plans(*oks: bool | None, every_s: int = 30) -> list[RecentPlan]:
    """One plan per outcome, oldest first in the arguments, every ``every_s``; newest first."""
    plans = [RecentPlan(k + 1, k + 10, T0 + timedelta(seconds=k * every_s), (_action(ok),))
             for k, ok in enumerate(oks)]
    return plans[::-1]


def test_an_action_failing_on_every_tick_for_five_minutes_is_named_with_its_newest_error(
        ) -> None:
    plans = _plans(True, *[False] * 11)  # failing from T0+30s to T0+330s: 300 s
    assert failing_actions(plans) == (FailingAction(
        "set_replicas", "llama-3-70b", 11, T0 + timedelta(seconds=30), 11,
        "HTTP 500: injected fault 500"),)
    assert failing_actions(plans)[0].describe(plans[0].created_at) == (
        "set_replicas llama-3-70b has failed on each of the last 11 deciding ticks (300 s, "
        "since tick #11): HTTP 500: injected fault 500")


def test_one_failure_or_a_run_shorter_than_the_window_is_not_a_problem() -> None:
    assert failing_actions(_plans(True, True, False)) == ()
    assert failing_actions(_plans(*[False] * 10)) == ()  # 270 s: a sharing change waiting


def test_a_success_or_a_dry_run_in_between_ends_the_run() -> None:
    assert failing_actions(_plans(*[False] * 8, True, *[False] * 4)) == ()
    assert failing_actions(_plans(*[False] * 8, None, *[False] * 4)) == ()


def test_two_ticks_minutes_apart_are_too_few() -> None:
    assert failing_actions(_plans(False, False, every_s=FAILING_FOR_S)) == ()
    assert len(failing_actions(_plans(False, False, False, every_s=FAILING_FOR_S))) == 1


def test_another_target_failing_before_does_not_count_for_this_one() -> None:
    other = ("scale_node_pool", "a100-80gb")
    older = [RecentPlan(k, k, T0 + timedelta(seconds=30 * k), (_action(False, other),))
             for k in range(1, 12)]
    newest = RecentPlan(12, 12, T0 + timedelta(seconds=360), (_action(False),
                                                              _action(False, other)))
    assert [(f.kind, f.target, f.ticks) for f in failing_actions([newest, *older[::-1]])] == [
        ("scale_node_pool", "a100-80gb", 12)]
