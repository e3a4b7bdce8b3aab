"""PlanFleet: segments, MIG geometry, fewest GPUs, re-layouts, warm pools, fallbacks."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fleet_builders import check_plan, demand, request
from parvagpu_slo2 import slo2_request

from scheduler.domain.fleet import POOL_TOO_SMALL, plan_fleet
from scheduler.domain.fleet_types import (
    FleetPlan,
    GpuPool,
    ModelDemand,
    ProfilePoint,
    Segment,
    WarmPool,
)
from scheduler.domain.milp import Milp, MilpResult
from scheduler.domain.model import Isolation
from scheduler.highs import HighsSolver

SOLVER = HighsSolver()


def test_small_models_share_one_gpu_through_mig_instances() -> None:
    req = request(demand("a", 90, 100), demand("b", 250, 100), demand("c", 180, 100))
    out = plan_fleet(req, 1, solver=SOLVER)
    check_plan(out.plan, req)
    assert len(out.plan.gpus) == 1 and out.solver_used == "milp"
    assert out.plan.cost_per_hour == 4.0 and out.plan.unplaced == ()


def test_the_plan_uses_the_fewest_gpus_a_valid_geometry_allows() -> None:
    # a needs 4 slices of throughput, b needs 3: exactly one GPU (7 slices), fully used
    req = request(demand("a", 390, 100), demand("b", 290, 100))
    out = plan_fleet(req, 1, solver=SOLVER)
    check_plan(out.plan, req)
    assert len(out.plan.gpus) == 1
    assert sum(s.compute_slices for s in out.plan.gpus[0].segments) == 7


def test_two_three_g_instances_strand_a_slice_so_a_third_model_needs_another_gpu() -> None:
    only_3g = tuple(ProfilePoint("A100-80GB", 3, 8, 1, 300.0, 10.0) for _ in range(1))
    models = [ModelDemand(f"m{k}", "t", Isolation.TRUSTED, 250.0, 100.0, only_3g, 0.0)
              for k in range(3)]
    out = plan_fleet(request(*models), 1, solver=SOLVER)
    check_plan(out.plan, request(*models))
    assert len(out.plan.gpus) == 2


def test_the_latency_rule_excludes_slow_shapes() -> None:
    slow = ModelDemand("slow", "t", Isolation.TRUSTED, 10.0, 20.0,
                       (ProfilePoint("A100-80GB", 1, 1, 1, 100.0, 10.0),), 0.0)
    out = plan_fleet(request(slow), 1, solver=SOLVER)
    assert out.plan.gpus == () and out.plan.unplaced[0].startswith("slow: no_profile_meets_slo")


def test_mps_on_a_mig_instance_stays_within_the_instances_share_of_the_client_limit() -> None:
    # CUDA MPS's 48 clients shrink with the instance (REFERENCE.md §1.1): 6 on a 1g of 7
    over = ModelDemand("a", "t", Isolation.TRUSTED, 500.0, 100.0,
                       (ProfilePoint("A100-80GB", 1, 1, 48, 500.0, 10.0),), 0.0)
    out = plan_fleet(request(over), 1, solver=SOLVER)
    assert out.plan.gpus == ()
    assert out.plan.unplaced[0].startswith("a: no_profile_within_mps_client_limit")
    within = replace(over, profile=(ProfilePoint("A100-80GB", 1, 1, 6, 100.0, 10.0),
                                    ProfilePoint("A100-80GB", 1, 1, 7, 500.0, 10.0)))
    out = plan_fleet(request(within), 1, solver=SOLVER)
    check_plan(out.plan, request(within))
    segments = [s for g in out.plan.gpus for s in g.segments]
    assert segments and {(s.mig_profile, s.mps_processes) for s in segments} == {("1g.10gb", 6)}


def test_mps_on_a_gpu_older_than_volta_stays_within_its_sixteen_clients() -> None:
    # pre-Volta MPS serves 16 client contexts per GPU, Volta and later 48
    pools = (GpuPool("P100", 10, 1.46),)
    over = ModelDemand("a", "t", Isolation.TRUSTED, 100.0, 100.0,
                       (ProfilePoint("P100", 0, 1, 24, 200.0, 10.0),), 0.0)
    out = plan_fleet(request(over, pools=pools), 1, solver=SOLVER)
    assert out.plan.gpus == ()
    assert out.plan.unplaced[0].startswith("a: no_profile_within_mps_client_limit")
    within = replace(over, profile=(*over.profile, ProfilePoint("P100", 0, 1, 16, 150.0, 10.0)))
    out = plan_fleet(request(within, pools=pools), 1, solver=SOLVER)
    check_plan(out.plan, request(within, pools=pools))
    assert {s.mps_processes for g in out.plan.gpus for s in g.segments} == {16}


def test_a_model_profiled_on_a_product_without_a_pool_is_unplaced_with_the_reason() -> None:
    req = request(demand("x", 10, 100, product="H100-80GB"))
    out = plan_fleet(req, 1, solver=SOLVER)
    assert out.plan.unplaced == ("x: no_pool_for_profile (no pool offers a product the model "
                                 "was profiled on)",)


def test_pool_limits_leave_models_unplaced_instead_of_overbooking() -> None:
    req = request(demand("big", 2000, 100), demand("small", 50, 100),
                  pools=(GpuPool("A100-80GB", 1, 4.0),))
    out = plan_fleet(req, 1, solver=SOLVER)
    check_plan(out.plan, req)
    assert len(out.plan.gpus) <= 1
    assert any(u.startswith("big: pool_max_gpus") for u in out.plan.unplaced)


def test_cheaper_pools_win_when_both_can_serve() -> None:
    models = (ModelDemand("m", "t", Isolation.NONE, 100.0, 100.0,
                          (ProfilePoint("L4", 0, 8, 1, 120.0, 10.0),
                           ProfilePoint("A100-80GB", 0, 8, 1, 400.0, 10.0)), 0.0),)
    req = request(*models, pools=(GpuPool("A100-80GB", 10, 4.0), GpuPool("L4", 10, 0.8)))
    out = plan_fleet(req, 1, solver=SOLVER)
    check_plan(out.plan, req)
    assert [g.product for g in out.plan.gpus] == ["L4"] and out.plan.cost_per_hour == 0.8


def test_replanning_the_same_demand_relays_out_no_gpu() -> None:
    req = request(demand("a", 900, 100), demand("b", 700, 100), demand("c", 300, 100))
    first = plan_fleet(req, 1, solver=SOLVER)
    second = plan_fleet(req, 2, previous=first.plan, solver=SOLVER)
    check_plan(second.plan, req)
    assert second.relaid_out == 0
    assert {g.gpu_id: g.segments for g in first.plan.gpus} == {
        g.gpu_id: g.segments for g in second.plan.gpus}


def test_a_small_change_keeps_the_other_gpus_layouts() -> None:
    base = [demand(f"m{k}", 600, 100) for k in range(5)]
    first = plan_fleet(request(*base), 1, solver=SOLVER)
    grown = [*base[:4], demand("m4", 1300, 100)]
    second = plan_fleet(request(*grown), 2, previous=first.plan, solver=SOLVER)
    check_plan(second.plan, request(*grown))
    before = {g.gpu_id: sorted((s.compute_slices, s.mig_start) for s in g.segments)
              for g in first.plan.gpus}
    after = {g.gpu_id: sorted((s.compute_slices, s.mig_start) for s in g.segments)
             for g in second.plan.gpus}
    unchanged = [gid for gid in before if after.get(gid) == before[gid]]
    assert len(unchanged) >= len(before) - 1


def _segments(plan: FleetPlan) -> dict[str, frozenset[Segment]]:
    return {g.gpu_id: frozenset(g.segments) for g in plan.gpus}


def test_replanning_the_parvagpu_slo2_demand_keeps_every_segment_on_its_gpu() -> None:
    # the same demand twice must not move models, batches or MPS shares between instances
    # (at equal cost the solver used to pick another segment mix: replica restarts for nothing)
    req = slo2_request()
    first = plan_fleet(req, 1, solver=SOLVER)
    second = plan_fleet(req, 2, previous=first.plan, solver=SOLVER)
    third = plan_fleet(req, 3, previous=second.plan, solver=SOLVER)
    check_plan(second.plan, req)
    assert _segments(second.plan) == _segments(first.plan) == _segments(third.plan)
    assert second.plan.cost_per_hour == first.plan.cost_per_hour == 12.0
    assert (second.relaid_out, second.moved, third.moved) == (0, 0, 0)


def test_a_prior_that_names_models_but_not_their_batches_keeps_each_model_on_its_instance(
        ) -> None:
    # what a restarted engine takes from its inventory: instances and models, no batch/MPS
    req = slo2_request()
    first = plan_fleet(req, 1, solver=SOLVER)
    held = replace(first.plan, gpus=tuple(
        replace(g, segments=tuple(replace(s, batch_size=0, mps_processes=0)
                                  for s in g.segments)) for g in first.plan.gpus))
    second = plan_fleet(req, 2, previous=held, solver=SOLVER)
    assert _segments(second.plan) == _segments(first.plan) and second.moved == 0


def test_a_rise_of_one_parvagpu_model_leaves_the_gpus_that_do_not_serve_it_as_they_were() -> None:
    first = plan_fleet(slo2_request(), 1, solver=SOLVER)
    risen = slo2_request({"vgg16": 1.3})
    second = plan_fleet(risen, 2, previous=first.plan, solver=SOLVER)
    check_plan(second.plan, risen)
    before, after = _segments(first.plan), _segments(second.plan)
    others = [g for g, segs in before.items() if all(s.model != "vgg16" for s in segs)]
    assert others and {g: after.get(g) for g in others} == {g: before[g] for g in others}
    assert second.plan.cost_per_hour == first.plan.cost_per_hour


def test_a_fall_the_segments_still_serve_changes_no_segment() -> None:
    first = plan_fleet(slo2_request(), 1, solver=SOLVER)
    fallen = slo2_request({"resnet50": 0.5, "densenet201": 0.5})
    second = plan_fleet(fallen, 2, previous=first.plan, solver=SOLVER)
    check_plan(second.plan, fallen)
    assert _segments(second.plan) == _segments(first.plan) and second.moved == 0


def test_greedy_fallback_without_a_solver_is_still_valid() -> None:
    req = request(demand("a", 900, 100), demand("b", 250, 100), demand("c", 1800, 100))
    out = plan_fleet(req, 1, solver=None)
    check_plan(out.plan, req)
    assert out.solver_used == "greedy" and out.plan.unplaced == ()


class CutShortSolver:
    """A solver stopped by its time limit holding the trivially feasible incumbent: every
    model left unplaced and no GPU (what HiGHS may hold after 0.05 s on a large fleet)."""

    def solve(self, problem: Milp, time_limit_s: float) -> MilpResult:
        return MilpResult(tuple(1.0 if name.startswith("u[") else 0.0
                                for name in problem.names), optimal=False)


def test_a_solver_cut_short_with_a_poor_incumbent_loses_to_the_greedy_packing() -> None:
    req = request(*(demand(f"m{k}", 150.0 + 40 * k, 100) for k in range(12)))
    out = plan_fleet(req, 1, solver=CutShortSolver(), time_limit_s=0.05)
    check_plan(out.plan, req)
    assert out.plan.unplaced == () and out.solver_used == "greedy" and out.plan.gpus


def test_a_time_limited_solution_better_than_greedy_is_kept() -> None:
    req = request(*(demand(f"m{k}", 150.0 + 40 * k, 100) for k in range(12)))
    optimal = plan_fleet(req, 1, solver=SOLVER)
    greedy = plan_fleet(req, 1, solver=None)
    assert optimal.plan.cost_per_hour < greedy.plan.cost_per_hour  # a case worth a solver

    class TimeLimited:
        def solve(self, problem: Milp, time_limit_s: float) -> MilpResult | None:
            best = SOLVER.solve(problem, time_limit_s)
            assert best is not None
            return MilpResult(best.values, optimal=False)

    out = plan_fleet(req, 1, solver=TimeLimited())
    assert out.solver_used == "milp_time_limited"
    assert out.plan.cost_per_hour == optimal.plan.cost_per_hour


def test_warm_pools_cover_the_rise_during_a_cold_start() -> None:
    req = request(demand("a", 1000, 100, cold_start_s=120.0))
    out = plan_fleet(req, 1, solver=SOLVER)
    (warm,) = out.plan.warm_pools
    assert warm.product == "A100-80GB" and warm.gpus >= 1
    assert warm.reason.startswith("p90_demand_rise_during_cold_start")
    assert out.plan.cost_per_hour == 4.0 * (len(out.plan.gpus) + warm.gpus)


@pytest.mark.parametrize("decided", [(), (WarmPool("A100-80GB", 2, "ladder"),)])
def test_warm_pools_the_caller_decided_are_kept_and_priced_instead_of_sized(
        decided: tuple[WarmPool, ...]) -> None:
    req = replace(request(demand("a", 1000, 100, cold_start_s=120.0)), warm=decided)
    out = plan_fleet(req, 1, solver=SOLVER)
    assert out.plan.warm_pools == decided  # none sized of its own, not even for the cold start
    assert out.plan.cost_per_hour == 4.0 * (len(out.plan.gpus) + sum(w.gpus for w in decided))


def test_strict_models_get_mig_instances_not_mps() -> None:
    strict = ModelDemand("s", "t", Isolation.STRICT, 100.0, 100.0,
                         (ProfilePoint("A100-80GB", 2, 8, 2, 150.0, 10.0),
                          ProfilePoint("A100-80GB", 2, 8, 1, 60.0, 10.0)), 0.0)
    out = plan_fleet(request(strict), 1, solver=SOLVER)
    check_plan(out.plan, request(strict))
    segments = [s for g in out.plan.gpus for s in g.segments]
    assert [(s.mode.value, s.mig_profile, s.mps_processes, s.throughput_rps)
            for s in segments] == [("mig", "2g.20gb", 1, 60.0)] * 2


# a whole A100 serves 60 rps alone or 240 rps under 8 MPS processes; a 1g slice 10 or 40
WHOLE_OR_MPS = (ProfilePoint("A100-80GB", 1, 8, 1, 10.0, 20.0),
                ProfilePoint("A100-80GB", 1, 8, 4, 40.0, 30.0),
                ProfilePoint("A100-80GB", 0, 8, 1, 60.0, 20.0),
                ProfilePoint("A100-80GB", 0, 8, 8, 240.0, 40.0))


def test_a_strict_model_counts_no_mps_throughput_towards_its_rate() -> None:
    strict = ModelDemand("s", "t", Isolation.STRICT, 230.0, 100.0, WHOLE_OR_MPS, 0.0)
    for solver in (SOLVER, None):
        out = plan_fleet(request(strict), 1, solver=solver)
        capacity = check_plan(out.plan, request(strict))
        segments = [s for g in out.plan.gpus for s in g.segments]
        assert all(s.mps_processes == 1 and s.mode.value in ("exclusive", "mig")
                   for s in segments), segments
        assert capacity["s"] >= 230.0 and out.plan.unplaced == ()
        assert len(out.plan.gpus) == 4 and out.plan.cost_per_hour == 16.0


@pytest.mark.parametrize("isolation", [Isolation.TRUSTED, Isolation.NONE],
                         ids=["trusted", "none"])
def test_trusted_and_none_models_still_share_a_gpu_through_mps(isolation: Isolation) -> None:
    model = ModelDemand("m", "t", isolation, 230.0, 100.0, WHOLE_OR_MPS, 0.0)
    out = plan_fleet(request(model), 1, solver=SOLVER)
    check_plan(out.plan, request(model))
    (gpu,) = out.plan.gpus
    assert [(s.mode.value, s.mps_processes, s.throughput_rps) for s in gpu.segments] == [
        ("mps", 8, 240.0)]


def test_a_strict_model_profiled_only_under_mps_is_unplaced_naming_its_isolation() -> None:
    only_mps = tuple(p for p in WHOLE_OR_MPS if p.mps_processes > 1)
    strict = ModelDemand("s", "t", Isolation.STRICT, 30.0, 100.0, only_mps, 0.0)
    for solver in (SOLVER, None):
        out = plan_fleet(request(strict), 1, solver=solver)
        assert out.plan.gpus == () and out.plan.warm_pools == ()
        assert out.plan.unplaced == (
            "s: no_profile_for_isolation (isolation STRICT runs on a MIG instance or a whole "
            "GPU without MPS, and every profiled shape that meets latency <= 0.45 x "
            "latency_slo_ms on a pool product has mps_processes > 1)",)


def test_plans_are_deterministic() -> None:
    req = request(*(demand(f"m{k}", 150 * (k + 1), 90 + k) for k in range(8)))
    assert plan_fleet(req, 1, solver=SOLVER) == plan_fleet(req, 1, solver=SOLVER)


def test_the_solver_prints_nothing_to_stdout(capfd) -> None:  # type: ignore[no-untyped-def]
    req = request(demand("a", 90, 100), demand("b", 250, 100))
    capfd.readouterr()
    out = plan_fleet(req, 1, solver=HighsSolver())
    assert out.solver_used == "milp"
    captured = capfd.readouterr()
    assert captured.out == "" and "HiGHS" not in captured.err


def test_a_rate_no_pool_could_hold_is_unplaced_at_once_whatever_the_numbers() -> None:
    tiny = (ProfilePoint("A100-80GB", 7, 1, 1, 1e-10, 10.0),)
    models = (ModelDemand("overflow", "t", Isolation.NONE, 1e300, 100.0, tiny, 0.0),
              ModelDemand("slow", "t", Isolation.NONE, 1.0, 100.0,
                          (ProfilePoint("A100-80GB", 1, 1, 1, 1e-7, 10.0),), 0.0))
    req = request(*models, pools=(GpuPool("A100-80GB", 100_000, 4.0),))
    for solver in (SOLVER, None):
        out = plan_fleet(req, 1, solver=solver)
        assert out.plan.gpus == ()
        assert sorted(out.plan.unplaced) == ["overflow: " + POOL_TOO_SMALL,
                                             "slow: " + POOL_TOO_SMALL]


def test_huge_and_tiny_rates_that_one_segment_covers_are_planned_not_dropped() -> None:
    models = (ModelDemand("huge", "t", Isolation.NONE, 1e15, 100.0,
                          (ProfilePoint("A100-80GB", 7, 1, 1, 1e15, 10.0),), 0.0),
              ModelDemand("tiny", "t", Isolation.NONE, 1e-300, 100.0,
                          (ProfilePoint("A100-80GB", 7, 1, 1, 50.0, 10.0),), 0.0),
              ModelDemand("many", "t", Isolation.NONE, 1e15, 100.0,
                          (ProfilePoint("A100-80GB", 7, 1, 1, 1e14, 10.0),), 0.0))
    req = request(*models, pools=(GpuPool("A100-80GB", 16, 4.0),))
    for solver in (SOLVER, None):
        out = plan_fleet(req, 1, solver=solver)
        capacity = check_plan(out.plan, req)
        assert out.plan.unplaced == ()
        assert capacity["huge"] >= 1e15 and capacity["tiny"] == 50.0
        assert capacity["many"] >= 1e15 and len(out.plan.gpus) == 12


def test_a_model_whose_profile_serves_nothing_says_so() -> None:
    zero = (ProfilePoint("A100-80GB", 7, 1, 1, 0.0, 10.0),)
    out = plan_fleet(request(ModelDemand("z", "t", Isolation.NONE, 5.0, 100.0, zero, 0.0)), 1,
                     solver=SOLVER)
    assert out.plan.unplaced == ("z: no_profile_serves (every profiled shape has throughput 0)",)


def test_a_model_too_large_for_every_shape_is_unplaced_for_memory_not_latency() -> None:
    points = (ProfilePoint("H100-80GB", 0, 1, 1, 100.0, 10.0, 200_000),
              ProfilePoint("H100-80GB", 3, 1, 1, 100.0, 10.0, 200_000))
    huge = ModelDemand("huge", "t", Isolation.STRICT, 10.0, 100.0, points, 0.0)
    slow = replace(huge, model="slow", latency_slo_ms=20.0)  # 10 ms > 0.45 x 20 ms as well
    out = plan_fleet(request(huge, slow, pools=(GpuPool("H100-80GB", 2, 6.9),)), 1,
                     solver=SOLVER)
    assert out.plan.gpus == ()
    assert out.plan.unplaced[0] == (
        "huge: no_profile_meets_slo (not enough GPU memory: every profiled shape with latency "
        "<= 0.45 x latency_slo_ms on a pool product needs more memory than CUDA can use of it: "
        "200000 MiB on a whole H100-80GB (81152 MiB usable); 200000 MiB on a 3g.40gb of "
        "H100-80GB (37764 MiB usable))")
    assert out.plan.unplaced[1].startswith("slow: no_profile_meets_slo (no profiled shape has "
                                           "latency <= 0.45 x latency_slo_ms")
