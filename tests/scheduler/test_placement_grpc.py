"""The placement gRPC server over a real channel on 127.0.0.1 (port 0)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from placement_builders import make_node, make_place

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.server import create_server, stop


@pytest.fixture
def stub() -> Iterator[pb_grpc.PlacementStub]:
    server, port = create_server("127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield pb_grpc.PlacementStub(channel)
    finally:
        channel.close()
        stop(server, grace_s=1.0)


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


@pytest.mark.parametrize("request_, field", [
    (make_place("", num_gpu=1), "workload_id"),
    (make_place("w", gpu_milli=2000), "gpu_milli"),
    (make_place("w", cpu_milli=-1), "cpu_milli"),
    (make_place("w", num_gpu=-1), "num_gpu"),
    (make_place("w", products=[""]), "gpu_products[0]"),
], ids=["empty-id", "milli-over-1000", "negative-cpu", "negative-gpus", "empty-product"])
def test_malformed_place_is_invalid_argument_naming_the_field(
        stub: pb_grpc.PlacementStub, request_: pb.PlaceRequest, field: str) -> None:
    _sync(stub)
    with pytest.raises(grpc.RpcError) as err:
        stub.Place(request_, timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith(field)


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
