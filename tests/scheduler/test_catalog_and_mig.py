"""GPU catalog and MIG geometry (REFERENCE.md §1)."""

from __future__ import annotations

import pytest

from scheduler.domain import catalog
from scheduler.domain.mig import (
    MigInstance,
    free_start,
    is_valid_layout,
    layout_violations,
    solve_layout,
    valid_size_mixes,
)


def _profile(product: str, name: str) -> catalog.MigProfile:
    found = catalog.lookup(product)
    assert found is not None
    prof = found.profile(name)
    assert prof is not None
    return prof


@pytest.mark.parametrize("name", ["A100-40GB", "A100-80GB", "A30", "H100-80GB", "H100-94GB",
                                  "H200-141GB", "B200", "L4", "L40S", "A10", "A10G", "T4",
                                  "V100-16GB", "V100-32GB", "P100", "G1", "G2", "G3"])
def test_catalog_knows_every_product_of_the_issue_and_the_openb_trace(name: str) -> None:
    assert catalog.lookup(name) is not None


def test_catalog_resolves_aliases_case_insensitively() -> None:
    assert catalog.lookup("v100m16") is catalog.lookup("V100-16GB")
    assert catalog.lookup("NVIDIA-A100-SXM4-80GB") is catalog.lookup("A100-80GB")
    assert catalog.lookup("no-such-gpu") is None


def test_one_g_ten_gb_means_different_geometry_on_a100_40_and_80() -> None:
    assert _profile("A100-40GB", "1g.10gb").memory_slices == 2
    assert _profile("A100-80GB", "1g.10gb").memory_slices == 1


def test_mig_compute_shares_never_sum_above_a_whole_gpu() -> None:
    a100 = catalog.lookup("A100-80GB")
    assert a100 is not None
    assert 7 * a100.mig_milli(1) <= 1000 and a100.mig_milli(7) == 1000


def test_seven_slice_gpus_have_37_valid_size_mixes_and_a30_has_9() -> None:
    a100, a30 = catalog.lookup("A100-80GB"), catalog.lookup("A30")
    assert a100 is not None and a30 is not None
    mixes = valid_size_mixes(a100)
    assert len(mixes) == 37
    assert (3, 3) in mixes and (4, 3) in mixes and (3, 2, 2) in mixes
    assert (4, 4) not in mixes and (3, 3, 1) not in mixes
    assert len(valid_size_mixes(a30)) == 9


def test_three_g_goes_to_start_four_so_the_small_slices_still_fit() -> None:
    a100 = catalog.lookup("A100-80GB")
    assert a100 is not None
    assert free_start(a100, [], _profile("A100-80GB", "3g.40gb")) == 4
    starts = solve_layout(a100, [_profile("A100-80GB", n) for n in
                                 ("2g.20gb", "3g.40gb", "2g.20gb")])
    assert starts is not None and starts[1] == 4


def test_overlapping_or_misplaced_instances_are_reported() -> None:
    a100 = catalog.lookup("A100-80GB")
    assert a100 is not None
    three, one = _profile("A100-80GB", "3g.40gb"), _profile("A100-80GB", "1g.10gb")
    assert is_valid_layout(a100, [MigInstance(three, 4), MigInstance(one, 0)])
    problems = layout_violations(a100, [MigInstance(three, 4), MigInstance(one, 6)])
    assert any("overlaps" in p for p in problems)
    assert any("cannot start" in p for p in layout_violations(a100, [MigInstance(three, 2)]))


def test_no_layout_exists_beyond_the_compute_slices() -> None:
    a100 = catalog.lookup("A100-80GB")
    assert a100 is not None
    four = _profile("A100-80GB", "4g.40gb")
    assert solve_layout(a100, [four, four]) is None
