"""PlacementEngine behaviour through the proto messages the control plane uses."""

from __future__ import annotations

import logging

import pytest
from placement_builders import make_node, make_place, two_node_engine

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import (
    AlreadyExists,
    CallerGone,
    Infeasible,
    InvalidArgument,
    NotReady,
)
from scheduler.engine import PlacementEngine


def test_sync_inventory_reports_nodes_and_gpus() -> None:
    eng = PlacementEngine()
    resp = eng.sync_inventory(pb.SyncInventoryRequest(
        nodes=[make_node("a", gpus=2), make_node("b", gpus=8, product="G2", gpu_memory_mib=0)]))
    assert (resp.nodes, resp.gpus) == (2, 10)


def test_whole_gpu_workload_gets_exclusive_gpus_with_full_milli() -> None:
    eng = two_node_engine()
    binding = eng.place(make_place("w", num_gpu=2, gpu_milli=0)).binding
    assert len(set(binding.gpu_indices)) == 2
    assert binding.gpu_milli == 1000
    assert binding.mode == pb.EXCLUSIVE


def test_share_workload_gets_at_least_what_it_asked() -> None:
    eng = two_node_engine()
    binding = eng.place(make_place("s", gpu_milli=300)).binding
    assert binding.gpu_milli >= 300
    assert binding.mode == pb.TIME_SLICING


def test_duplicate_workload_id_is_already_exists() -> None:
    eng = two_node_engine()
    eng.place(make_place("dup"))
    with pytest.raises(AlreadyExists):
        eng.place(make_place("dup"))


def test_infeasible_workload_is_rejected_with_a_reason() -> None:
    eng = two_node_engine()
    with pytest.raises(Infeasible) as err:
        eng.place(make_place("big", num_gpu=3))
    assert err.value.reason == "no_idle_gpus"


def test_a_place_asking_more_gpu_memory_than_any_gpu_has_says_so() -> None:
    eng = two_node_engine()
    for milli in (1000, 500):
        with pytest.raises(Infeasible) as err:
            eng.place(make_place(f"w{milli}", gpu_milli=milli, gpu_memory_mib=1_000_000))
        assert err.value.reason == "insufficient_gpu_memory"
        assert "1000000 MiB" in str(err.value)


def test_a_place_before_any_inventory_is_not_ready_rather_than_infeasible() -> None:
    eng = PlacementEngine()
    for spec in (make_place("gpu"), make_place("cpu", num_gpu=0, gpu_milli=0)):
        with pytest.raises(NotReady) as err:
            eng.place(spec)
        assert err.value.reason == "no_inventory"
        assert str(err.value) == "no_inventory: the inventory has no node (SyncInventory first)"


def test_a_place_on_a_synced_inventory_without_nodes_is_infeasible_with_the_reason() -> None:
    eng = PlacementEngine()
    eng.sync_inventory(pb.SyncInventoryRequest(nodes=[]))
    for spec in (make_place("gpu"), make_place("cpu", num_gpu=0, gpu_milli=0)):
        with pytest.raises(Infeasible) as err:
            eng.place(spec)
        assert err.value.reason == "no_inventory"
        assert str(err.value) == "no_inventory: the last SyncInventory listed no node"


def test_malformed_request_names_the_field() -> None:
    eng = two_node_engine()
    with pytest.raises(InvalidArgument) as err:
        eng.place(make_place("bad", gpu_milli=1500))
    assert err.value.field == "gpu_milli"


@pytest.mark.parametrize(("request_", "message"), [
    (make_place("cpu", num_gpu=0, gpu_milli=500), "gpu_milli: must be 0 when num_gpu is 0"),
    (make_place("cpu", num_gpu=0, gpu_milli=0, gpu_memory_mib=4096),
     "gpu_memory_mib: must be 0 when num_gpu is 0"),
    (make_place("cpu", num_gpu=0, gpu_milli=0, products=["T4"]),
     "gpu_products: must be empty when num_gpu is 0"),
], ids=["a share", "gpu memory", "gpu products"])
def test_a_cpu_only_place_stating_anything_about_gpus_is_refused_naming_that_field(
        request_: pb.PlaceRequest, message: str) -> None:
    eng = two_node_engine()
    with pytest.raises(InvalidArgument) as err:
        eng.place(request_)
    assert str(err.value) == message
    assert eng.list_bindings(pb.ListBindingsRequest()).bindings == []


