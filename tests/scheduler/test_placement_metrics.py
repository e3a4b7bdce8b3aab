"""Prometheus metrics of the placement API: real gRPC calls on 127.0.0.1, then a real scrape
of /metrics over HTTP, parsed with prometheus-client's own parser."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from parvagpu_slo2 import slo2_pb_request
from placement_builders import make_node, make_place
from prometheus_api_client import PrometheusConnect
from prometheus_client.parser import text_string_to_metric_families

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.engine import PlacementEngine
from scheduler.metrics import PlacementMetrics, exposed_metrics, serve_metrics
from scheduler.security import TransportSecurity
from scheduler.server import create_server, stop
from scheduler.service import _stream_end_code
from tests.forecasting.promserver import prometheus


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def served() -> Iterator[tuple[pb_grpc.PlacementStub, int]]:
    """A placement server with metrics on 127.0.0.1: its stub and the /metrics port."""
    metrics = PlacementMetrics()
    server, port = create_server("127.0.0.1:0", metrics=metrics)
    stop_metrics, metrics_port = serve_metrics(metrics, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield pb_grpc.PlacementStub(channel), metrics_port
    finally:
        channel.close()
        stop_metrics()
        stop(server, grace_s=1.0)


def test_scraped_metrics_count_calls_by_code_refusals_by_reason_and_read_the_engine(
        served: tuple[pb_grpc.PlacementStub, int]) -> None:
    stub, metrics_port = served
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0"), make_node("n1")]),
                       timeout=5)
    stub.Place(make_place("w1"), timeout=5)
    stub.Place(make_place("w2"), timeout=5)
    for request in (make_place("w1"), make_place("w3", num_gpu=4)):
        with pytest.raises(grpc.RpcError):
            stub.Place(request, timeout=5)
    stub.Release(pb.ReleaseRequest(workload_id="w2"), timeout=5)
    seen = _scrape(metrics_port)

    def calls(method: str, code: str) -> float:
        return seen[("headroom_placement_requests_total", (("code", code), ("method", method)))]

    assert calls("Place", "OK") == 2
    assert calls("Place", "ALREADY_EXISTS") == 1
    assert calls("Place", "RESOURCE_EXHAUSTED") == 1
    assert calls("Release", "OK") == 1 and calls("SyncInventory", "OK") == 1
    assert seen[("headroom_placement_rejections_total", (("reason", "no_idle_gpus"),))] == 1
    assert seen[("headroom_placement_request_seconds_count", (("method", "Place"),))] == 4
    assert seen[("headroom_placement_request_seconds_sum", (("method", "Place"),))] > 0
    assert seen[("headroom_placement_bindings", ())] == 1
    assert seen[("headroom_placement_inventory_gpus", ())] == 4
    assert seen[("headroom_fleet_plan_revision", ())] == 0


def test_counters_and_histograms_are_served_without_created_series(
        served: tuple[pb_grpc.PlacementStub, int]) -> None:
    stub, metrics_port = served
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]), timeout=5)
    stub.Place(make_place("w1"), timeout=5)
    names = {name for name, _ in _scrape(metrics_port)}
    assert ("headroom_placement_requests_total" in names
            and "headroom_placement_request_seconds_count" in names)
    assert not [name for name in names if name.endswith("_created")]


def test_bindings_whose_lease_ran_out_are_counted_when_the_server_releases_them() -> None:
    now_s = [1_800_000_000.0]
    metrics = PlacementMetrics()
    server, port = create_server("127.0.0.1:0", PlacementEngine(now_s=lambda: now_s[0]),
                                 metrics=metrics)
    stop_metrics, metrics_port = serve_metrics(metrics, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.PlacementStub(channel)
        stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0", gpus=3)]), timeout=5)
        for workload_id, lease_s in (("w1", 30.0), ("w2", 30.0), ("w3", 0.0)):
            request = make_place(workload_id)
            request.lease_s = lease_s
            stub.Place(request, timeout=5)
        assert _scrape(metrics_port)[("headroom_placement_leases_expired_total", ())] == 0
        now_s[0] += 30
        listed = stub.ListBindings(pb.ListBindingsRequest(), timeout=5).bindings
        assert [b.workload_id for b in listed] == ["w3"]
        seen = _scrape(metrics_port)
        assert seen[("headroom_placement_leases_expired_total", ())] == 2
        assert seen[("headroom_placement_bindings", ())] == 1
    finally:
        channel.close()
        stop_metrics()
        stop(server, grace_s=1.0)



def test_calls_refused_for_their_bearer_token_are_counted_by_method_and_code(
        tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    metrics = PlacementMetrics()
    server, port = create_server("127.0.0.1:0", metrics=metrics,
                                 security=TransportSecurity(token_file=token_file))
    stop_metrics, metrics_port = serve_metrics(metrics, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.PlacementStub(channel)
        rank = pb.RankReplicasRequest(replicas=[pb.ReplicaLoad(workload_id="w")])
        for metadata in ((), (("authorization", "Bearer rotated-away"),)):
            with pytest.raises(grpc.RpcError) as err:
                stub.RankReplicas(rank, timeout=5, metadata=metadata)
            assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
        stub.RankReplicas(rank, timeout=5, metadata=(("authorization", "Bearer s3cret"),))
        seen = _scrape(metrics_port)
        assert seen[("headroom_placement_requests_total",
                      (("code", "UNAUTHENTICATED"), ("method", "RankReplicas")))] == 2
        assert seen[("headroom_placement_requests_total",
                      (("code", "OK"), ("method", "RankReplicas")))] == 1
        # refused before the engine: no engine time is observed for them
        assert seen[("headroom_placement_request_seconds_count",
                     (("method", "RankReplicas"),))] == 1
    finally:
        channel.close()
        stop_metrics()
        stop(server, grace_s=1.0)

@pytest.mark.parametrize("listen", ["9464", "127.0.0.1:", "127.0.0.1:http", ":9464",
                                    "127.0.0.1:70000"])
def test_a_metrics_address_that_is_not_host_and_port_is_refused_naming_it(listen: str) -> None:
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        serve_metrics(PlacementMetrics(), listen)


def test_two_servers_in_one_process_keep_separate_metrics() -> None:
    first, second = PlacementMetrics(), PlacementMetrics()
    first.observe("Place", "OK", 0.001)
    assert first.registry.get_sample_value("headroom_placement_requests_total",
                                           {"method": "Place", "code": "OK"}) == 1
    assert second.registry.get_sample_value("headroom_placement_requests_total",
                                            {"method": "Place", "code": "OK"}) is None


@pytest.mark.prometheus
def test_a_real_prometheus_scrapes_the_placement_metrics(
        tmp_path: Path, served: tuple[pb_grpc.PlacementStub, int]) -> None:
    stub, metrics_port = served
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]), timeout=5)
    for name in ("w1", "w2"):
        stub.Place(make_place(name), timeout=5)
    with prometheus(tmp_path, (), scrape=[f"127.0.0.1:{metrics_port}"]) as url:
        prom = PrometheusConnect(url=url, disable_ssl=True)
        query = 'headroom_placement_requests_total{method="Place",code="OK"}'
        deadline = time.monotonic() + 60
        found: list[dict[str, object]] = []
        while time.monotonic() < deadline and not found:
            found = prom.custom_query(query)
            time.sleep(0.5)
        assert found and float(found[0]["value"][1]) == 2  # type: ignore[index]
        bound = prom.custom_query("headroom_placement_bindings")
        assert float(bound[0]["value"][1]) == 2


def test_get_plan_calls_and_refused_watch_streams_are_counted_too(
        served: tuple[pb_grpc.PlacementStub, int]) -> None:
    stub, metrics_port = served
    stub.GetPlan(pb.GetPlanRequest(), timeout=5)
    stub.GetPlan(pb.GetPlanRequest(), timeout=5)
    with pytest.raises(grpc.RpcError) as refused:
        next(iter(stub.WatchPlan(pb.WatchPlanRequest(after_revision=-1), timeout=5)))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    seen = _scrape(metrics_port)
    assert seen[("headroom_placement_requests_total", (("code", "OK"), ("method", "GetPlan")))] == 2
    assert seen[("headroom_placement_request_seconds_count", (("method", "GetPlan"),))] == 2
    assert seen[("headroom_placement_requests_total",
                 (("code", "INVALID_ARGUMENT"), ("method", "WatchPlan")))] == 1


def _watch_plan_calls(metrics: PlacementMetrics, code: str, at_least: float) -> float:
    """``headroom_placement_requests_total{method="WatchPlan",code=...}`` once it reaches
    ``at_least`` (a stream is counted as its server thread leaves it, just after the client
    saw it end), or its value after 10 s."""
    until = time.monotonic() + 10
    while True:
        value = metrics.registry.get_sample_value(
            "headroom_placement_requests_total", {"method": "WatchPlan", "code": code}) or 0.0
        if value >= at_least or time.monotonic() > until:
            return value
        time.sleep(0.02)


class _EndedCall:
    """What ``_stream_end_code`` reads of a servicer context whose client's call ended."""

    def __init__(self, remaining_s: float) -> None:
        self.remaining_s = remaining_s

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float:
        return self.remaining_s


