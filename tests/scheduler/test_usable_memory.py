"""GPU memory a placement may count on: what CUDA can use of a MIG instance or a whole GPU
(REFERENCE.md §1.3), the same figure for PlanFleet and the online Place API."""

from __future__ import annotations

import pytest

from scheduler.domain import catalog
from scheduler.domain.errors import Infeasible
from scheduler.domain.fleet_options import options_for, pool_infos
from scheduler.domain.fleet_types import GpuPool, ModelDemand, ProfilePoint
from scheduler.domain.model import GpuSpec, Isolation, NodeSpec, SharingMode, WorkloadSpec
from scheduler.domain.placer import OnlinePlacer
from scheduler.domain.usable_memory import (
    MEASURED_MIB,
    profile_usable_mib,
    reported_usable_mib,
    segment_usable_mib,
    whole_usable_mib,
)

#: What the inventory (GFD nvidia.com/gpu.memory) reports for these GPUs, in MiB.
REPORTED_MIB = {"H100-80GB": 81_559, "H200-141GB": 143_771}


def _product(name: str) -> catalog.GpuProduct:
    known = catalog.lookup(name)
    assert known is not None
    return known


def _sizes_planned(product: str, compute_slices: int, memory_mib: int) -> list[int]:
    """The segment sizes PlanFleet may use for a STRICT model of one profile point."""
    point = ProfilePoint(product, compute_slices, 1, 1, 100.0, 10.0, memory_mib)
    demand = ModelDemand("m", "t", Isolation.STRICT, 100.0, 100.0, (point,), 0.0)
    return [o.size for o in options_for(demand, pool_infos([GpuPool(product, 4, 1.0)]))]


def _placed(product: str, milli: int, gpu_memory_mib: int) -> tuple[SharingMode | None, str]:
    """Mode and MIG profile Place gives a STRICT request on one idle GPU of ``product``."""
    gpu = GpuSpec(0, product, REPORTED_MIB[product], True)
    placer = OnlinePlacer([NodeSpec("n", 64_000, 512_000, (gpu,))])
    binding = placer.place(WorkloadSpec("w", "m", "t", 1, 1, 1, milli, gpu_memory_mib,
                                        frozenset(), Isolation.STRICT))
    return binding.mode, binding.mig_profile


def _whole(workload_id: str, gpu_memory_mib: int) -> WorkloadSpec:
    return WorkloadSpec(workload_id, "m", "t", 1, 1, 1, 1000, gpu_memory_mib, frozenset(),
                        Isolation.STRICT)


@pytest.mark.parametrize(("product", "profile", "usable_mib"), [
    ("A100-40GB", "1g.5gb", 4_864), ("A100-40GB", "3g.20gb", 20_096),
    ("H100-80GB", "7g.80gb", 81_152), ("H100-94GB", "7g.94gb", 95_354),
    ("H200-141GB", "1g.18gb", 16_384), ("H200-141GB", "1g.18gb+me", 16_384),
    ("H200-141GB", "2g.35gb", 33_280), ("H200-141GB", "7g.141gb", 143_360)])
def test_a_profile_reference_measured_counts_what_cuda_showed_not_its_name(
        product: str, profile: str, usable_mib: int) -> None:
    prof = _product(product).profile(profile)
    assert prof is not None and prof.memory_mib > usable_mib
    assert profile_usable_mib(_product(product), prof) == usable_mib


def test_every_derived_figure_is_below_its_name_and_a_full_gpu_of_them_fits_the_whole() -> None:
    for product in catalog.PRODUCTS:
        whole = whole_usable_mib(product)
        assert whole < product.memory_mib or product.memory_mib == 0
        for prof in product.mig_profiles:
            usable = profile_usable_mib(product, prof)
            assert 0 < usable < prof.memory_mib, (product.name, prof.name)
            if (product.name, prof.name) not in MEASURED_MIB:  # no more per slice than measured
                assert usable * product.memory_slices <= whole * prof.memory_slices