def test_a_multi_gpu_place_takes_each_gpu_whole_whatever_share_it_states() -> None:
    """A share is of one GPU: num_gpu 2 with gpu_milli 500 binds two whole GPUs, as the openb
    replay (../shared/bench) counts such pods, and the binding says 1000."""
    binding = two_node_engine().place(make_place("two", num_gpu=2, gpu_milli=500)).binding
    assert (len(binding.gpu_indices), binding.gpu_milli) == (2, 1000)


def test_release_then_place_restores_capacity() -> None:
    eng = two_node_engine()
    for k in range(4):
        eng.place(make_place(f"w{k}"))
    with pytest.raises(Infeasible):
        eng.place(make_place("extra"))
    eng.release(pb.ReleaseRequest(workload_id="w2"))
    eng.release(pb.ReleaseRequest(workload_id="w2"))  # idempotent
    assert eng.place(make_place("extra")).binding.gpu_milli == 1000


def test_gpu_products_restrict_the_node() -> None:
    eng = PlacementEngine()
    eng.sync_inventory(pb.SyncInventoryRequest(
        nodes=[make_node("t4"), make_node("v100", product="V100M32", gpu_memory_mib=32768)]))
    binding = eng.place(make_place("v", products=["V100M32"])).binding
    assert binding.node == "v100"


def _plan_request(rate: float = 250.0) -> pb.PlanFleetRequest:
    points = [pb.ProfilePoint(product="A100-80GB", compute_slices=g, batch_size=8,
                              mps_processes=1, throughput_rps=100.0 * g, latency_ms=10.0)
              for g in (1, 2, 3, 4, 7)]
    return pb.PlanFleetRequest(
        models=[pb.ModelDemand(model="a", tenant="t", isolation=pb.TRUSTED, rate_rps=rate,
                               latency_slo_ms=100.0, profile=points)],
        pools=[pb.GpuPool(product="A100-80GB", max_gpus=10, price_per_gpu_hour=4.0)])


def test_plan_fleet_keeps_the_layout_of_a_given_previous_plan() -> None:
    eng = PlacementEngine()
    previous = pb.FleetPlan(gpus=[pb.GpuAssignment(
        gpu_id="node-7/gpu-3", product="A100-80GB",
        segments=[pb.Segment(model="a", mode=pb.MIG, mig_profile="3g.40gb", mig_start=4,
                             compute_slices=3, batch_size=8, mps_processes=1,
                             throughput_rps=300.0, latency_ms=10.0)])])
    plan = eng.plan_fleet(_plan_request(), previous=previous)
    assert [g.gpu_id for g in plan.gpus] == ["node-7/gpu-3"]
    assert plan.gpus[0].segments[0].mig_start == 4 and plan.revision == 1


def test_plan_fleet_honours_a_short_time_limit() -> None:
    eng = PlacementEngine()
    plan = eng.plan_fleet(_plan_request(), time_limit_s=0.2)
    assert plan.gpus and not plan.unplaced


def test_waiting_for_a_newer_plan_times_out_or_returns_it() -> None:
    eng = PlacementEngine()
    assert eng.wait_for_plan(0, timeout_s=0.05) is None
    eng.plan_fleet(_plan_request())
    found = eng.wait_for_plan(0, timeout_s=0.05)
    assert found is not None and found.revision == 1 == eng.plan_revision


def test_a_fleet_plan_the_caller_no_longer_wants_is_not_stored() -> None:
    engine = PlacementEngine()
    request = pb.PlanFleetRequest(
        models=[pb.ModelDemand(model="m", tenant="t", isolation=pb.TRUSTED, rate_rps=50.0,
                               latency_slo_ms=100.0, profile=[pb.ProfilePoint(
                                   product="A100-80GB", compute_slices=7, batch_size=1,
                                   mps_processes=1, throughput_rps=100.0, latency_ms=10.0)])],
        pools=[pb.GpuPool(product="A100-80GB", max_gpus=2, price_per_gpu_hour=4.0)])
    with pytest.raises(CallerGone):
        engine.plan_fleet(request, still_wanted=lambda: False)
    assert engine.plan_revision == 0 and engine.get_plan().gpus == []
    assert engine.plan_fleet(request, still_wanted=lambda: True).revision == 1


