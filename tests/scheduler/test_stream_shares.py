"""One caller's share of a stream pool (``scheduler.stream_shares``): the pure decision and
caller names, and WatchPlan over real gRPC on 127.0.0.1 with a token file, where a tenant's token
holding its share no longer locks the operator and the other tenants out."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from rich.console import Console

from controlplane.placement_api import start_placement_api
from controlplane.settings import load_settings
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.engine import PlacementEngine
from scheduler.security import TransportSecurity
from scheduler.server import DEFAULT_WORKERS, create_server, stop, watch_stream_cap
from scheduler.stream_shares import (
    CALLER_FULL,
    POOL_FULL,
    StreamSlots,
    caller_cap,
    caller_name,
    peer_host,
    refusal,
    token_name,
)

TOKENS = "ops-token\nalpha-token tenant=alpha\nbeta-token tenant=beta\n"


# -- the pure decision ---------------------------------------------------------------------

def test_a_callers_cap_is_its_share_of_the_pool_and_at_least_one_stream() -> None:
    assert caller_cap(128, 0.25) == 32
    assert caller_cap(12, 0.25) == 3
    assert caller_cap(3, 0.25) == 1
    assert caller_cap(100, 0.29) == 29  # 28.999... in floating point
    assert caller_cap(12, 1.0) == 12


def test_a_stream_is_refused_when_the_pool_is_full_or_its_caller_holds_its_share() -> None:
    assert refusal(open_total=5, open_of_caller=2, pool=12, per_caller=3) is None
    assert refusal(open_total=5, open_of_caller=3, pool=12, per_caller=3) == CALLER_FULL
    assert refusal(open_total=12, open_of_caller=0, pool=12, per_caller=3) == POOL_FULL
    assert refusal(open_total=12, open_of_caller=3, pool=12, per_caller=3) == POOL_FULL
    assert refusal(open_total=99, open_of_caller=99, pool=None, per_caller=None) is None


def test_slots_count_each_callers_streams_and_free_them_as_they_end() -> None:
    slots = StreamSlots(pool=4, per_caller=2)
    assert [slots.take("a"), slots.take("a"), slots.take("a")] == [None, None, CALLER_FULL]
    assert [slots.take("b"), slots.take("b")] == [None, None]
    assert slots.take("c") == POOL_FULL
    slots.drop("a")
    assert (slots.open(), slots.open_of("a")) == (3, 1)
    assert slots.take("c") is None


def test_a_caller_is_named_by_its_token_else_its_certificate_else_its_address() -> None:
    named = token_name(b"alpha-token")
    assert re.fullmatch(r"token sha256:[0-9a-f]{12}", named)
    assert "alpha-token" not in named
    assert caller_name(named, ("cn:keda",), "ipv4:10.0.0.7:5000") == named
    assert caller_name(None, ("cn:keda", "dns:keda.keda.svc"), "ipv4:10.0.0.7:5000") == (
        "certificate cn:keda, dns:keda.keda.svc")
    assert caller_name(None, (), "ipv4:10.0.0.7:53124") == "address ipv4:10.0.0.7"
    assert peer_host("ipv6:[::1]:53124") == "ipv6:[::1]"
    assert peer_host("unix:/run/headroom.sock") == "unix:/run/headroom.sock"


# -- WatchPlan over gRPC -------------------------------------------------------------------

def _plan_request() -> pb.PlanFleetRequest:
    points = [pb.ProfilePoint(product="A100-80GB", compute_slices=7, batch_size=8,
                              mps_processes=1, throughput_rps=700.0, latency_ms=10.0)]
    return pb.PlanFleetRequest(
        models=[pb.ModelDemand(model="a", tenant="alpha", isolation=pb.TRUSTED, rate_rps=250.0,
                               latency_slo_ms=100.0, profile=points)],
        pools=[pb.GpuPool(product="A100-80GB", max_gpus=10, price_per_gpu_hour=4.0)])


def _bearer(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture
def tokened(tmp_path: Path) -> Iterator[pb_grpc.PlacementStub]:
    """A server with TOKENS (plaintext on loopback), a quarter of its WatchPlan streams per
    caller, a plan made by the operator."""
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKENS)
    server, port = create_server("127.0.0.1:0", security=TransportSecurity(token_file=token_file),
                                 watch_caller_share=0.25)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.PlacementStub(channel)
    try:
        stub.PlanFleet(_plan_request(), timeout=30, metadata=_bearer("ops-token"))
        yield stub
    finally:
        channel.close()
        stop(server, grace_s=1.0)


def _watch(stub: pb_grpc.PlacementStub, token: str | None, opened: list[Any]
           ) -> int | tuple[grpc.StatusCode, str]:
    """The revision of the first plan a new WatchPlan stream sends, or its refusal."""
    stream = stub.WatchPlan(pb.WatchPlanRequest(), timeout=30,
                            metadata=_bearer(token) if token is not None else None)
    opened.append(stream)
    try:
        return int(next(stream).revision)
    except grpc.RpcError as error:
        return error.code(), error.details() or ""


def test_a_tenants_token_holds_a_quarter_of_the_watch_streams_and_the_operators_token_more(
        tokened: pb_grpc.PlacementStub) -> None:
    # before: one tenant's token opened all 12 streams and the operator and every other
    # tenant were refused watch_streams_full
    cap = watch_stream_cap(DEFAULT_WORKERS)
    opened: list[Any] = []
    try:
        alpha = [_watch(tokened, "alpha-token", opened) for _ in range(cap + 2)]
        assert alpha[:3] == [1, 1, 1]
        refused = (grpc.StatusCode.RESOURCE_EXHAUSTED,
                   f"watch_streams_per_caller: {token_name(b'alpha-token')} already holds 3 "
                   "WatchPlan streams, the most one caller may hold "
                   f"(placement.watch_caller_share 0.25 of this server's {cap}), so that no "
                   "caller takes them all; close one of its streams (one stream sees every "
                   "plan) or poll GetPlan")
        assert alpha[3:] == [refused] * (cap - 1)
        # the operator's unscoped token is trusted with more than a share
        assert [_watch(tokened, "ops-token", opened) for _ in range(4)] == [1] * 4
        assert _watch(tokened, "beta-token", opened) == 1
    finally:
        for stream in opened:
            stream.cancel()


def test_headroom_serves_a_quarter_of_its_watch_streams_to_one_address_by_default() -> None:
    out = io.StringIO()
    stop_api, _ = start_placement_api(load_settings(None, placement={"listen": "127.0.0.1:0"}),
                                      PlacementEngine(), [], Console(file=out))
    port = re.search(r"127\.0\.0\.1:(\d+)", out.getvalue())
    assert port is not None
    opened: list[Any] = []
    with grpc.insecure_channel(f"127.0.0.1:{port[1]}") as channel:
        stub = pb_grpc.PlacementStub(channel)
        try:
            stub.PlanFleet(_plan_request(), timeout=30)
            answers = [_watch(stub, None, opened) for _ in range(4)]
            assert answers[:3] == [1, 1, 1]
            refused = answers[3]
            assert isinstance(refused, tuple)
            assert refused[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert refused[1].startswith("watch_streams_per_caller: address ipv4:127.0.0.1 "
                                      "already holds 3 WatchPlan streams")
        finally:
            for stream in opened:
                stream.cancel()
            stop_api()
