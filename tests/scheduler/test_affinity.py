"""CPU pinning of the placement server: the CPU-list parser and its refusals."""

from __future__ import annotations

import pytest

from scheduler.affinity import parse_cpu_list, pin_process


@pytest.mark.parametrize(("text", "cpus"), [
    ("1", {1}), ("0-3", {0, 1, 2, 3}), ("0,2-3", {0, 2, 3}), (" 4 , 1 ", {1, 4}), ("2-2", {2}),
])
def test_a_linux_cpu_list_parses_to_its_cpus(text: str, cpus: set[int]) -> None:
    assert parse_cpu_list(text) == frozenset(cpus)


@pytest.mark.parametrize(("text", "named"), [
    ("", "''"), ("a", "'a'"), ("1-", "'1-'"), ("-1", "'-1'"), ("0,,1", "''"), ("3-1", "'3-1'"),
])
def test_a_malformed_cpu_list_is_refused_naming_the_bad_part(text: str, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        parse_cpu_list(text)


def test_pinning_to_a_cpu_the_process_may_not_use_is_refused_before_anything_is_pinned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pinned: list[object] = []
    monkeypatch.setattr("os.sched_setaffinity", lambda *args: pinned.append(args))
    with pytest.raises(ValueError, match=r"CPU\(s\) \[7\] not among .* \(0,1\)"):
        pin_process(frozenset({1, 7}), allowed=lambda: {0, 1})
    assert pinned == []


def test_pinning_applies_the_set_to_every_thread_of_the_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pinned: dict[int, frozenset[int]] = {}
    monkeypatch.setattr("os.sched_setaffinity", lambda tid, cpus: pinned.update({tid: cpus}))
    monkeypatch.setattr("scheduler.affinity._threads", lambda: [101, 102, 103])
    assert pin_process(frozenset({0}), allowed=lambda: {0, 1}) == frozenset({0})
    assert pinned == {101: frozenset({0}), 102: frozenset({0}), 103: frozenset({0})}
