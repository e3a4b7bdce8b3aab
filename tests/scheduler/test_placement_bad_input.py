"""Malformed and extreme requests to the placement server: INVALID_ARGUMENT naming the field,
or a plan that says why a model is unplaced; a caller that gave up changes nothing."""

from __future__ import annotations

import grpc
import pytest
from placement_builders import make_node

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.engine import PlacementEngine
from scheduler.service import PlacementServicer


def _model(name: str, rate_rps: float, throughput_rps: float = 100.0, slices: int = 7,
           product: str = "A100-80GB") -> pb.ModelDemand:
    point = pb.ProfilePoint(product=product, compute_slices=slices, batch_size=1,
                            mps_processes=1, throughput_rps=throughput_rps, latency_ms=10.0)
    return pb.ModelDemand(model=name, tenant="t", isolation=pb.TRUSTED, rate_rps=rate_rps,
                          latency_slo_ms=100.0, profile=[point])


def _plan(*models: pb.ModelDemand, max_gpus: int = 8, price: float = 4.0,
          pools: tuple[str, ...] = ("A100-80GB",)) -> pb.PlanFleetRequest:
    return pb.PlanFleetRequest(models=list(models), pools=[
        pb.GpuPool(product=p, max_gpus=max_gpus, price_per_gpu_hour=price) for p in pools])


def _per_node(request: pb.PlanFleetRequest, gpus_per_node: int) -> pb.PlanFleetRequest:
    request.pools[0].gpus_per_node = gpus_per_node
    return request


def _warm(request: pb.PlanFleetRequest, product: str, gpus: int) -> pb.PlanFleetRequest:
    """``request`` with one warm pool the caller decided."""
    request.warm.pools.append(pb.WarmPool(product=product, gpus=gpus, reason="ladder"))
    return request


def _refused(call: object, request: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        call(request, timeout=10)  # type: ignore[operator]
    return err.value


@pytest.mark.parametrize(("request_", "field"), [
    (_plan(_model("m", 10.0, slices=5)), "models[0].profile[0].compute_slices"),
    (_plan(_model("m", 10.0, slices=3, product="T4"), pools=("T4",)),
     "models[0].profile[0].compute_slices"),
    (_plan(_model("m", 10.0), pools=("A100-80GB", "a100-80gb")), "pools[1].product"),
    (_plan(_model("m", 10.0), max_gpus=2_147_483_647), "pools[0].max_gpus"),
    (_plan(_model("m", 10.0), price=1e308), "pools[0].price_per_gpu_hour"),
    (_per_node(_plan(_model("m", 10.0)), -1), "pools[0].gpus_per_node"),
    (_per_node(_plan(_model("m", 10.0)), 65), "pools[0].gpus_per_node"),
    (_warm(_plan(_model("m", 10.0)), "A100-80GB", -1), "warm.pools[0].gpus"),
    (_warm(_plan(_model("m", 10.0)), " ", 1), "warm.pools[0].product"),
])
def test_a_malformed_plan_request_is_refused_naming_the_field(
        stub: pb_grpc.PlacementStub, request_: pb.PlanFleetRequest, field: str) -> None:
    err = _refused(stub.PlanFleet, request_)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith(field + ":")
    assert stub.GetPlan(pb.GetPlanRequest(), timeout=5).revision == 0


def test_mps_processes_over_the_mps_client_limit_is_invalid_argument_naming_the_field(
        stub: pb_grpc.PlacementStub) -> None:
    point = pb.ProfilePoint(product="L4", compute_slices=0, batch_size=1, mps_processes=49,
                            throughput_rps=5.0, latency_ms=10.0)
    model = pb.ModelDemand(model="m", tenant="t", isolation=pb.TRUSTED, rate_rps=10.0,
                           latency_slo_ms=100.0, profile=[point])
    err = _refused(stub.PlanFleet, _plan(model, pools=("L4",)))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == ("models[0].profile[0].mps_processes: must be 1 to 48 (CUDA MPS's "
                             "client limit per GPU), got 49")
    assert stub.GetPlan(pb.GetPlanRequest(), timeout=5).revision == 0


def test_rates_no_pool_can_hold_are_unplaced_and_huge_ones_one_segment_covers_are_served(
        stub: pb_grpc.PlacementStub) -> None:
    plan = stub.PlanFleet(_plan(_model("overflow", 1e300, throughput_rps=1e-10),
                                _model("slow", 1.0, throughput_rps=1e-7),
                                _model("huge", 1e15, throughput_rps=1e15)), timeout=30)
    assert sorted(u.split(":")[0] for u in plan.unplaced) == ["overflow", "slow"]
    assert all("pool_max_gpus" in u for u in plan.unplaced)
    assert [s.model for g in plan.gpus for s in g.segments] == ["huge"]


@pytest.mark.parametrize(("rate_rps", "throughput_rps", "cold_start_s"), [
    (1e155, 1e155, 1.0), (1e200, 1e200, 1e200), (1.7e308, 1e308, 1e6)])
def test_huge_finite_rates_and_cold_starts_are_planned_with_at_most_the_pools_room_warm(
        stub: pb_grpc.PlacementStub, rate_rps: float, throughput_rps: float,
        cold_start_s: float) -> None:
    model = _model("m", rate_rps, throughput_rps=throughput_rps)
    model.cold_start_s = cold_start_s
    plan = stub.PlanFleet(_plan(model), timeout=30)
    assert plan.unplaced == [] and plan.revision == 1
    assert len(plan.gpus) + sum(w.gpus for w in plan.warm_pools) <= 8  # the pool's max_gpus


def test_blank_names_in_an_inventory_are_refused_and_the_previous_one_stays(
        stub: pb_grpc.PlacementStub) -> None:
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]), timeout=5)
    blank_node = make_node("   ")
    blank_product = make_node("n1")
    blank_product.gpus[1].product = " "
    for nodes, field in (([make_node("n0"), blank_node], "nodes[1].name"),
                         ([make_node("n0"), make_node("n0 ")], "nodes[1].name"),
                         ([blank_product], "nodes[0].gpus[1].product")):
        err = _refused(stub.SyncInventory, pb.SyncInventoryRequest(nodes=nodes))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.details() or "").startswith(field + ":")
    placed = stub.Place(pb.PlaceRequest(workload_id="w", model="m", tenant="t", cpu_milli=100,
                                        memory_mib=100, num_gpu=1, gpu_milli=1000), timeout=5)
    assert placed.binding.node == "n0"