@pytest.mark.parametrize(("remaining_s", "code"), [
    (-0.01, "DEADLINE_EXCEEDED"),  # the server's own deadline passed
    (0.3, "DEADLINE_EXCEEDED"),  # the client's passed first, by the request's transit time
    (25.0, "CANCELLED"),  # the client cancelled long before its deadline
])
def test_a_stream_ended_by_its_clients_deadline_counts_as_deadline_exceeded(
        remaining_s: float, code: str) -> None:
    ended = threading.Event()
    ended.set()
    assert _stream_end_code(_EndedCall(remaining_s), ended) == code  # type: ignore[arg-type]


def test_watch_plan_streams_are_counted_by_the_code_they_end_with() -> None:
    metrics = PlacementMetrics()
    server, port = create_server("127.0.0.1:0", metrics=metrics)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.PlacementStub(channel)
        stub.PlanFleet(slo2_pb_request(), timeout=60)
        cancelled = stub.WatchPlan(pb.WatchPlanRequest(), timeout=30)
        assert next(cancelled).revision == 1
        cancelled.cancel()
        assert _watch_plan_calls(metrics, "CANCELLED", 1) == 1
        with pytest.raises(grpc.RpcError) as late:
            next(stub.WatchPlan(pb.WatchPlanRequest(after_revision=1), timeout=0.5))
        assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert _watch_plan_calls(metrics, "DEADLINE_EXCEEDED", 1) == 1
        served = stub.WatchPlan(pb.WatchPlanRequest(), timeout=30)
        assert next(served).revision == 1
        stop(server, grace_s=1.0)  # ends the open stream cleanly
        assert list(served) == []  # it ended OK, with no more plans
        assert _watch_plan_calls(metrics, "OK", 1) == 1
    finally:
        stop(server, grace_s=0)
        channel.close()


