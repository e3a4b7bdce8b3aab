"""PlanFleet places replicas of several GPUs (tensor parallel): whole GPUs, in whole replicas, on
pools whose nodes hold them."""

from __future__ import annotations

from fleet_builders import check_plan
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.convert import fleet_plan_from_pb, fleet_plan_to_pb, fleet_request_from_pb
from scheduler.domain.errors import InvalidArgument
from scheduler.domain.fleet import plan_fleet
from scheduler.domain.fleet_types import FleetRequest, GpuPool, ModelDemand, ProfilePoint
from scheduler.domain.model import Isolation
from scheduler.domain.validate import validate_fleet_request
from scheduler.highs import HighsSolver

SOLVER = HighsSolver()
H100 = "H100-80GB"


def llama_70b(rate_rps: float, *points: ProfilePoint) -> ModelDemand:
    return ModelDemand("llama-70b", "t", Isolation.TRUSTED, rate_rps, 2000.0, points or (
        ProfilePoint(H100, 0, 16, 1, 8.0, 300.0, 70_000, gpus=4),))


def h100s(gpus_per_node: int = 8, max_gpus: int = 32) -> tuple[GpuPool, ...]:
    return (GpuPool(H100, max_gpus, 3.0, gpus_per_node),)


def test_a_replica_of_four_gpus_is_four_whole_gpus_listed_together_and_counted_once() -> None:
    req = FleetRequest((llama_70b(7.0),), h100s())
    plan = plan_fleet(req, 1, solver=SOLVER).plan
    check_plan(plan, req)
    assert [(s.gpus, s.gpu_index, s.throughput_rps) for g in plan.gpus for s in g.segments] == [
        (4, 0, 2.0), (4, 1, 2.0), (4, 2, 2.0), (4, 3, 2.0)]
    assert plan.unplaced == () and plan.cost_per_hour == 12.0


def test_a_rate_over_one_replica_takes_whole_replicas_not_single_gpus() -> None:
    """9 rps at 8 per replica of 4 GPUs: two replicas, 8 GPUs (never 5 GPUs for 10 rps)."""
    for solver in (SOLVER, None):
        req = FleetRequest((llama_70b(9.0),), h100s())
        plan = plan_fleet(req, 1, solver=solver).plan
        check_plan(plan, req)
        assert len(plan.gpus) == 8
        assert sum(s.gpu_index == 0 for g in plan.gpus for s in g.segments) == 2


def test_the_point_that_serves_more_per_gpu_wins_over_more_gpus_per_replica() -> None:
    """8 rps on 4 GPUs (2 per GPU) against 5 rps on 2 GPUs (2.5 per GPU): replicas of 2."""
    req = FleetRequest((llama_70b(10.0, ProfilePoint(H100, 0, 16, 1, 8.0, 300.0, 70_000, gpus=4),
                                  ProfilePoint(H100, 0, 16, 1, 5.0, 300.0, 70_000, gpus=2)),),
                       h100s())
    plan = plan_fleet(req, 1, solver=SOLVER).plan
    check_plan(plan, req)
    assert {s.gpus for g in plan.gpus for s in g.segments} == {2} and len(plan.gpus) == 4


def test_a_pool_whose_nodes_do_not_hold_a_whole_number_of_replicas_leaves_it_unplaced() -> None:
    for gpus_per_node in (2, 6):
        plan = plan_fleet(FleetRequest((llama_70b(4.0),), h100s(gpus_per_node)), 1,
                          solver=SOLVER).plan
        assert plan.gpus == ()
        assert plan.unplaced == (
            "llama-70b: replica_larger_than_node (a replica of several GPUs runs on one node, "
            "and no pool of its product has nodes that hold a whole number of them: 4 GPUs of "
            "H100-80GB; the pool's gpus_per_node must be a multiple of its GPUs)",)


def test_a_pool_too_small_for_one_replica_says_so() -> None:
    plan = plan_fleet(FleetRequest((llama_70b(4.0),), h100s(max_gpus=3)), 1, solver=SOLVER).plan
    assert plan.unplaced == ("llama-70b: pool_max_gpus (not enough GPUs in the pools to serve "
                             "it)",)


