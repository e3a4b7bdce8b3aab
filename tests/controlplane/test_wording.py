"""Counts in words: one of a thing is singular, any other number plural."""

from __future__ import annotations

import pytest

from controlplane.domain.wording import counted


@pytest.mark.parametrize(("count", "text"), [(0, "0 ticks"), (1, "1 tick"), (2, "2 ticks"),
                                             (-1, "-1 ticks")])
def test_a_count_of_one_names_the_thing_in_the_singular_and_any_other_in_the_plural(
        count: int, text: str) -> None:
    assert counted(count, "tick") == text


def test_a_noun_of_several_words_gets_its_plural_on_the_last_word() -> None:
    assert counted(1, "MIG re-layout") == "1 MIG re-layout"
    assert counted(3, "MIG re-layout") == "3 MIG re-layouts"


def test_an_irregular_plural_is_given() -> None:
    assert counted(1, "replica", "replicas") == "1 replica"
    assert counted(2, "state file", "state files") == "2 state files"
    assert counted(2, "entry", "entries") == "2 entries"
