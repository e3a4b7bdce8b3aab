"""PlanFleet time-slices whole GPUs among NONE-isolation models that each need a fraction of one
(DESIGN.md "Sharing mode choice"), within the latency rule and never oversubscribing memory."""

from __future__ import annotations

import pytest
from fleet_builders import check_plan

from scheduler.domain.fleet import plan_fleet
from scheduler.domain.fleet_types import FleetPlan, FleetRequest, GpuPool, ModelDemand, ProfilePoint
from scheduler.domain.milp import MilpSolver
from scheduler.domain.model import Isolation, SharingMode
from scheduler.highs import HighsSolver

L4 = (GpuPool("L4", 20, 0.8),)
SOLVERS = pytest.mark.parametrize("solver", [HighsSolver(), None], ids=["milp", "greedy"])


def small(name: str, isolation: Isolation = Isolation.NONE, memory_mib: int = 4_000,
          latency_ms: float = 20.0, rate_rps: float = 5.0) -> ModelDemand:
    """A model that needs an eighth of an L4 (40 rps on the whole GPU at ``latency_ms``)."""
    point = ProfilePoint("L4", 0, 4, 1, 40.0, latency_ms, memory_mib)
    return ModelDemand(name, "t", isolation, rate_rps, 500.0, (point,))


def plan(*models: ModelDemand, solver: MilpSolver | None,
         previous: FleetPlan | None = None) -> tuple[FleetPlan, FleetRequest]:
    req = FleetRequest(models, L4)
    out = plan_fleet(req, 1, previous=previous, solver=solver)
    check_plan(out.plan, req)
    return out.plan, req


@SOLVERS
def test_none_models_that_each_need_a_fraction_of_a_gpu_share_one_time_sliced_gpu(
        solver: MilpSolver | None) -> None:
    got, _ = plan(*(small(f"dev-{i}") for i in range(4)), solver=solver)
    assert len(got.gpus) == 1
    segments = got.gpus[0].segments
    assert [s.model for s in segments] == ["dev-0", "dev-1", "dev-2", "dev-3"]
    assert {s.mode for s in segments} == {SharingMode.TIME_SLICING}
    # each gets a quarter of the GPU's time, less 10 % for the context switches
    assert [s.throughput_rps for s in segments] == [pytest.approx(40.0 * 0.9 / 4)] * 4
    assert [s.latency_ms for s in segments] == [pytest.approx(20.0 * 4 / 0.9)] * 4
    assert got.cost_per_hour == pytest.approx(0.8)


@SOLVERS
@pytest.mark.parametrize("isolation", [Isolation.STRICT, Isolation.TRUSTED])
def test_strict_and_trusted_models_are_never_time_sliced(
        solver: MilpSolver | None, isolation: Isolation) -> None:
    got, _ = plan(*(small(f"m-{i}", isolation) for i in range(3)), solver=solver)
    assert len(got.gpus) == 3
    assert all(len(g.segments) == 1 and g.segments[0].mode is SharingMode.EXCLUSIVE
               for g in got.gpus)


@SOLVERS
def test_time_slices_never_oversubscribe_the_gpus_memory(solver: MilpSolver | None) -> None:
    # an L4 has 22,818 MiB usable: two models of 8,000 MiB fit, three (24,000) would not
    got, _ = plan(*(small(f"dev-{i}", memory_mib=8_000) for i in range(4)), solver=solver)
    assert [len(g.segments) for g in got.gpus] == [2, 2]
    assert [s.throughput_rps for g in got.gpus for s in g.segments] == [
        pytest.approx(40.0 * 0.9 / 2)] * 4


@SOLVERS
def test_the_latency_rule_bounds_how_many_ways_a_gpu_is_time_sliced(
        solver: MilpSolver | None) -> None:
    # 50 ms on the whole GPU, SLO 500 ms: a k-way slice takes 50 k / 0.9 ms <= 225 ms, so k <= 4
    got, _ = plan(*(small(f"dev-{i}", latency_ms=50.0, memory_mib=2_000) for i in range(6)),
                  solver=solver)
    assert len(got.gpus) == 2 and max(len(g.segments) for g in got.gpus) <= 4
    assert max(s.latency_ms for g in got.gpus for s in g.segments) <= 225.0


@SOLVERS
def test_a_model_whose_memory_is_not_stated_is_not_time_sliced(
        solver: MilpSolver | None) -> None:
    got, _ = plan(*(small(f"dev-{i}", memory_mib=0) for i in range(2)), solver=solver)
    assert [g.segments[0].mode for g in got.gpus] == [SharingMode.EXCLUSIVE] * 2