def test_a_place_whose_caller_is_gone_binds_nothing_so_its_retry_is_placed() -> None:
    """A call that waited out its deadline for the engine: binding it would leave the caller a
    binding it never heard of and its retry an ALREADY_EXISTS with no binding."""
    engine = PlacementEngine()
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0", gpus=1)]))
    with pytest.raises(CallerGone, match="nothing was bound"):
        engine.place(make_place("w1"), still_wanted=lambda: False)
    assert engine.counts()[0] == 0
    retried = engine.place(make_place("w1"), still_wanted=lambda: True).binding
    assert retried.workload_id == "w1" and retried.node == "n0"


def _one_gpu(product: str, gpu_memory_mib: int, mig_capable: bool = False
             ) -> pb.SyncInventoryRequest:
    return pb.SyncInventoryRequest(nodes=[make_node("n0", gpus=1, product=product,
                                                    gpu_memory_mib=gpu_memory_mib,
                                                    mig_capable=mig_capable)])


def _bound_ids(eng: PlacementEngine) -> list[str]:
    return [b.workload_id for b in eng.list_bindings(pb.ListBindingsRequest()).bindings]


def _released(resp: pb.SyncInventoryResponse) -> list[tuple[str, str, str]]:
    return [(r.workload_id, r.node, r.reason) for r in resp.released]


def test_a_resync_that_shrinks_a_gpus_memory_keeps_the_shares_that_each_still_fit_and_adds_none(
        ) -> None:
    eng = PlacementEngine()
    eng.sync_inventory(_one_gpu("L4", 24_576))
    for workload_id in ("a", "b"):
        eng.place(make_place(workload_id, gpu_milli=300, gpu_memory_mib=10_000,
                             isolation=pb.TRUSTED))
    resp = eng.sync_inventory(_one_gpu("L4", 12_000))
    # each asked 10,000 MiB of the 12,000 the GPU has now: both run on, the GPU overcommitted
    assert _bound_ids(eng) == ["a", "b"]
    assert (_released(resp), list(resp.overcommitted_nodes)) == ([], ["n0"])
    for milli, memory in ((300, 10_000), (100, 0), (100, 1)):
        with pytest.raises(Infeasible):
            eng.place(make_place("c", gpu_milli=milli, gpu_memory_mib=memory,
                                 isolation=pb.TRUSTED))
    assert eng.sync_inventory(_one_gpu("L4", 12_000)) == resp  # idempotent
    resp = eng.sync_inventory(_one_gpu("L4", 8_000))  # now neither request is met
    assert _released(resp) == [("a", "n0", "insufficient_gpu_memory"),
                               ("b", "n0", "insufficient_gpu_memory")]
    assert _bound_ids(eng) == [] and list(resp.overcommitted_nodes) == []


def test_a_resync_that_leaves_a_node_out_releases_its_bindings_logs_and_reports_them(
        caplog: pytest.LogCaptureFixture) -> None:
    eng = two_node_engine()
    on = {w: eng.place(make_place(w)).binding.node for w in ("w1", "w2", "w3")}
    stays, gone = on["w1"], ({"n0", "n1"} - {on["w1"]}).pop()
    leaving = sorted(w for w, n in on.items() if n == gone)  # 3 GPUs of 2 + 2: not empty
    with caplog.at_level(logging.WARNING, logger="headroom.placement"):
        resp = eng.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node(stays)]))
    assert _released(resp) == [(w, gone, "node_gone") for w in leaving]
    assert [r.detail for r in resp.released] == [f"node {gone} is not in the inventory"
                                                 ] * len(leaving)
    assert all(b.node == stays for b in eng.list_bindings(pb.ListBindingsRequest()).bindings)
    [record] = [r for r in caplog.records if r.name == "headroom.placement"]
    assert record.getMessage() == "placement.inventory_released_bindings"
    assert record.__dict__["workload_ids"] == leaving
    assert eng.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node(stays)])).released == []


