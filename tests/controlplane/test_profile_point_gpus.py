"""A profile point of several GPUs (tensor parallel) as the live loop sizes it: one replica
holds its GPUs and serves its whole throughput, and a model's best point is the one that serves
the most per GPU, so more GPUs per replica win only when they serve more per GPU."""

from __future__ import annotations

import pytest

from controlplane.domain.models import Isolation, ProfilePoint, best_point

H100 = "H100-80GB"


def point(rps: float, gpus: int) -> ProfilePoint:
    return ProfilePoint(H100, 0, 16, 1, rps, 300.0, 70_000, gpus)


def test_a_replica_of_four_gpus_holds_four_and_serves_its_whole_throughput() -> None:
    tp4 = point(8.0, 4)
    assert (tp4.replica_gpu_share, tp4.replica_rps, tp4.replicas_per_segment) == (4.0, 8.0, 1)


def test_the_best_point_serves_the_most_per_gpu_and_on_a_tie_takes_fewer_gpus() -> None:
    # 8 rps on 4 GPUs is 2 a GPU; 5 on 2 is 2.5 a GPU: replicas of 2 GPUs
    assert best_point((point(8.0, 4), point(5.0, 2)), Isolation.TRUSTED, 2000.0).gpus == 2
    assert best_point((point(8.0, 4), point(4.0, 2)), Isolation.TRUSTED, 2000.0).gpus == 2
    assert best_point((point(12.0, 4), point(4.0, 2)), Isolation.TRUSTED, 2000.0).gpus == 4


@pytest.mark.parametrize(("slices", "mps", "gpus", "why"), [
    (3, 1, 2, "a replica of 2 GPUs runs on whole GPUs without MPS (compute_slices 0, "
              "mps_processes 1), got compute_slices 3"),
    (0, 4, 2, "a replica of 2 GPUs runs on whole GPUs without MPS (compute_slices 0, "
              "mps_processes 1), got mps_processes 4"),
    (0, 1, 0, "must be >= 1, got 0"),
])
def test_a_point_of_several_gpus_on_a_mig_instance_or_mps_is_not_a_profile_point(
        slices: int, mps: int, gpus: int, why: str) -> None:
    with pytest.raises(ValueError) as refused:
        ProfilePoint(H100, slices, 16, mps, 8.0, 300.0, 0, gpus)
    assert str(refused.value) == f"profile point on {H100}: gpus: {why}"
