"""The placement gRPC server over a real channel on 127.0.0.1 (port 0)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from parvagpu_slo2 import slo2_pb_request
from placement_builders import make_node, make_place

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler import service
from scheduler.server import DEFAULT_WORKERS, create_server, stop, watch_stream_cap


def _sync(stub: pb_grpc.PlacementStub) -> None:
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0"), make_node("n1")]),
                       timeout=5)


def test_place_and_release_round_trip(stub: pb_grpc.PlacementStub) -> None:
    _sync(stub)
    binding = stub.Place(make_place("w1"), timeout=5).binding
    assert binding.workload_id == "w1" and binding.node in {"n0", "n1"}
    stub.Release(pb.ReleaseRequest(workload_id="w1"), timeout=5)
    stub.Release(pb.ReleaseRequest(workload_id="w1"), timeout=5)


def test_duplicate_id_is_already_exists(stub: pb_grpc.PlacementStub) -> None:
    _sync(stub)
    stub.Place(make_place("w1"), timeout=5)
    with pytest.raises(grpc.RpcError) as err:
        stub.Place(make_place("w1"), timeout=5)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS


def test_infeasible_place_is_resource_exhausted_with_reason(stub: pb_grpc.PlacementStub) -> None:
    _sync(stub)
    with pytest.raises(grpc.RpcError) as err:
        stub.Place(make_place("w1", num_gpu=4), timeout=5)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "no_idle_gpus" in (err.value.details() or "")


def test_a_place_before_any_sync_inventory_is_failed_precondition_not_a_full_fleet(
        stub: pb_grpc.PlacementStub) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stub.Place(make_place("w1"), timeout=5)
    assert (err.value.code(), err.value.details()) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "no_inventory: the inventory has no node (SyncInventory first)")
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[]), timeout=5)
    with pytest.raises(grpc.RpcError) as err:  # synced, and no node: that fleet is full
        stub.Place(make_place("w1"), timeout=5)
    assert (err.value.code(), err.value.details()) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED, "no_inventory: the last SyncInventory listed no node")


def test_a_share_that_fits_nowhere_is_refused_with_what_it_needs_not_invented_free_numbers(
        stub: pb_grpc.PlacementStub) -> None:
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0", gpus=1)]), timeout=5)
    stub.Place(make_place("batch", gpu_milli=700, isolation=pb.NONE), timeout=5)
    refusals = {}
    for cpu_milli, memory_mib in ((0, 0), (500, 0)):
        with pytest.raises(grpc.RpcError) as err:
            stub.Place(make_place(f"w{cpu_milli}", gpu_milli=400, cpu_milli=cpu_milli,
                                  memory_mib=memory_mib, isolation=pb.TRUSTED), timeout=5)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        refusals[cpu_milli] = err.value.details()
    share = "no_gpu_share_fits: no GPU of the allowed products has 400 milli free in mps mode"
    assert refusals == {0: share,
                        500: f"{share} on a node with at least 500 CPU milli and 0 MiB memory free"}


def test_a_stated_gpu_memory_on_gpus_of_unknown_memory_is_refused_naming_that(
        stub: pb_grpc.PlacementStub) -> None:
    stub.SyncInventory(pb.SyncInventoryRequest(
        nodes=[make_node("g", gpus=2, product="G1", gpu_memory_mib=0)]), timeout=5)
    for milli in (1000, 300):
        with pytest.raises(grpc.RpcError) as err:
            stub.Place(make_place(f"w{milli}", gpu_milli=milli, gpu_memory_mib=1000), timeout=5)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (err.value.details() or "").startswith(
            "gpu_memory_unknown: 2 GPU(s) of the allowed products have room for it"), (
            err.value.details())
    assert stub.Place(make_place("w"), timeout=5).binding.node == "g"


def test_an_unserved_product_is_named_as_the_caller_spelled_it(
        stub: pb_grpc.PlacementStub) -> None:
    _sync(stub)
    with pytest.raises(grpc.RpcError) as err:
        stub.Place(make_place("w1", products=["H100-80GB", "MyCustomGPU"]), timeout=5)
    details = err.value.details() or ""
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "no_allowed_gpu_product" in details
    assert "H100-80GB or MyCustomGPU" in details, details


@pytest.mark.parametrize("request_, field", [
    (make_place("", num_gpu=1), "workload_id"),
    (make_place("w", gpu_milli=2000), "gpu_milli"),
    (make_place("w", cpu_milli=-1), "cpu_milli"),
    (make_place("w", num_gpu=-1), "num_gpu"),
    (make_place("w", products=[""]), "gpu_products[0]"),
    (pb.PlaceRequest(workload_id="w", num_gpu=1, lease_s=-5), "lease_s"),
    (pb.PlaceRequest(workload_id="w", num_gpu=1, lease_s=1e300), "lease_s"),
    (pb.PlaceRequest(workload_id="w", num_gpu=1, lease_s=2_592_000.5), "lease_s"),
], ids=["empty-id", "milli-over-1000", "negative-cpu", "negative-gpus", "empty-product",
        "negative-lease", "lease-of-1e300-s", "lease-past-30-days"])
def test_malformed_place_is_invalid_argument_naming_the_field(
        stub: pb_grpc.PlacementStub, request_: pb.PlaceRequest, field: str) -> None:
    _sync(stub)
    with pytest.raises(grpc.RpcError) as err:
        stub.Place(request_, timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith(field)


def test_a_lease_is_bounded_at_30_days_and_the_refusal_says_so(
        stub: pb_grpc.PlacementStub) -> None:
    _sync(stub)
    longest = make_place("longest")
    longest.lease_s = 2_592_000
    assert stub.Place(longest, timeout=5).binding.lease_s == 2_592_000
    absurd = make_place("absurd")
    absurd.lease_s = 1e300
    with pytest.raises(grpc.RpcError) as err:
        stub.Place(absurd, timeout=5)
    assert (err.value.code(), err.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT, "lease_s: must be <= 2592000 (30 days), got 1e+300")
    assert [b.workload_id for b in stub.ListBindings(pb.ListBindingsRequest(),
                                                     timeout=5).bindings] == ["longest"]


LONG_ID = "w" * 20_000


def test_20000_character_values_are_refused_naming_the_field_without_echoing_them(
        stub: pb_grpc.PlacementStub) -> None:
    _sync(stub)
    refusals: list[tuple[Callable[[], object], str]] = [
        (lambda: stub.Place(make_place(LONG_ID), timeout=5),
         "workload_id: is 20000 characters long, at most 317"),
        (lambda: stub.SyncInventory(pb.SyncInventoryRequest(
            nodes=[make_node("n"), make_node(LONG_ID)]), timeout=5),
         "nodes[1].name: is 20000 characters long, at most 253"),
        (lambda: stub.Place(make_place("w2", products=["\u00e9" * 20_000]), timeout=5),
         "gpu_products[0]: is 20000 characters long, at most 64"),
    ]
    for call, details in refusals:
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert (err.value.code(), err.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                           details)
    assert stub.ListBindings(pb.ListBindingsRequest(), timeout=5).bindings == []


def test_health_service_reports_serving() -> None:
    server, port = create_server("127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        health = health_pb2_grpc.HealthStub(channel)
        resp = health.Check(health_pb2.HealthCheckRequest(service="headroom.v1.Placement"),
                            timeout=5)
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        channel.close()
        stop(server, grace_s=1.0)


def _plan_request() -> pb.PlanFleetRequest:
    points = [pb.ProfilePoint(product="A100-80GB", compute_slices=g, batch_size=8,
                              mps_processes=1, throughput_rps=100.0 * g, latency_ms=10.0)
              for g in (1, 2, 3, 4, 7)]
    return pb.PlanFleetRequest(
        models=[pb.ModelDemand(model="a", tenant="t", isolation=pb.TRUSTED, rate_rps=250.0,
                               latency_slo_ms=100.0, profile=points),
                pb.ModelDemand(model="b", tenant="t", isolation=pb.STRICT, rate_rps=380.0,
                               latency_slo_ms=100.0, profile=points, cold_start_s=30.0)],
        pools=[pb.GpuPool(product="A100-80GB", max_gpus=10, price_per_gpu_hour=4.0)])


def test_plan_fleet_stores_the_plan_with_a_new_revision(stub: pb_grpc.PlacementStub) -> None:
    assert stub.GetPlan(pb.GetPlanRequest(), timeout=5).revision == 0
    plan = stub.PlanFleet(_plan_request(), timeout=30)
    assert plan.revision == 1 and not plan.unplaced
    assert sum(s.throughput_rps for g in plan.gpus for s in g.segments if s.model == "b") >= 380
    assert stub.GetPlan(pb.GetPlanRequest(), timeout=5) == plan
    assert stub.PlanFleet(_plan_request(), timeout=30).revision == 2


def test_plan_fleet_serves_a_strict_model_without_mps_and_a_trusted_one_with_it(
        stub: pb_grpc.PlacementStub) -> None:
    # a whole A100 serves 60 rps alone or 240 rps under 8 MPS processes
    points = [pb.ProfilePoint(product="A100-80GB", compute_slices=0, batch_size=8,
                              mps_processes=n, throughput_rps=rps, latency_ms=20.0)
              for n, rps in ((1, 60.0), (8, 240.0))]
    plans = {}
    for isolation in (pb.STRICT, pb.TRUSTED):
        plan = stub.PlanFleet(pb.PlanFleetRequest(
            models=[pb.ModelDemand(model="m", tenant="t", isolation=isolation, rate_rps=230.0,
                                   latency_slo_ms=100.0, profile=points)],
            pools=[pb.GpuPool(product="A100-80GB", max_gpus=10, price_per_gpu_hour=4.0)]),
            timeout=30)
        plans[isolation] = (plan.cost_per_hour, list(plan.unplaced), sorted(
            (pb.SharingMode.Name(s.mode), s.mps_processes, s.throughput_rps)
            for g in plan.gpus for s in g.segments))
    assert plans[pb.STRICT] == (16.0, [], [("EXCLUSIVE", 1, 60.0)] * 4)
    assert plans[pb.TRUSTED] == (4.0, [], [("MPS", 8, 240.0)])
    only_mps = pb.ModelDemand(model="s", tenant="t", isolation=pb.STRICT, rate_rps=30.0,
                              latency_slo_ms=100.0, profile=points[1:])
    plan = stub.PlanFleet(pb.PlanFleetRequest(models=[only_mps], pools=[
        pb.GpuPool(product="A100-80GB", max_gpus=10, price_per_gpu_hour=4.0)]), timeout=30)
    assert not plan.gpus and [u.split(" ", 2)[:2] for u in plan.unplaced] == [
        ["s:", "no_profile_for_isolation"]]


def test_plan_fleet_places_a_replica_of_four_gpus_on_four_gpus_numbered_and_refuses_mig_ones(
        stub: pb_grpc.PlacementStub) -> None:
    tp4 = pb.ProfilePoint(product="H100-80GB", batch_size=16, mps_processes=1,
                          throughput_rps=8.0, latency_ms=300.0, memory_mib=70_000, gpus=4)
    pools = [pb.GpuPool(product="H100-80GB", max_gpus=16, price_per_gpu_hour=3.0,
                        gpus_per_node=8)]
    plan = stub.PlanFleet(pb.PlanFleetRequest(models=[pb.ModelDemand(
        model="llama-70b", tenant="t", isolation=pb.TRUSTED, rate_rps=12.0,
        latency_slo_ms=2000.0, profile=[tp4])], pools=pools), timeout=30)
    assert [(s.model, s.gpus, s.gpu_index, s.throughput_rps) for g in plan.gpus
            for s in g.segments] == [("llama-70b", 4, i % 4, 2.0) for i in range(8)]
    assert plan.cost_per_hour == 24.0 and not plan.unplaced
    mig = pb.ProfilePoint(product="H100-80GB", compute_slices=3, batch_size=16,
                          mps_processes=1, throughput_rps=8.0, latency_ms=300.0, gpus=2)
    with pytest.raises(grpc.RpcError) as refused:
        stub.PlanFleet(pb.PlanFleetRequest(models=[pb.ModelDemand(
            model="m", tenant="t", isolation=pb.TRUSTED, rate_rps=1.0, latency_slo_ms=2000.0,
            profile=[mig])], pools=pools), timeout=30)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert str(refused.value.details()).startswith("models[0].profile[0].gpus: a replica of 2 GPUs")


def test_the_same_plan_fleet_request_again_returns_the_same_segments_on_the_same_gpus(
        stub: pb_grpc.PlacementStub) -> None:
    def segments(plan: pb.FleetPlan) -> dict[str, list[bytes]]:
        return {g.gpu_id: sorted(s.SerializeToString(deterministic=True) for s in g.segments)
                for g in plan.gpus}

    plans = [stub.PlanFleet(slo2_pb_request(), timeout=60) for _ in range(3)]
    assert [p.revision for p in plans] == [1, 2, 3]  # every PlanFleet stores a new revision
    assert segments(plans[0]) == segments(plans[1]) == segments(plans[2])
    assert len(plans[0].gpus) == 3 and {p.cost_per_hour for p in plans} == {12.0}


def test_watch_plan_streams_every_newer_plan(stub: pb_grpc.PlacementStub) -> None:
    stream = stub.WatchPlan(pb.WatchPlanRequest(after_revision=0), timeout=30)
    stub.PlanFleet(_plan_request(), timeout=30)
    assert next(stream).revision == 1
    stub.PlanFleet(_plan_request(), timeout=30)
    assert next(stream).revision == 2
    stream.cancel()


def test_list_bindings_returns_what_place_bound_by_id_filtered_by_node_and_prefix(
        stub: pb_grpc.PlacementStub) -> None:
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0"), make_node("n1")]),
                       timeout=10)
    bound = {w: stub.Place(make_place(w), timeout=10).binding
             for w in ("vllm-b", "triton-a", "vllm-a")}
    listed = stub.ListBindings(pb.ListBindingsRequest(), timeout=10).bindings
    assert list(listed) == [bound[w] for w in ("triton-a", "vllm-a", "vllm-b")]
    vllm = stub.ListBindings(pb.ListBindingsRequest(workload_prefix="vllm-"), timeout=10)
    assert [b.workload_id for b in vllm.bindings] == ["vllm-a", "vllm-b"]
    node = bound["vllm-a"].node
    on_node = stub.ListBindings(pb.ListBindingsRequest(node=node), timeout=10).bindings
    assert {b.workload_id for b in on_node} == {w for w, b in bound.items() if b.node == node}
    stub.Release(pb.ReleaseRequest(workload_id="vllm-a"), timeout=10)
    assert [b.workload_id for b in stub.ListBindings(
        pb.ListBindingsRequest(workload_prefix="vllm-"), timeout=10).bindings] == ["vllm-b"]


def test_list_bindings_of_a_model_answers_a_serving_layer_that_restarted(
        stub: pb_grpc.PlacementStub) -> None:
    _sync(stub)
    for w, model in (("llama-1", "llama"), ("bert-0", "bert"), ("llama-0", "llama")):
        placed = stub.Place(make_place(w, gpu_milli=250, model=model, tenant="search"),
                            timeout=10).binding
        assert (placed.model, placed.tenant) == (model, "search")
    mine = stub.ListBindings(pb.ListBindingsRequest(model="llama"), timeout=10).bindings
    assert [(b.workload_id, b.model, b.tenant) for b in mine] == [
        ("llama-0", "llama", "search"), ("llama-1", "llama", "search")]
    assert [b.workload_id for b in stub.ListBindings(pb.ListBindingsRequest(
        model="llama", workload_prefix="llama-1"), timeout=10).bindings] == ["llama-1"]


def test_watch_streams_beyond_the_cap_are_refused_so_list_bindings_and_health_still_answer(
        ) -> None:
    server, port = create_server("127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.PlacementStub(channel)
    stub.PlanFleet(_plan_request(), timeout=30)
    streams = [stub.WatchPlan(pb.WatchPlanRequest(), timeout=30)
               for _ in range(DEFAULT_WORKERS)]  # one per thread of the pool
    try:
        served, refused = 0, []
        for stream in streams:
            try:
                assert next(stream).revision == 1
                served += 1
            except grpc.RpcError as error:
                refused.append((error.code(), (error.details() or "").split(":")[0]))
        assert served == watch_stream_cap(DEFAULT_WORKERS) == DEFAULT_WORKERS - 4
        assert refused == [(grpc.StatusCode.RESOURCE_EXHAUSTED, "watch_streams_full")] * 4
        assert stub.ListBindings(pb.ListBindingsRequest(), timeout=5).bindings == []
        assert stub.PlanFleet(_plan_request(), timeout=30).revision == 2
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == (
            health_pb2.HealthCheckResponse.SERVING)
    finally:
        for stream in streams:
            stream.cancel()
        channel.close()
        stop(server, grace_s=1.0)


def test_cancelled_watch_streams_free_their_threads_at_once_so_churn_never_holds_up_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # found by tests/scheduler/test_grpc_fuzz.py: a WatchPlan stream waiting for a newer plan
    # kept its worker thread up to WATCH_POLL_S after its client cancelled, while the stream cap
    # had already let its slot go, so clients that reopen streams filled the pool and the next
    # streams, ListBindings, PlanFleet and health checks waited behind them
    # a waiting stream's poll made long: a thread kept after its call ends would be kept 20 s
    monkeypatch.setattr(service, "WATCH_POLL_S", 20.0)
    server, port = create_server("127.0.0.1:0", max_workers=6)  # 2 streams, 4 threads kept
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.PlacementStub(channel)
    try:
        stub.PlanFleet(_plan_request(), timeout=30)
        started = time.monotonic()
        for _ in range(12):  # 24 streams, 2 at a time, each seen open before it is cancelled
            streams = [_watch_once_a_slot_is_free(stub) for _ in range(2)]
            assert [revision for _, revision in streams] == [1, 1]
            for stream, _ in streams:
                stream.cancel()
        assert stub.ListBindings(pb.ListBindingsRequest(), timeout=5).bindings == []
        # before: each cancelled stream held its thread for the poll, so after three rounds
        # the pool was full and the next streams waited ~20 s for a thread
        assert time.monotonic() - started < 10.0
    finally:
        channel.close()
        stop(server, grace_s=1.0)


def _watch_once_a_slot_is_free(stub: pb_grpc.PlacementStub) -> tuple[Any, int]:
    """A WatchPlan stream and its first plan's revision; RESOURCE_EXHAUSTED (a cancelled
    stream's thread not yet out, a few ms) is retried for up to 5 s."""
    until = time.monotonic() + 5.0
    while True:
        stream = stub.WatchPlan(pb.WatchPlanRequest(), timeout=30)
        try:
            return stream, next(stream).revision
        except grpc.RpcError as error:
            if (error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED
                    or time.monotonic() > until):
                raise
            time.sleep(0.01)


