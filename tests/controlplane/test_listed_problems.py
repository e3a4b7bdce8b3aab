"""An input file's problems are listed whole, one a line, up to a cap that counts the rest."""

from __future__ import annotations

from controlplane.domain.errors import SHOWN_PROBLEMS, listed_problems


def test_a_few_problems_are_each_a_line_in_the_order_found() -> None:
    assert listed_problems(["a: bad", "b: worse", "c: worst"]) == "a: bad\nb: worse\nc: worst"


def test_past_the_cap_the_rest_are_counted_on_a_last_line() -> None:
    lines = [f"line {n}: bad" for n in range(SHOWN_PROBLEMS + 7)]
    listed = listed_problems(lines).splitlines()
    assert listed[:SHOWN_PROBLEMS] == lines[:SHOWN_PROBLEMS]
    assert listed[SHOWN_PROBLEMS:] == ["... and 7 more"]


def test_exactly_the_cap_is_listed_whole() -> None:
    lines = [f"line {n}: bad" for n in range(SHOWN_PROBLEMS)]
    assert listed_problems(lines).splitlines() == lines
