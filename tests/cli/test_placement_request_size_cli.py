"""`headroom placement serve` with TLS and a bearer token against large requests, over real gRPC
on loopback: a call without the token is refused before its request is read (the server's peak
memory, VmHWM of its process, barely moves), and no request above `placement.max_request_mib`
(`--max-request-mib`) is read, while a SyncInventory of a large fleet is served."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
import trustme
from clihelpers import PLACEMENT_SERVE, _env, tls_files
from grpc_health.v1.health_pb2 import HealthCheckRequest

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc

TOKEN = "t0ken-for-size-tests"
MIB = 1 << 20
NO_TOKEN = "no bearer token: send metadata 'authorization: Bearer <token>'"


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def pems(tmp_path: Path, ca: trustme.CA) -> dict[str, Path]:
    return tls_files(tmp_path, ca, TOKEN)


@contextmanager
def _served(pems: dict[str, Path], *flags: str) -> Iterator[tuple[int, int]]:
    """``placement serve`` with TLS and the token file on a free port: (its pid, its port)."""
    proc = subprocess.Popen(
        [*PLACEMENT_SERVE, "--listen", "127.0.0.1:0", "--tls-cert", str(pems["cert"]),
         "--tls-key", str(pems["key"]), "--token-file", str(pems["token"]), *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert proc.stdout is not None
        listening = proc.stdout.readline().strip()
        assert listening.startswith("placement API listening on 127.0.0.1:"), listening
        yield proc.pid, int(listening.rsplit(":", 1)[-1])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def _peak_rss_mib(pid: int) -> float:
    """VmHWM: the most memory the process has held at once."""
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def _channel(port: int, ca: trustme.CA, token: str | None) -> grpc.Channel:
    creds = grpc.ssl_channel_credentials(root_certificates=ca.cert_pem.bytes())
    if token is not None:
        creds = grpc.composite_channel_credentials(
            creds, grpc.access_token_call_credentials(token))
    return grpc.secure_channel(f"127.0.0.1:{port}", creds,
                               options=[("grpc.max_send_message_length", 300 * MIB)])


def _raw_call(channel: grpc.Channel, method: str, body: bytes) -> tuple[grpc.StatusCode, str]:
    """The code and details the server answers ``body`` sent as is to ``method`` with (an
    error, in these tests)."""
    call = channel.unary_unary(method, request_serializer=lambda raw: raw,
                               response_deserializer=lambda raw: raw)
    with pytest.raises(grpc.RpcError) as err:
        call(body, timeout=120)
    return err.value.code(), err.value.details() or ""


def _place_of(size_mib: int) -> bytes:
    """A PlaceRequest whose workload_id is ``size_mib`` MiB long, serialized."""
    return pb.PlaceRequest(workload_id="w" * (size_mib * MIB)).SerializeToString()


def _large_fleet() -> pb.SyncInventoryRequest:
    """2,000 nodes x 8 A100-80GB GPUs x 7 MIG instances, 150 labels per node (21 MiB)."""
    def labels(i: int) -> dict[str, str]:
        named = {"kubernetes.io/hostname": f"gpu-node-{i:05d}",
                 "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
        return named | {f"feature.node.kubernetes.io/cpu-cpuid.FEATURE_{k:03d}": "true"
                        for k in range(148)}

    return pb.SyncInventoryRequest(nodes=[pb.Node(
        name=f"gpu-node-{i:05d}", cpu_milli=96_000, memory_mib=1_160_000, labels=labels(i),
        gpus=[pb.Gpu(index=g, product="A100-80GB", memory_mib=81_920, mig_capable=True,
                     mig_instances=[pb.MigInstance(profile="1g.10gb", start=s)
                                    for s in range(7)]) for g in range(8)])
        for i in range(2000)])


def test_a_call_without_the_token_is_refused_before_its_request_is_read_however_large(
        pems: dict[str, Path], ca: trustme.CA) -> None:
    with _served(pems, "--max-request-mib", "256") as (pid, port), \
            _channel(port, ca, None) as channel:
        small = _raw_call(channel, "/headroom.v1.Placement/Place",
                          pb.PlaceRequest(workload_id="w").SerializeToString())
        before_mib = _peak_rss_mib(pid)
        large = _raw_call(channel, "/headroom.v1.Placement/Place", _place_of(240))
        grown_mib = _peak_rss_mib(pid) - before_mib
    assert small == large == (grpc.StatusCode.UNAUTHENTICATED, NO_TOKEN)
    assert grown_mib < 40, f"a refused 240 MiB request grew the server's peak by {grown_mib} MiB"


def test_the_default_cap_refuses_a_request_over_64_mib_unread_and_serves_a_large_fleet(
        pems: dict[str, Path], ca: trustme.CA) -> None:
    with _served(pems) as (pid, port), _channel(port, ca, TOKEN) as channel, \
            _channel(port, ca, None) as anonymous:
        unauthenticated = _raw_call(anonymous, "/headroom.v1.Placement/Place", _place_of(100))
        before_mib = _peak_rss_mib(pid)
        over = _raw_call(channel, "/headroom.v1.Placement/Place", _place_of(65))
        grown_mib = _peak_rss_mib(pid) - before_mib
        synced = pb_grpc.PlacementStub(channel).SyncInventory(_large_fleet(), timeout=300)
    assert unauthenticated == (grpc.StatusCode.UNAUTHENTICATED, NO_TOKEN)  # before any size
    assert over[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in over[1] and f"vs. {64 * MIB}" in over[1]
    assert grown_mib < 40, f"a refused 65 MiB request grew the server's peak by {grown_mib} MiB"
    assert (synced.nodes, synced.gpus) == (2000, 16_000)


def test_the_cap_comes_from_the_config_beaten_by_the_option_and_binds_health_too(
        tmp_path: Path, pems: dict[str, Path], ca: trustme.CA) -> None:
    config = tmp_path / "ps.yaml"
    config.write_text(f"db: {{url: 'sqlite:///{tmp_path / 'ps.db'}'}}\n"
                      "placement: {max_request_mib: 8}\n")
    nine_mib = _place_of(9)
    with _served(pems, "--config", str(config)) as (_, port), \
            _channel(port, ca, TOKEN) as channel, _channel(port, ca, None) as anonymous:
        over = _raw_call(channel, "/headroom.v1.Placement/Place", nine_mib)
        health = _raw_call(anonymous, "/grpc.health.v1.Health/Check",  # needs no token
                           HealthCheckRequest(service="s" * (9 * MIB)).SerializeToString())
    assert over[0] == health[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"vs. {8 * MIB}" in over[1] and f"vs. {8 * MIB}" in health[1]
    with _served(pems, "--config", str(config), "--max-request-mib", "16") as (_, port), \
            _channel(port, ca, TOKEN) as channel:
        read = _raw_call(channel, "/headroom.v1.Placement/Place", nine_mib)
    # read, then judged: its 9 MiB id is past the workload id's length limit
    assert read == (grpc.StatusCode.INVALID_ARGUMENT,
                    f"workload_id: is {9 * MIB} characters long, at most 317")