@pytest.mark.parametrize(("product", "compute_slices", "too_much_mib"), [
    ("H200-141GB", 1, 17_000), ("A100-40GB", 1, 5_000), ("H100-80GB", 0, 81_500),
    ("H200-141GB", 0, 144_000), ("H100-94GB", 0, 96_000)])
def test_plan_fleet_does_not_put_a_model_on_a_shape_cuda_cannot_hold_it_in(
        product: str, compute_slices: int, too_much_mib: int) -> None:
    usable = segment_usable_mib(_product(product), compute_slices)
    assert usable is not None and usable < too_much_mib
    assert _sizes_planned(product, compute_slices, too_much_mib) == []
    assert _sizes_planned(product, compute_slices, usable) == [compute_slices]


def test_place_gives_a_strict_share_an_instance_whose_usable_memory_holds_it() -> None:
    # 17,900 MiB is under 143,771 / 8 but over the 16.00 GiB CUDA sees in a 1g.18gb: the
    # 1g with two memory slices holds it
    assert _placed("H200-141GB", 100, 17_900) == (SharingMode.MIG, "1g.35gb")
    assert _placed("H200-141GB", 100, 16_384) == (SharingMode.MIG, "1g.18gb")


def test_plan_fleet_and_place_agree_on_what_a_3g_instance_holds() -> None:
    usable = segment_usable_mib(_product("H100-80GB"), 3)
    assert usable is not None
    assert _sizes_planned("H100-80GB", 3, usable) == [3]
    assert _placed("H100-80GB", 400, usable) == (SharingMode.MIG, "3g.40gb")
    assert _sizes_planned("H100-80GB", 3, 40_960) == []  # its name's 40 GiB: neither uses 3g
    assert _placed("H100-80GB", 400, 40_960) == (SharingMode.MIG, "7g.80gb")


def test_place_counts_a_whole_gpu_at_what_cuda_can_use_not_what_the_node_reports() -> None:
    h100 = GpuSpec(0, "H100-80GB", REPORTED_MIB["H100-80GB"], False)
    placer = OnlinePlacer([NodeSpec("n", 64_000, 512_000, (h100,))])
    with pytest.raises(Infeasible) as err:
        placer.place(_whole("big", 81_500))
    assert err.value.reason == "insufficient_gpu_memory"
    assert placer.place(_whole("fits", 81_152)).gpu_indices == (0,)


def test_a_gpu_reporting_less_than_the_catalog_counts_its_report() -> None:
    h100 = _product("H100-80GB")
    assert reported_usable_mib(h100, 81_559) == 81_152  # the catalog's usable is the smaller
    assert reported_usable_mib(h100, 40_000) == 40_000  # the node's report is the smaller
    assert reported_usable_mib(h100, 0) == 81_152  # not reported: the catalog's usable
    assert reported_usable_mib(None, 12_345) == 12_345  # unknown product: its report only
    assert reported_usable_mib(None, 0) == 0


@pytest.mark.parametrize(("product", "profile", "usable_mib"), [
    ("A100-80GB", "1g.10gb", 9_728),  # an eighth: A100-40GB 1g.5gb's 0.95
    ("A100-80GB", "3g.40gb", 40_192),  # half: A100-40GB 3g.20gb's 0.981, not 1g's 0.95
    ("A100-80GB", "7g.80gb", 80_384),  # whole: the largest Ampere share measured, half
    ("H100-80GB", "1g.10gb", 9_295),  # an eighth: H200 1g.18gb's 0.908
    ("H100-80GB", "3g.40gb", 37_764)])  # half: H200 2g.35gb's 0.929 (a quarter)
def test_a_derived_figure_takes_the_ratio_measured_at_the_largest_share_no_larger_than_its_own(
        product: str, profile: str, usable_mib: int) -> None:
    prof = _product(product).profile(profile)
    assert prof is not None and (product, profile) not in MEASURED_MIB
    assert profile_usable_mib(_product(product), prof) == usable_mib