def test_replicas_of_several_gpus_never_share_a_gpu_with_mig_or_time_slices() -> None:
    small = ModelDemand("small", "t", Isolation.NONE, 5.0, 200.0,
                        (ProfilePoint(H100, 1, 8, 1, 10.0, 20.0, 8_000),
                         ProfilePoint(H100, 0, 8, 1, 60.0, 20.0, 8_000)))
    req = FleetRequest((llama_70b(12.0), small), h100s())
    for solver in (SOLVER, None):
        plan = plan_fleet(req, 1, solver=solver).plan
        check_plan(plan, req)
        assert sum(1 for g in plan.gpus if g.segments[0].model == "llama-70b") == 8


def test_replanning_keeps_each_replicas_gpus() -> None:
    req = FleetRequest((llama_70b(15.0),), h100s())
    first = plan_fleet(req, 1, solver=SOLVER).plan
    second = plan_fleet(req, 2, previous=first, solver=SOLVER)
    assert second.relaid_out == 0 and second.moved == 0
    assert [(g.gpu_id, g.segments) for g in second.plan.gpus] == [
        (g.gpu_id, g.segments) for g in first.gpus]


def test_the_proto_carries_a_replicas_gpus_both_ways() -> None:
    request = pb.PlanFleetRequest(models=[pb.ModelDemand(
        model="llama-70b", tenant="t", isolation=pb.TRUSTED, rate_rps=7.0, latency_slo_ms=2000,
        profile=[pb.ProfilePoint(product=H100, batch_size=16, mps_processes=1, throughput_rps=8,
                                 latency_ms=300, memory_mib=70_000, gpus=4)])],
        pools=[pb.GpuPool(product=H100, max_gpus=8, price_per_gpu_hour=3, gpus_per_node=8)])
    req = fleet_request_from_pb(request)
    assert req.models[0].profile[0].gpus == 4
    plan = plan_fleet(req, 1, solver=SOLVER).plan
    sent = fleet_plan_to_pb(plan)
    assert [(s.gpus, s.gpu_index) for g in sent.gpus for s in g.segments] == [
        (4, 0), (4, 1), (4, 2), (4, 3)]
    assert fleet_plan_from_pb(sent) == plan
    unset = pb.ProfilePoint(product=H100, batch_size=1, mps_processes=1, throughput_rps=1,
                            latency_ms=1)
    assert fleet_request_from_pb(pb.PlanFleetRequest(models=[pb.ModelDemand(
        model="m", profile=[unset])])).models[0].profile[0].gpus == 1


def test_a_point_of_several_gpus_with_mig_slices_or_mps_is_refused_naming_the_field() -> None:
    for slices, mps, gpus in ((3, 1, 2), (0, 4, 2), (0, 1, -1), (0, 1, 65)):
        point = ProfilePoint(H100, slices, 8, mps, 8.0, 300.0, 0, gpus)
        try:
            validate_fleet_request(FleetRequest((llama_70b(1.0, point),), h100s()))
        except InvalidArgument as e:
            assert e.field == "models[0].profile[0].gpus", e
        else:
            raise AssertionError(f"{point} was accepted")


@st.composite
def tensor_requests(draw: st.DrawFn) -> FleetRequest:
    models = []
    for k in range(draw(st.integers(1, 4))):
        points = tuple(ProfilePoint(H100, 0, 8, 1, draw(st.floats(1, 100)),
                                    draw(st.floats(1, 300)), 0, draw(st.sampled_from([1, 2, 4, 8])))
                       for _ in range(draw(st.integers(1, 3))))
        models.append(ModelDemand(f"m{k}", "t", Isolation.TRUSTED, draw(st.floats(0, 200)),
                                  1000.0, points))
    pools = (GpuPool(H100, draw(st.integers(0, 48)), 3.0, draw(st.sampled_from([0, 1, 2, 4, 8]))),)
    return FleetRequest(tuple(models), pools)


FAST = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(tensor_requests())
def test_every_plan_of_replicas_of_several_gpus_holds_the_contract(req: FleetRequest) -> None:
    for solver in (SOLVER, None):
        out = plan_fleet(req, 1, solver=solver, time_limit_s=5.0)
        check_plan(out.plan, req)
        node = req.pools[0].gpus_per_node
        assert all(node <= 0 or node % s.gpus == 0 for g in out.plan.gpus for s in g.segments)
        warm = sum(w.gpus for w in out.plan.warm_pools)
        assert len(out.plan.gpus) + warm <= req.pools[0].max_gpus
