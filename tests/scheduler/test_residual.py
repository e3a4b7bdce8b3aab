"""The residual of a GPU hole: what the common share sizes cannot fill, and how it steers shares."""

from __future__ import annotations

import numpy as np

from scheduler.domain.model import GpuSpec, Isolation, NodeSpec, WorkloadSpec
from scheduler.domain.placer import OnlinePlacer
from scheduler.domain.residual import common_sizes, residual_milli
from scheduler.domain.scoring import ScoreWeights


def share(wid: str, milli: int) -> WorkloadSpec:
    return WorkloadSpec(wid, "m", "t", 1000, 1024, 1, milli, 0, frozenset(),
                        Isolation.UNSPECIFIED)


def test_a_hole_is_left_with_what_no_sum_of_common_sizes_fills() -> None:
    left = residual_milli([320, 470])
    assert left[790] == 0  # 470 + 320
    assert left[350] == 30  # 320
    assert left[100] == 100  # nothing fits
    assert left[960] == 0  # 320 x 3 = 960
    assert left[999] == 39


def test_an_idle_gpu_and_a_missing_gpu_have_no_residual() -> None:
    left = residual_milli([470])
    assert left[1000] == 0 and left[-1] == 0 and left[0] == 0
    assert left.size == 1002


def test_only_share_sizes_with_enough_of_the_share_requests_are_common() -> None:
    milli = np.array([160, 320, 470, 1000])
    weight = np.array([0.01, 0.2, 0.29, 0.5])
    is_share = milli < 1000
    assert common_sizes(milli, weight, is_share, 0.03) == [320, 470]
    assert common_sizes(milli, weight, is_share, 0.0) == [160, 320, 470]


def test_a_share_joins_the_gpu_whose_hole_the_common_sizes_then_close_best() -> None:
    def placer_after_warmup(weights: ScoreWeights) -> OnlinePlacer:
        placer = OnlinePlacer([NodeSpec("n0", 64_000, 262_144,
                                        tuple(GpuSpec(i, "T4", 0, False) for i in range(2)))],
                              weights)
        for k in range(40):  # 230s and 320s are common, as are 470s and 650s
            for milli in (230, 320, 470, 650):
                placer.demand.observe(share(f"seen{milli}-{k}", milli))
        placer.place(share("big", 650))
        placer.place(share("mid", 470))
        return placer

    placer = placer_after_warmup(ScoreWeights())
    beside = {b.gpu_indices: b.gpu_milli for b in placer.cluster.bindings.values()}
    small = placer.place(share("small", 230))
    # beside the 470 it leaves 300 (a further 230 closes it to 70); beside the 650 it would
    # leave 120, which no common size fills, and take the hole a 320 closes to 30
    assert beside[small.gpu_indices] == 470
    fgd_only = placer_after_warmup(ScoreWeights(residual=0.0))
    beside = {b.gpu_indices: b.gpu_milli for b in fgd_only.cluster.bindings.values()}
    assert beside[fgd_only.place(share("small", 230)).gpu_indices] == 650