@SOLVERS
def test_a_gpu_is_sliced_only_as_many_ways_as_it_holds_replicas(
        solver: MilpSolver | None) -> None:
    # 4,000 MiB each: at most 5 per GPU, so six models take two GPUs; the one with fewer
    # replicas gives each a bigger share (one alone has the whole GPU), never a 5-way share
    got, _ = plan(*(small(f"dev-{i}") for i in range(6)), solver=solver)
    assert len(got.gpus) == 2
    for gpu in got.gpus:
        n = len(gpu.segments)
        for s in gpu.segments:
            if n == 1:
                assert (s.mode, s.throughput_rps, s.latency_ms) == (
                    SharingMode.EXCLUSIVE, 40.0, 20.0)
            else:
                assert s.mode is SharingMode.TIME_SLICING
                assert s.throughput_rps == pytest.approx(40.0 * 0.9 / n)


@SOLVERS
def test_a_model_whose_rate_needs_more_than_a_share_gets_the_replicas_it_needs(
        solver: MilpSolver | None) -> None:
    busy = small("busy", rate_rps=30.0)  # 18 rps per 2-way share: two replicas
    got, _ = plan(busy, small("dev-0"), small("dev-1"), solver=solver)
    capacity = sum(s.throughput_rps for g in got.gpus for s in g.segments if s.model == "busy")
    assert capacity >= 30.0
    assert len(got.gpus) <= 2


@SOLVERS
def test_replanning_the_same_demand_keeps_every_time_sliced_gpu_as_it_was(
        solver: MilpSolver | None) -> None:
    models = [small(f"dev-{i}") for i in range(7)]
    first, _ = plan(*models, solver=solver)
    req = FleetRequest(tuple(models), L4)
    again = plan_fleet(req, 2, previous=first, solver=solver)
    assert again.plan.gpus == first.gpus
    assert (again.relaid_out, again.moved) == (0, 0)


def test_the_solver_time_slices_a_model_only_where_that_saves_a_gpu() -> None:
    # 500 rps at 300 rps per whole L4: two whole GPUs (600 rps), or two 2-way time-sliced GPUs
    # (4 x 135 rps); at equal cost the whole GPUs serve more and their latency does not hang on
    # neighbours. (The greedy fallback counts a slice's share of a GPU, which other models may
    # fill, so it is not held to this.)
    point = ProfilePoint("L4", 0, 64, 1, 300.0, 12.0, 6_000)
    embed = ModelDemand("embed", "t", Isolation.NONE, 500.0, 60.0, (point,))
    got, _ = plan(embed, solver=HighsSolver())
    assert [(len(g.segments), g.segments[0].mode) for g in got.gpus] == [
        (1, SharingMode.EXCLUSIVE)] * 2


@pytest.mark.parametrize(("gpus_per_node", "time_sliced"), [(1, True), (4, False)])
def test_on_nodes_of_several_gpus_a_time_sliced_kind_must_pay_for_a_node_of_its_own(
        gpus_per_node: int, time_sliced: bool) -> None:
    # a STRICT model on two whole L4s and two small dev models: time-sliced, the dev models
    # take one GPU (3 GPUs); but a node carries one device-plugin config, so on 4-GPU nodes that
    # GPU needs a second node, where two more whole GPUs fit on the first one
    busy = small("busy", Isolation.STRICT, rate_rps=60.0)
    req = FleetRequest((busy, small("dev-0"), small("dev-1")),
                       (GpuPool("L4", 20, 0.8, gpus_per_node),))
    out = plan_fleet(req, 1, solver=HighsSolver())
    check_plan(out.plan, req)
    modes = {s.model: s.mode for g in out.plan.gpus for s in g.segments}
    assert (modes["dev-0"] is SharingMode.TIME_SLICING) is time_sliced
    assert len(out.plan.gpus) == (3 if time_sliced else 4)


def test_time_sliced_kinds_never_need_more_nodes_than_the_pool_has() -> None:
    # two nodes of 4 L4s: a STRICT model takes 5 whole GPUs, so five dev models could share one
    # time-sliced GPU only on a third node, which the pool does not have; the plan stays within
    # two nodes and leaves the fewest models unplaced (one: the STRICT model, whose 5 GPUs would
    # leave no node for the others, or two dev models), saying so
    busy = small("busy", Isolation.STRICT, rate_rps=180.0)
    req = FleetRequest((busy, *(small(f"dev-{i}") for i in range(5))),
                       (GpuPool("L4", 8, 0.8, 4),))
    out = plan_fleet(req, 1, solver=HighsSolver())
    check_plan(out.plan, req)
    kinds: dict[int, int] = {}
    for gpu in out.plan.gpus:
        sliced = sum(s.mode is SharingMode.TIME_SLICING for s in gpu.segments)
        kinds[sliced] = kinds.get(sliced, 0) + 1
    assert sum(-(-n // 4) for n in kinds.values()) <= 2, kinds
    assert len(out.plan.unplaced) == 1 and "pool_max_gpus" in out.plan.unplaced[0]