def test_a_resync_that_cuts_a_nodes_cpu_keeps_its_exclusive_bindings_and_their_gpus(
        ) -> None:
    def inventory(cpu: int) -> pb.SyncInventoryRequest:
        return pb.SyncInventoryRequest(nodes=[make_node("n", product="L4", cpu_milli=cpu,
                                                        memory_mib=32_000)])

    eng = PlacementEngine()
    eng.sync_inventory(inventory(8000))
    for workload_id in ("x1", "x2"):
        eng.place(make_place(workload_id, cpu_milli=3000))
    resp = eng.sync_inventory(inventory(4000))
    assert (_released(resp), list(resp.overcommitted_nodes)) == ([], ["n"])
    assert [(b.workload_id, list(b.gpu_indices)) for b in eng.list_bindings(
        pb.ListBindingsRequest()).bindings] == [("x1", [0]), ("x2", [1])]
    with pytest.raises(Infeasible):
        eng.place(make_place("y", cpu_milli=0, memory_mib=0))
    eng.release(pb.ReleaseRequest(workload_id="x1"))
    assert list(eng.place(make_place("y", cpu_milli=1000)).binding.gpu_indices) == [0]


def test_a_resync_whose_gpu_has_no_longer_the_mig_profile_drops_the_mig_binding() -> None:
    eng = PlacementEngine()
    eng.sync_inventory(_one_gpu("A100-80GB", 81_920, mig_capable=True))
    assert eng.place(make_place("m", gpu_milli=100, isolation=pb.STRICT)
                     ).binding.mig_profile == "1g.10gb"
    eng.sync_inventory(_one_gpu("A100-80GB", 81_920, mig_capable=True))
    assert _bound_ids(eng) == ["m"]  # the same GPU keeps it
    resp = eng.sync_inventory(_one_gpu("L4", 24_576))
    assert _released(resp) == [("m", "n0", "mig_profile_unavailable")]
    assert _bound_ids(eng) == []
    assert eng.place(make_place("whole")).binding.gpu_milli == 1000  # the GPU is free again


def test_mig_instances_on_a_gpu_never_add_up_to_more_memory_than_the_gpu_reports() -> None:
    eng = PlacementEngine()
    eng.sync_inventory(_one_gpu("A100-80GB", 20_000, mig_capable=True))
    # an instance holds its memory slices' share of what the GPU reports (2,500 MiB a slice
    # here), not its profile's name: 10,000 MiB takes four slices, and only two such fit
    first = eng.place(make_place("s0", gpu_milli=100, gpu_memory_mib=10_000,
                                 isolation=pb.STRICT)).binding
    second = eng.place(make_place("s1", gpu_milli=100, gpu_memory_mib=10_000,
                                  isolation=pb.STRICT)).binding
    assert first.mig_profile == second.mig_profile == "3g.40gb"
    with pytest.raises(Infeasible):
        eng.place(make_place("s2", gpu_milli=100, isolation=pb.STRICT))
    eng.release(pb.ReleaseRequest(workload_id="s0"))
    eng.release(pb.ReleaseRequest(workload_id="s1"))
    with pytest.raises(Infeasible):  # more than the 20,000 MiB the whole GPU reports
        eng.place(make_place("big", gpu_milli=100, gpu_memory_mib=20_001, isolation=pb.STRICT))


@pytest.mark.parametrize(("product", "memory_mib", "clients"), [("P100", 16_384, 16),
                                                                 ("T4", 15_360, 17)])
def test_mps_shares_of_a_gpu_older_than_volta_stop_at_its_sixteen_clients(
        product: str, memory_mib: int, clients: int) -> None:
    # pre-Volta MPS serves 16 client contexts per GPU; a T4 (Turing) takes 48
    eng = PlacementEngine()
    eng.sync_inventory(pb.SyncInventoryRequest(
        nodes=[make_node("n", gpus=1, product=product, gpu_memory_mib=memory_mib)]))
    for k in range(clients):
        binding = eng.place(make_place(f"w{k}", gpu_milli=50, isolation=pb.TRUSTED)).binding
        assert binding.mode == pb.MPS
    if product == "P100":
        with pytest.raises(Infeasible):
            eng.place(make_place("one-more", gpu_milli=50, isolation=pb.TRUSTED))