def test_a_watcher_ahead_of_the_server_gets_its_current_plan_instead_of_waiting(
        stub: pb_grpc.PlacementStub) -> None:
    # a client that saw revision 57 before this server restarted with its plans in memory only
    stub.PlanFleet(_plan_request(), timeout=30)
    stream = stub.WatchPlan(pb.WatchPlanRequest(after_revision=57), timeout=30)
    assert next(stream).revision == 1
    stub.PlanFleet(_plan_request(), timeout=30)
    assert next(stream).revision == 2
    stream.cancel()


def test_malformed_plan_request_names_the_field(stub: pb_grpc.PlacementStub) -> None:
    bad = _plan_request()
    bad.models[1].latency_slo_ms = 0
    with pytest.raises(grpc.RpcError) as err:
        stub.PlanFleet(bad, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith("models[1].latency_slo_ms")


def test_malformed_inventory_names_the_field(stub: pb_grpc.PlacementStub) -> None:
    nodes = [make_node("n0"), make_node("n0")]
    with pytest.raises(grpc.RpcError) as err:
        stub.SyncInventory(pb.SyncInventoryRequest(nodes=nodes), timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith("nodes[1].name")


def test_reflection_lists_the_placement_service() -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    server, port = create_server("127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        (answer,) = list(stub.ServerReflectionInfo(iter([request]), timeout=5))
        names = {s.name for s in answer.list_services_response.service}
        assert "headroom.v1.Placement" in names and "grpc.health.v1.Health" in names
    finally:
        channel.close()
        stop(server, grace_s=1.0)


def test_graceful_stop_ends_open_watch_streams_and_reports_not_serving() -> None:
    server, port = create_server("127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stream = pb_grpc.PlacementStub(channel).WatchPlan(pb.WatchPlanRequest(), timeout=30)
        health = health_pb2_grpc.HealthStub(channel)
        health.Check(health_pb2.HealthCheckRequest(), timeout=5)
        stop(server, grace_s=5.0)
        assert list(stream) == []  # the stream ended cleanly, no plan was ever made
    finally:
        channel.close()


def test_extra_servicers_are_registered_on_the_same_server() -> None:
    registered: list[grpc.Server] = []

    def register(server: grpc.Server) -> None:
        registered.append(server)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("headroom.test.Extra", {}),))

    server, port = create_server("127.0.0.1:0", extra_servicers=[register])
    try:
        assert registered == [server] and port > 0
    finally:
        stop(server, grace_s=1.0)


def test_release_and_watch_reject_malformed_requests(stub: pb_grpc.PlacementStub) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stub.Release(pb.ReleaseRequest(workload_id=""), timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith("workload_id")
    with pytest.raises(grpc.RpcError) as err:
        list(stub.WatchPlan(pb.WatchPlanRequest(after_revision=-1), timeout=5))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith("after_revision")


def test_renew_leases_extends_leased_bindings_and_names_ids_not_bound(
        stub: pb_grpc.PlacementStub) -> None:
    _sync(stub)
    leased = make_place("vllm-a")
    leased.lease_s = 3600
    placed = stub.Place(leased, timeout=10).binding
    assert placed.lease_s == 3600 and placed.lease_expires_at_s > 0
    answer = stub.RenewLeases(pb.RenewLeasesRequest(workload_ids=["vllm-a", "gone"]),
                              timeout=10)
    assert [b.workload_id for b in answer.renewed] == ["vllm-a"]
    assert answer.renewed[0].lease_expires_at_s >= placed.lease_expires_at_s
    assert list(answer.unknown) == ["gone"]
    with pytest.raises(grpc.RpcError) as err:
        stub.RenewLeases(pb.RenewLeasesRequest(workload_ids=[""]), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith("workload_ids[0]")


def test_rank_replicas_answers_over_grpc_best_first_and_names_a_bad_field(
        stub: pb_grpc.PlacementStub) -> None:
    _sync(stub)
    for workload_id in ("r1", "r2"):
        stub.Place(make_place(workload_id), timeout=5)
    answer = stub.RankReplicas(pb.RankReplicasRequest(replicas=[
        pb.ReplicaLoad(workload_id="r1", queue_depth=4),
        pb.ReplicaLoad(workload_id="r2", queue_depth=1),
        pb.ReplicaLoad(workload_id="gone")]), timeout=5)
    assert [(r.workload_id, r.score) for r in answer.ranked] == [("r2", 0.5), ("r1", 0.2)]
    assert list(answer.unknown) == ["gone"]
    with pytest.raises(grpc.RpcError) as err:
        stub.RankReplicas(pb.RankReplicasRequest(replicas=[
            pb.ReplicaLoad(workload_id="r1", kv_cache_usage=7.0)]), timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith("replicas[0].kv_cache_usage")


def test_a_mig_binding_says_where_its_instance_starts_and_others_say_nothing(
        stub: pb_grpc.PlacementStub) -> None:
    """The caller creates the instance: two 3g.40gb on one A100 start at slices 0 and 4."""
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node(
        "a100", gpus=1, product="A100-80GB", gpu_memory_mib=81_920, mig_capable=True)]),
        timeout=5)
    first = stub.Place(make_place("s1", gpu_milli=400, isolation=pb.STRICT), timeout=5).binding
    second = stub.Place(make_place("s2", gpu_milli=400, isolation=pb.STRICT), timeout=5).binding
    assert (first.mig_profile, second.mig_profile) == ("3g.40gb", "3g.40gb")
    assert first.HasField("mig_start") and second.HasField("mig_start")
    assert {first.mig_start, second.mig_start} == {0, 4}
    stub.Release(pb.ReleaseRequest(workload_id="s1"), timeout=5)
    stub.Release(pb.ReleaseRequest(workload_id="s2"), timeout=5)
    whole = stub.Place(make_place("w"), timeout=5).binding
    assert whole.mode == pb.EXCLUSIVE and not whole.HasField("mig_start")


def test_a_resync_that_shrinks_a_node_keeps_its_bindings_and_one_that_drops_it_says_which_went(
        stub: pb_grpc.PlacementStub) -> None:
    def inventory(cpu: int) -> pb.SyncInventoryRequest:
        return pb.SyncInventoryRequest(nodes=[make_node("n", product="L4", cpu_milli=cpu,
                                                        memory_mib=32_000)])

    def bound() -> list[tuple[str, list[int]]]:
        return [(b.workload_id, list(b.gpu_indices))
                for b in stub.ListBindings(pb.ListBindingsRequest(), timeout=5).bindings]

    stub.SyncInventory(inventory(8000), timeout=5)
    for workload_id in ("x1", "x2"):
        stub.Place(make_place(workload_id, cpu_milli=3000), timeout=5)
    shrunk = stub.SyncInventory(inventory(4000), timeout=5)
    assert (list(shrunk.released), list(shrunk.overcommitted_nodes)) == ([], ["n"])
    assert bound() == [("x1", [0]), ("x2", [1])]
    with pytest.raises(grpc.RpcError) as err:  # x2's GPU 1 is not handed out again
        stub.Place(make_place("y", cpu_milli=0, memory_mib=0), timeout=5)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    emptied = stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("m")]), timeout=5)
    assert [(r.workload_id, r.node, r.reason) for r in emptied.released] == [
        ("x1", "n", "node_gone"), ("x2", "n", "node_gone")]
    assert bound() == []
