"""GPU layouts drawn to scale on the MIG memory-slice axis."""

from __future__ import annotations

import pytest

from dashboard.layout import Placed, gpu_rects, memory_slices


@pytest.mark.parametrize(("product", "profile", "g", "slices"), [
    ("A100-80GB", "1g.10gb", 1, 1), ("A100-80GB", "1g.20gb", 1, 2), ("A100-80GB", "2g.20gb", 2, 2),
    ("A100-80GB", "3g.40gb", 3, 4), ("A100-80GB", "4g.40gb", 4, 4), ("A100-80GB", "7g.80gb", 7, 8),
    ("A100-40GB", "1g.10gb", 1, 2), ("H200-141GB", "3g.71gb", 3, 4), ("H100-94GB", "1g.12gb", 1, 1),
    ("Mystery", "", 3, 4),
])
def test_a_profile_covers_the_memory_slices_nvidia_places_it_on(product: str, profile: str,
                                                                g: int, slices: int) -> None:
    assert memory_slices(product, profile, g) == slices


def test_a_3g_at_start_4_with_2g_and_two_1g_tiles_the_whole_gpu() -> None:
    rects = gpu_rects("A100-80GB", [Placed("a", "mig", "3g.40gb", 4, 3),
                                    Placed("b", "mig", "2g.20gb", 0, 2),
                                    Placed("c", "mig", "1g.10gb", 2, 1),
                                    Placed("c", "mig", "1g.10gb", 3, 1)])
    spans = sorted((r.x0, r.x1) for r in rects)
    assert spans == [(0.0, 0.25), (0.25, 0.375), (0.375, 0.5), (0.5, 1.0)]


def test_mps_replicas_on_one_mig_slice_split_that_slice() -> None:
    rects = gpu_rects("A100-80GB", [Placed("a", "mps", "3g.40gb", 0, 3),
                                    Placed("b", "mps", "3g.40gb", 0, 3)])
    assert [(r.x0, r.x1) for r in rects] == [(0.0, 0.25), (0.25, 0.5)]
    assert rects[1].label == "3g.40gb MPS 2/2"


def test_time_sliced_replicas_split_a_whole_gpu_evenly() -> None:
    rects = gpu_rects("L4", [Placed(m, "time_sliced", "", 0, 0) for m in ("a", "b", "c", "d")])
    assert [round(r.x1 - r.x0, 6) for r in rects] == [0.25] * 4
    assert rects[0].label == "time-slice 1/4"


def test_an_exclusive_replica_is_drawn_as_the_whole_gpu() -> None:
    (rect,) = gpu_rects("H100-80GB", [Placed("llm", "exclusive", "7g.80gb", 0, 0)])
    assert (rect.x0, rect.x1, rect.label) == (0.0, 1.0, "whole GPU")


def test_each_gpu_of_a_tensor_parallel_replica_is_drawn_whole_and_says_which_of_its_gpus() -> None:
    rects = [gpu_rects("H100-80GB", [Placed("llama-70b", "exclusive", "", 0, 0, 4, i)])
             for i in range(4)]
    assert [(r.x0, r.x1, r.label) for (r,) in rects] == [
        (0.0, 1.0, f"GPU {i} of 4 of a replica") for i in range(1, 5)]
