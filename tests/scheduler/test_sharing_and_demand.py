"""Sharing-mode choice, the learned demand model and warm-pool sizing."""

from __future__ import annotations

import pytest

from scheduler.domain import catalog
from scheduler.domain.demand_model import DemandModel
from scheduler.domain.model import Isolation, SharingMode, WorkloadSpec
from scheduler.domain.sharing import mig_profile_for, share_mode
from scheduler.domain.warm_pool import ServedModel, demand_rise_rps, size_warm_pools


@pytest.mark.parametrize("isolation, mode", [
    (Isolation.STRICT, SharingMode.EXCLUSIVE), (Isolation.TRUSTED, SharingMode.MPS),
    (Isolation.NONE, SharingMode.TIME_SLICING), (Isolation.UNSPECIFIED, SharingMode.TIME_SLICING),
])
def test_isolation_decides_how_a_share_is_served(isolation: Isolation,
                                                  mode: SharingMode) -> None:
    assert share_mode(isolation) is mode


def test_the_smallest_mig_profile_covering_compute_and_memory_is_chosen() -> None:
    a100 = catalog.lookup("A100-80GB")
    assert a100 is not None
    one = mig_profile_for(a100, 140, 0)
    assert one is not None and one.name == "1g.10gb"
    assert (two := mig_profile_for(a100, 200, 0)) is not None and two.name == "2g.20gb"
    wide = mig_profile_for(a100, 100, 15_000)
    assert wide is not None and wide.name == "1g.20gb"
    t4 = catalog.lookup("T4")
    assert t4 is not None and mig_profile_for(t4, 100, 0) is None


def _spec(k: int, gpus: int, milli: int, cpu: int = 4000) -> WorkloadSpec:
    return WorkloadSpec(f"w{k}", "m", "t", cpu, 8192, gpus, milli, 0, frozenset(),
                        Isolation.UNSPECIFIED)


def test_demand_model_learns_shape_frequencies_and_cpu_per_gpu() -> None:
    model = DemandModel()
    for k in range(300):
        model.observe(_spec(k, 1, 500 if k % 3 else 1000, cpu=6000))
    model.observe(_spec(999, 0, 0, cpu=32_000))  # CPU-only work is not a GPU shape
    snap = model.snapshot()
    shapes = dict(zip(snap.shape_key, snap.weight.tolist(), strict=True))
    assert set(shapes) == {(1, 500), (1, 1000)}
    assert shapes[(1, 500)] == pytest.approx(2 / 3, abs=0.02)
    assert snap.mean_cpu_per_milli == pytest.approx(6000 * 300 / (200 * 500 + 100 * 1000),
                                                    rel=0.02)


def test_warm_pool_covers_the_rise_the_slack_does_not() -> None:
    rise = demand_rise_rps(100.0, 60.0)
    assert rise == pytest.approx(100 * 1.2816 * 0.15)
    served = [ServedModel("a", "A100-80GB", 100.0, 105.0, 10.0, 60.0),
              ServedModel("b", "A100-80GB", 100.0, 200.0, 10.0, 60.0),
              ServedModel("c", "L4", 50.0, 50.0, 25.0, 0.0)]
    pools = size_warm_pools(served, {"A100-80GB": 10, "L4": 10})
    assert [(p.product, p.gpus) for p in pools] == [("A100-80GB", 2)]
    assert "a +14.2 rps" in pools[0].reason and "b " not in pools[0].reason


def test_warm_pool_is_capped_by_the_room_left_in_the_pool() -> None:
    served = [ServedModel("a", "A100-80GB", 1000.0, 1000.0, 10.0, 300.0)]
    (pool,) = size_warm_pools(served, {"A100-80GB": 3})
    assert pool.gpus == 3 and "capped" in pool.reason