def test_a_blank_workload_id_is_refused_naming_the_field(stub: pb_grpc.PlacementStub) -> None:
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]), timeout=5)
    err = _refused(stub.Place, pb.PlaceRequest(workload_id="  ", model="m", tenant="t",
                                               cpu_milli=100, memory_mib=100, num_gpu=1,
                                               gpu_milli=1000))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == "workload_id: must not be empty or blank"


class _GoneCaller:
    """A servicer context whose caller has already gone (its deadline passed)."""

    code: grpc.StatusCode | None = None

    def time_remaining(self) -> float:
        return 5.0

    def is_active(self) -> bool:
        return False

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details


def test_a_plan_whose_caller_gave_up_is_not_stored() -> None:
    engine = PlacementEngine()
    servicer = PlacementServicer(engine)
    caller = _GoneCaller()
    servicer.PlanFleet(_plan(_model("m", 50.0)), caller)  # type: ignore[arg-type]
    assert caller.code == grpc.StatusCode.CANCELLED and "not stored" in caller.details
    assert engine.plan_revision == 0


class _LateCaller(_GoneCaller):
    """A Place that waited out its deadline before the servicer ran it."""

    def time_remaining(self) -> float:
        return 0.0


def test_a_place_whose_deadline_passed_before_it_ran_binds_nothing() -> None:
    engine = PlacementEngine()
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]))
    servicer = PlacementServicer(engine)
    caller = _LateCaller()
    request = pb.PlaceRequest(workload_id="w", model="m", tenant="t", cpu_milli=100,
                              memory_mib=100, num_gpu=1, gpu_milli=1000)
    assert servicer.Place(request, caller) == pb.PlaceResponse()  # type: ignore[arg-type]
    assert caller.code == grpc.StatusCode.CANCELLED and "nothing was bound" in caller.details
    assert engine.counts()[0] == 0
    assert engine.place(request).binding.node == "n0"  # the retry is placed
