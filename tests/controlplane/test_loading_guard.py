"""Which model pods the loading guard holds voluntary disruption off, and when it lets go."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.domain.loading_guard import (
    GuardChange,
    GuardSync,
    ModelPod,
    guard_changes,
    guarded_after,
)

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def pod(name: str = "m-0", *, node: str = "a100-1", ready: bool = False,
        loading_s: float | None = 30.0, guarded_s: float | None = None,
        do_not_disrupt: bool = False) -> ModelPod:
    return ModelPod("models", name, node, ready,
                    None if loading_s is None else NOW - timedelta(seconds=loading_s),
                    None if guarded_s is None else NOW - timedelta(seconds=guarded_s),
                    do_not_disrupt or guarded_s is not None)


def test_a_scheduled_pod_that_is_not_ready_yet_is_guarded_as_loading() -> None:
    assert guard_changes([pod()], NOW, 900.0) == [
        GuardChange("models", "m-0", True, "loading: not ready for 30 s")]


def test_ready_unscheduled_and_never_started_pods_are_not_guarded() -> None:
    pods = [pod("ready", ready=True), pod("pending", node=""), pod("unstarted", loading_s=None)]
    assert guard_changes(pods, NOW, 900.0) == []


def test_a_guarded_pod_is_released_once_it_is_ready() -> None:
    changes = guard_changes([pod(ready=True, guarded_s=120.0)], NOW, 900.0)
    assert [c.render() for c in changes] == ["release models/m-0: ready"]


def test_a_pod_still_loading_is_held_until_the_longest_hold_and_not_guarded_again() -> None:
    held = pod(loading_s=899.0, guarded_s=899.0)
    assert guard_changes([held], NOW, 900.0) == []
    late = NOW + timedelta(seconds=1)
    assert [c.render() for c in guard_changes([held], late, 900.0)] == [
        "release models/m-0: loading_too_long: not ready 900 s after the guard began "
        "(k8s.loading_guard_max_s 900 s)"]
    released = pod(loading_s=900.0)  # the next tick: unmarked, still not ready
    assert guard_changes([released], late, 900.0) == []


def test_a_do_not_disrupt_someone_else_set_is_never_touched() -> None:
    assert guard_changes([pod(do_not_disrupt=True), pod(ready=True, do_not_disrupt=True)],
                         NOW, 900.0) == []


def test_a_hold_of_zero_guards_nothing_and_releases_what_it_guarded() -> None:
    changes = guard_changes([pod("new"), pod("held", guarded_s=10.0)], NOW, 0.0)
    assert [(c.name, c.guard) for c in changes] == [("held", False)]


def test_the_guarded_count_follows_the_changes_written() -> None:
    pods = [pod("new"), pod("held", loading_s=60.0, guarded_s=60.0),
            pod("done", ready=True, guarded_s=120.0), pod("other", do_not_disrupt=True)]
    changes = guard_changes(pods, NOW, 900.0)
    assert [(c.name, c.change, c.why) for c in changes] == [
        ("new", "guard", "loading"), ("done", "release", "ready")]
    assert guarded_after(pods, changes) == 2  # new and held; done let go; other not ours
    assert guarded_after(pods, [c for c in changes if not c.guard]) == 1  # new's guard failed
    assert GuardSync(tuple(changes), 2).lines() == (
        "guard models/new: loading: not ready for 30 s", "release models/done: ready")
