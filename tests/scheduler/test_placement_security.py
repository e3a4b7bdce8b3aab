"""The placement API with TLS, mutual TLS and a bearer token, over real channels on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import grpc
import pytest
import trustme
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from forecaster.types import Forecast
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.security import SecurityFileError, TransportSecurity
from scheduler.server import create_server, health_port, stop

TOKEN = "s3cret-token"


def _write_pair(ca: trustme.CA, tmp: Path, stem: str) -> tuple[Path, Path]:
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert_file, key_file = tmp / f"{stem}.crt", tmp / f"{stem}.key"
    cert_file.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    key_file.write_bytes(cert.private_key_pem.bytes())
    return cert_file, key_file


@pytest.fixture
def server_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def files(tmp_path: Path, server_ca: trustme.CA) -> TransportSecurity:
    cert_file, key_file = _write_pair(server_ca, tmp_path, "server")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    return TransportSecurity(tls_cert_file=cert_file, tls_key_file=key_file,
                             token_file=token_file)


def _serve(security: TransportSecurity) -> Iterator[int]:
    server, port = create_server("127.0.0.1:0", security=security)
    try:
        yield port
    finally:
        stop(server, grace_s=0.5)


@pytest.fixture
def secured_port(files: TransportSecurity) -> Iterator[int]:
    yield from _serve(files)


def _tls_channel(port: int, ca: trustme.CA, token: str | None = None,
                 client_cert: trustme.LeafCert | None = None) -> grpc.Channel:
    creds = grpc.ssl_channel_credentials(
        root_certificates=ca.cert_pem.bytes(),
        private_key=client_cert.private_key_pem.bytes() if client_cert else None,
        certificate_chain=(b"".join(b.bytes() for b in client_cert.cert_chain_pems)
                           if client_cert else None))
    if token is not None:
        creds = grpc.composite_channel_credentials(
            creds, grpc.access_token_call_credentials(token))
    return grpc.secure_channel(f"127.0.0.1:{port}", creds)


def _plan(channel: grpc.Channel) -> pb.FleetPlan:
    return pb_grpc.PlacementStub(channel).GetPlan(pb.GetPlanRequest(), timeout=5)


def _code(call: object) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        call()  # type: ignore[operator]
    return err.value.code()


def test_a_client_that_trusts_the_ca_and_sends_the_token_is_served(
        secured_port: int, server_ca: trustme.CA) -> None:
    with _tls_channel(secured_port, server_ca, TOKEN) as channel:
        assert _plan(channel).revision >= 0


def test_a_call_without_a_token_is_unauthenticated_and_says_how_to_send_one(
        secured_port: int, server_ca: trustme.CA) -> None:
    with _tls_channel(secured_port, server_ca) as channel, \
            pytest.raises(grpc.RpcError) as err:
        _plan(channel)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "authorization: Bearer" in (err.value.details() or "")


def test_a_wrong_token_is_unauthenticated_on_unary_and_streaming_calls(
        secured_port: int, server_ca: trustme.CA) -> None:
    with _tls_channel(secured_port, server_ca, "not-it") as channel:
        stub = pb_grpc.PlacementStub(channel)
        assert _code(lambda: _plan(channel)) == grpc.StatusCode.UNAUTHENTICATED
        stream = stub.WatchPlan(pb.WatchPlanRequest(), timeout=5)
        assert _code(lambda: next(iter(stream))) == grpc.StatusCode.UNAUTHENTICATED
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        replies = reflect.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        assert _code(lambda: next(iter(replies))) == grpc.StatusCode.UNAUTHENTICATED


def test_health_checks_need_no_token_as_kubelets_grpc_probe_sends_none(
        secured_port: int, server_ca: trustme.CA) -> None:
    with _tls_channel(secured_port, server_ca) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_a_plaintext_client_gets_no_answer_from_a_tls_server(secured_port: int) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{secured_port}") as channel:
        assert _code(lambda: _plan(channel)) == grpc.StatusCode.UNAVAILABLE


def test_a_client_that_does_not_trust_the_servers_ca_is_refused(secured_port: int) -> None:
    with _tls_channel(secured_port, trustme.CA(), TOKEN) as channel:
        assert _code(lambda: _plan(channel)) == grpc.StatusCode.UNAVAILABLE


def test_a_token_file_of_two_lines_accepts_both_and_a_rewrite_takes_effect_without_restart(
        secured_port: int, server_ca: trustme.CA, files: TransportSecurity) -> None:
    assert files.token_file is not None
    files.token_file.write_text(f"{TOKEN}\nnext-token\n")
    for token in (TOKEN, "next-token"):
        with _tls_channel(secured_port, server_ca, token) as channel:
            assert _plan(channel).revision >= 0
    files.token_file.write_text("next-token\n")
    with _tls_channel(secured_port, server_ca, TOKEN) as channel:
        assert _code(lambda: _plan(channel)) == grpc.StatusCode.UNAUTHENTICATED
    with _tls_channel(secured_port, server_ca, "next-token") as channel:
        assert _plan(channel).revision >= 0


def test_an_emptied_token_file_keeps_the_tokens_it_had(
        secured_port: int, server_ca: trustme.CA, files: TransportSecurity) -> None:
    assert files.token_file is not None
    files.token_file.write_text("\n")
    with _tls_channel(secured_port, server_ca, TOKEN) as channel:
        assert _plan(channel).revision >= 0


def test_rotated_certificates_serve_new_handshakes_without_restart(
        secured_port: int, server_ca: trustme.CA, files: TransportSecurity,
        tmp_path: Path) -> None:
    new_ca = trustme.CA()
    cert_file, key_file = _write_pair(new_ca, tmp_path, "rotated")
    assert files.tls_cert_file is not None and files.tls_key_file is not None
    files.tls_key_file.write_bytes(key_file.read_bytes())
    files.tls_cert_file.write_bytes(cert_file.read_bytes())
    with _tls_channel(secured_port, new_ca, TOKEN) as channel:
        assert _plan(channel).revision >= 0
    with _tls_channel(secured_port, server_ca, TOKEN) as channel:
        assert _code(lambda: _plan(channel)) == grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_refuses_a_client_without_a_certificate_from_the_client_ca(
        tmp_path: Path, server_ca: trustme.CA, files: TransportSecurity) -> None:
    client_ca = trustme.CA()
    ca_file = tmp_path / "clients.pem"
    ca_file.write_bytes(client_ca.cert_pem.bytes())
    mutual = TransportSecurity(files.tls_cert_file, files.tls_key_file, ca_file)
    for port in _serve(mutual):
        with _tls_channel(port, server_ca) as channel:
            assert _code(lambda: _plan(channel)) == grpc.StatusCode.UNAVAILABLE
        stranger = trustme.CA().issue_cert("someone@example")
        with _tls_channel(port, server_ca, client_cert=stranger) as channel:
            assert _code(lambda: _plan(channel)) == grpc.StatusCode.UNAVAILABLE
        keda = client_ca.issue_cert("keda-operator")
        with _tls_channel(port, server_ca, client_cert=keda) as channel:
            assert _plan(channel).revision >= 0


def test_a_token_on_a_plaintext_loopback_server_is_checked_too(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    for port in _serve(TransportSecurity(token_file=token_file)):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert _code(lambda: _plan(channel)) == grpc.StatusCode.UNAUTHENTICATED
            stub = pb_grpc.PlacementStub(channel)
            reply = stub.GetPlan(pb.GetPlanRequest(), timeout=5,
                                 metadata=(("authorization", f"Bearer {TOKEN}"),))
            assert reply.revision >= 0


def test_a_key_that_does_not_match_the_certificate_is_named_before_anything_is_bound(
        tmp_path: Path, files: TransportSecurity) -> None:
    _, other_key = _write_pair(trustme.CA(), tmp_path, "other")
    with pytest.raises(SecurityFileError) as err:
        create_server("127.0.0.1:0", security=TransportSecurity(
            files.tls_cert_file, other_key, token_file=files.token_file))
    assert err.value.setting == "tls_cert_file"
    assert "matching tls_key_file" in str(err.value)


@pytest.mark.parametrize(("setting", "content", "problem"), [
    ("token_file", b"\n  \n", "holds no token"),
    ("token_file", None, "cannot read it"),
    ("tls_client_ca_file", b"not a certificate", "no PEM CA certificate"),
    ("tls_key_file", None, "cannot read it"),
])
def test_an_unusable_security_file_is_named_with_its_setting(
        tmp_path: Path, files: TransportSecurity, setting: str, content: bytes | None,
        problem: str) -> None:
    bad = tmp_path / "bad"
    if content is not None:
        bad.write_bytes(content)
    values = {"tls_cert_file": files.tls_cert_file, "tls_key_file": files.tls_key_file,
              "tls_client_ca_file": None, "token_file": files.token_file, setting: bad}
    with pytest.raises(SecurityFileError) as err:
        create_server("127.0.0.1:0", security=TransportSecurity(**values))
    assert err.value.setting == setting and err.value.path == bad
    assert problem in str(err.value)


def test_a_plaintext_health_port_answers_kubelets_probe_beside_a_tls_api(
        files: TransportSecurity, server_ca: trustme.CA) -> None:
    server, port = create_server("127.0.0.1:0", security=files, health_listen="127.0.0.1:0")
    probe_port = health_port(server)
    assert probe_port is not None and probe_port != port
    try:
        with grpc.insecure_channel(f"127.0.0.1:{probe_port}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="headroom.v1.Placement"), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            stub = pb_grpc.PlacementStub(channel)
            with pytest.raises(grpc.RpcError) as err:
                stub.GetPlan(pb.GetPlanRequest(), timeout=5)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        stop(server, grace_s=0.5)
    with grpc.insecure_channel(f"127.0.0.1:{probe_port}") as channel, \
            pytest.raises(grpc.RpcError) as err:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_kedas_scaler_calls_need_no_token_as_keda_sends_none_while_placement_calls_do(
        files: TransportSecurity, server_ca: trustme.CA) -> None:
    from datetime import UTC, datetime

    from controlplane.adapters.keda import KedaScalerServicer, keda_registrar
    from controlplane.sim.clock import VirtualClock
    from protos.externalscaler import externalscaler_pb2 as keda_pb
    from protos.externalscaler import externalscaler_pb2_grpc as keda_grpc

    at = datetime(2026, 1, 5, 12, tzinfo=UTC)
    forecast = Forecast("llama", at, 60, (50.0, 50.0), (60.0, 60.0), "test")
    servicer = KedaScalerServicer(_Latest({"llama": forecast}), VirtualClock(at),
                                  lookahead_s=120, target_rps={"llama": 40.0}, poll_s=0.05)
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)],
                                 security=files)
    try:
        with _tls_channel(port, server_ca) as channel:  # TLS, no token: as KEDA calls
            ref = keda_pb.ScaledObjectRef(name="llama", namespace="serving",
                                          scalerMetadata={"model": "llama"})
            reply = keda_grpc.ExternalScalerStub(channel).GetMetrics(
                keda_pb.GetMetricsRequest(scaledObjectRef=ref), timeout=5)
            assert reply.metricValues[0].metricValueFloat == pytest.approx(60.0)
            assert _code(lambda: _plan(channel)) == grpc.StatusCode.UNAUTHENTICATED
    finally:
        servicer.stopping.set()
        stop(server, grace_s=0.5)


class _Latest:
    def __init__(self, by_model: Mapping[str, Forecast]) -> None:
        self.by_model = by_model

    def latest_forecasts(self) -> Mapping[str, Forecast]:
        return self.by_model
