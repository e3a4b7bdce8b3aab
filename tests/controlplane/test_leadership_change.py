"""The newest change of the ticks' writer is a change of leader (pure): ``headroom status``
names both leaders, the new one's first tick and the previous one's last."""

from __future__ import annotations

from datetime import timedelta

from tick_builders import T0

from controlplane.domain.tick_writers import LeadershipChange, WrittenTick, leadership_change


def _ticks(*writers: str | None) -> list[WrittenTick]:
    """Ticks 30 s apart, oldest first as given, returned newest first."""
    return [WrittenTick(k + 1, T0 + timedelta(seconds=30 * k), w)
            for k, w in enumerate(writers)][::-1]


def test_the_newest_change_of_writer_names_both_writers_and_the_new_leaders_first_tick() -> None:
    assert leadership_change(_ticks("a", "b", "b", "a", "a")) == LeadershipChange(
        "b", T0 + timedelta(seconds=60), "a", 4, T0 + timedelta(seconds=90))


def test_one_writer_no_ticks_or_an_unknown_newest_writer_is_no_change() -> None:
    assert leadership_change(_ticks("a", "a", "a")) is None
    assert leadership_change([]) is None
    assert leadership_change(_ticks("a", None)) is None


def test_the_first_writer_after_ticks_without_one_is_no_change_of_leader() -> None:
    assert leadership_change(_ticks("a", None, "b", "b")) is None
