"""GPU Feature Discovery's ``nvidia.com/gpu.product`` labels name catalog products everywhere:
a serving layer syncs its nodes with the label it reads off them, and an operator copies it
into a pool's product."""

from __future__ import annotations

import pytest
from placement_builders import make_node, make_place

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain import catalog
from scheduler.domain.cluster import product_key
from scheduler.engine import PlacementEngine

# exact GFD labels (the NVML device name with its spaces as dashes) of catalog products
LABELS = [
    ("NVIDIA-A100-80GB-PCIe", "A100-80GB"),
    ("NVIDIA-A100-PCIE-40GB", "A100-40GB"),
    ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA-H100-PCIe", "H100-80GB"),
    ("NVIDIA-H100", "H100-80GB"),
    ("NVIDIA-H200-NVL", "H200-141GB"),
    ("Tesla-V100-PCIE-32GB", "V100-32GB"),
    ("Tesla-V100-SXM2-16GB", "V100-16GB"),
    ("Tesla-V100-SXM3-32GB", "V100-32GB"),
    ("Tesla-P100-PCIE-16GB", "P100"),
    ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "A100-80GB"),  # MIG strategy single
    ("NVIDIA-L4-SHARED", "L4"),  # a shared (time-sliced or MPS) GPU
    ("NVIDIA-H100-PCIe-SHARED", "H100-80GB"),
    ("NVIDIA-GH200-480GB", "H100-96GB"),  # the superchip's H100 of 96 GB HBM3
    ("NVIDIA-GH200-120GB", "H100-96GB"),
]


@pytest.mark.parametrize(("label", "product"), LABELS)
def test_a_gfd_label_names_its_catalog_product(label: str, product: str) -> None:
    found = catalog.lookup(label)
    assert found is not None and found.name == product


@pytest.mark.parametrize("label", [
    "NVIDIA-H20", "NVIDIA-L40", "NVIDIA-A40", "NVIDIA-GH200-144G-HBM3e", "NVIDIA-H100-64GB",
    "NVIDIA-A100-120GB", "Mystery-GPU", ""])
def test_a_label_of_a_gpu_the_catalog_does_not_hold_stays_unknown(label: str) -> None:
    # a family word is not enough when the label states a size the catalog does not know
    # (an H100 of 64 GB is none of the catalog's) or names another GPU (H20, L40)
    assert catalog.lookup(label) is None


def test_a_label_without_a_size_takes_it_from_the_memory_the_node_reports() -> None:
    found = catalog.lookup("Tesla-V100-PCIE", memory_mib=32_768)
    assert found is not None and found.name == "V100-32GB"
    assert catalog.lookup("Tesla-V100-PCIE").name == "V100-16GB"  # type: ignore[union-attr]


def test_a_label_and_the_catalog_name_are_one_product_key() -> None:
    assert product_key("NVIDIA-A100-80GB-PCIe") == product_key("A100-80GB") == "a100-80gb"


def test_place_finds_the_mig_instances_of_a_gpu_synced_under_its_gfd_label() -> None:
    eng = PlacementEngine()
    eng.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node(
        "a100", gpus=1, product="NVIDIA-A100-80GB-PCIe", gpu_memory_mib=81_920,
        mig_capable=True)]))
    binding = eng.place(make_place("s", gpu_milli=250, products=["A100-80GB"],
                                   isolation=pb.STRICT)).binding
    assert binding.node == "a100"
    assert binding.mode == pb.MIG and binding.mig_profile == "2g.20gb"


def test_plan_fleet_lays_out_mig_on_a_pool_named_by_its_gfd_label() -> None:
    points = [pb.ProfilePoint(product="A100-80GB", compute_slices=g, batch_size=8,
                              mps_processes=1, throughput_rps=100.0 * g, latency_ms=10.0)
              for g in (1, 2, 3, 4, 7)]
    plan = PlacementEngine().plan_fleet(pb.PlanFleetRequest(
        models=[pb.ModelDemand(model="a", tenant="t", isolation=pb.STRICT, rate_rps=150.0,
                               latency_slo_ms=100.0, profile=points)],
        pools=[pb.GpuPool(product="NVIDIA-A100-80GB-PCIe", max_gpus=4,
                          price_per_gpu_hour=4.0)]))
    assert not plan.unplaced
    segments = [s for g in plan.gpus for s in g.segments]
    assert len(plan.gpus) == 1 and {s.mode for s in segments} == {pb.MIG}
    assert sum(s.throughput_rps for s in segments) >= 150.0


def test_a_gh200_pool_is_laid_out_in_its_h100_96gb_mig_profiles() -> None:
    points = [pb.ProfilePoint(product="H100-96GB", compute_slices=g, batch_size=8,
                              mps_processes=1, throughput_rps=100.0 * g, latency_ms=10.0,
                              memory_mib=10_000) for g in (1, 2, 3, 4, 7)]
    plan = PlacementEngine().plan_fleet(pb.PlanFleetRequest(
        models=[pb.ModelDemand(model="a", tenant="t", isolation=pb.STRICT, rate_rps=90.0,
                               latency_slo_ms=100.0, profile=points)],
        pools=[pb.GpuPool(product="NVIDIA-GH200-480GB", max_gpus=2, price_per_gpu_hour=3.0)]))
    assert not plan.unplaced and len(plan.gpus) == 1
    profiles = {s.mig_profile for g in plan.gpus for s in g.segments}
    assert profiles and profiles <= {"1g.12gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"}