class _BrokenEngine(PlacementEngine):
    """An engine whose Place fails on a bug (no domain error the API maps to a code)."""

    def place(self, *args: object, **kwargs: object) -> pb.PlaceResponse:
        raise RuntimeError("a bug")


def test_a_call_that_fails_on_a_bug_is_answered_unknown_and_counted_unknown() -> None:
    metrics = PlacementMetrics()
    server, port = create_server("127.0.0.1:0", _BrokenEngine(), metrics=metrics)
    stop_metrics, metrics_port = serve_metrics(metrics, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.PlacementStub(channel)
        stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]), timeout=5)
        with pytest.raises(grpc.RpcError) as failed:
            stub.Place(make_place("w1"), timeout=5)
        assert failed.value.code() is grpc.StatusCode.UNKNOWN
        seen = _scrape(metrics_port)
    finally:
        channel.close()
        stop_metrics()
        stop(server, grace_s=1.0)
    assert seen[("headroom_placement_requests_total",
                 (("code", "UNKNOWN"), ("method", "Place")))] == 1
    assert seen[("headroom_placement_request_seconds_count", (("method", "Place"),))] == 1


def test_the_served_metrics_carry_the_process_memory_cpu_and_start_time() -> None:
    _, stop_metrics, url = exposed_metrics("127.0.0.1:0")
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    finally:
        stop_metrics()
    seen = {s.name: s.value for family in text_string_to_metric_families(text)
            for s in family.samples}
    assert seen["process_resident_memory_bytes"] > 0
    assert seen["process_cpu_seconds_total"] > 0
    assert seen["process_start_time_seconds"] < time.time()
    assert "python_info" in seen and "python_gc_collections_total" in seen
