from __future__ import annotations

import math

import numpy as np
import pytest

from forecaster.errors import InputError, SeriesError
from forecaster.prepare import (
    grid_index,
    infer_step_s,
    parse_duration_s,
    regularize,
    unusable_problem,
)

S = 10**9


def test_missing_steps_become_gaps_not_zeros() -> None:
    times = np.array([0, 60, 180, 240], dtype=np.int64) * S
    prepared = regularize("m", times, np.array([1.0, 2.0, 4.0, 5.0]))
    assert prepared.series.step_s == 60
    assert math.isnan(prepared.series.values[2])
    assert prepared.series.values[3] == 4.0
    assert prepared.report.gaps == 1


def test_duplicate_timestamp_names_series_and_time() -> None:
    times = np.array([0, 60, 60, 120], dtype=np.int64) * S
    with pytest.raises(SeriesError, match=r"series 'llm-a': duplicate timestamp 1970-01-01T00:01"):
        regularize("llm-a", times, np.ones(4))


def test_out_of_order_rows_are_sorted_and_reported() -> None:
    times = np.array([120, 0, 60], dtype=np.int64) * S
    prepared = regularize("m", times, np.array([3.0, 1.0, 2.0]))
    assert prepared.series.values == (1.0, 2.0, 3.0)
    assert prepared.report.unsorted
    assert "out of order" in prepared.report.warnings()[0]


def test_negative_values_are_clipped_and_nan_is_missing() -> None:
    times = np.arange(4, dtype=np.int64) * 60 * S
    prepared = regularize("m", times, np.array([1.0, -5.0, np.nan, np.inf]))
    assert prepared.series.values[1] == 0.0
    assert math.isnan(prepared.series.values[2]) and math.isnan(prepared.series.values[3])
    assert prepared.report.negatives_clipped == 1
    assert prepared.report.nonfinite == 2


@pytest.mark.parametrize(("values", "problem"), [
    ([np.nan, np.inf], "no numeric values"),
    ([-1.0, -2.0, np.nan], "all 2 numeric value(s) are negative: bad data (a wrong metric or "
                           "sign?), not zero traffic; nothing to forecast"),
    ([0.0, -2.0, 0.0], "no positive value (1 negative, 2 zero): bad data"),
    ([0.0, 0.0], None),  # zero traffic
    ([-1.0, 3.0, np.nan], None),  # a negative glitch among real rates: clipped, counted
], ids=["no finite value", "every value negative", "negatives among zeros", "only zeros",
        "one negative among positives"])
def test_a_series_without_a_positive_value_but_with_a_negative_one_is_unusable(
        values: list[float], problem: str | None) -> None:
    found = unusable_problem(np.array(values))
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem)


def test_samples_within_one_step_are_averaged() -> None:
    times = np.array([0, 60, 61, 120], dtype=np.int64) * S
    prepared = regularize("m", times, np.array([1.0, 2.0, 4.0, 5.0]), step_s=60)
    assert prepared.series.values == (1.0, 3.0, 5.0)
    assert prepared.report.merged == 1


def test_step_is_the_most_common_spacing() -> None:
    times = np.array([0, 300, 600, 1200, 1500], dtype=np.int64) * S
    assert infer_step_s("m", times) == 300


def test_a_step_with_sub_second_jitter_is_the_whole_seconds_it_is_within_five_percent_of(
) -> None:
    times = np.array([0, 60_007, 120_014, 180_021, 240_000], dtype=np.int64) * 1_000_000
    assert infer_step_s("m", times) == 60
    jittered_ms = np.array([400, 59_700, 120_300, 179_800, 240_000, 300_200, 359_600])
    assert infer_step_s("m", jittered_ms.astype(np.int64) * 1_000_000) == 60


def test_rows_a_minute_apart_with_whole_second_jitter_are_a_sixty_second_step_not_fifty_nine(
) -> None:
    offsets_s = [0, 59, 120, 181, 240, 299, 360, 421, 480, 539, 600, 659, 720]  # 59 s: most common
    assert infer_step_s("m", np.array(offsets_s, dtype=np.int64) * S) == 60


def test_a_typical_spacing_off_whole_seconds_by_more_than_one_percent_is_refused() -> None:
    with pytest.raises(SeriesError, match=r"sampling step 30.5s is not a whole number of "
                                          r"seconds$"):  # it would drift off a 30-s grid
        infer_step_s("m", np.arange(200, dtype=np.int64) * 30_500_000_000)
    with pytest.raises(SeriesError, match=r"sampling step 0.5s is not a whole number of "
                                          r"seconds$"):
        infer_step_s("m", np.arange(5, dtype=np.int64) * 500_000_000)
    with pytest.raises(SeriesError, match=r"sampling step 1.5s is not a whole number of "
                                          r"seconds$"):
        infer_step_s("m", np.arange(5, dtype=np.int64) * 1_500_000_000)


def test_jittered_rows_a_step_apart_give_one_value_per_step() -> None:
    offsets_ms = np.array([400, 59_700, 120_300, 179_800, 240_000, 300_200, 359_600, 420_100])
    prepared = regularize("m", offsets_ms.astype(np.int64) * 1_000_000, np.arange(8.0))
    assert prepared.series.step_s == 60
    assert prepared.series.values == tuple(np.arange(8.0))
    assert (prepared.report.merged, prepared.report.gaps) == (0, 0)


def test_a_row_within_five_percent_of_a_grid_time_counts_at_it_and_one_further_off_in_its_step(
) -> None:
    offsets_s = np.array([0.0, 59.7, 60.3, 57.1, 62.9, 56.9, 63.1, 90.0, 119.9])
    index = grid_index(np.rint(offsets_s * S).astype(np.int64), 60 * S, 0.05 * 60 * S)
    assert index.tolist() == [0, 1, 1, 1, 1, 0, 1, 1, 2]


def test_a_single_timestamp_has_no_step() -> None:
    with pytest.raises(SeriesError, match="fewer than two distinct timestamps"):
        infer_step_s("m", np.array([5], dtype=np.int64))


@pytest.mark.parametrize(("text", "seconds"), [("20m", 1200), ("1200s", 1200), ("1h", 3600),
                                               ("7d", 604800), ("90", 90), ("0.5h", 1800)])
def test_durations_parse_to_seconds(text: str, seconds: int) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5m", "10ms", "1.5s"])
def test_bad_durations_say_what_is_expected(text: str) -> None:
    with pytest.raises(InputError, match="--horizon"):
        parse_duration_s(text, "--horizon")


def test_a_duration_of_a_year_is_accepted_and_a_longer_one_refused_naming_the_option() -> None:
    assert parse_duration_s("366d", "--history") == 366 * 86400
    for text in ("367d", "1000000d", "99999999999d", "9" * 400):
        with pytest.raises(InputError, match=r"^--history '[0-9d]+': at most 366 days \(366d\)$"):
            parse_duration_s(text, "--history")
