"""KEDA's external scaler on the placement API under mutual TLS, over real gRPC with real
certificates on 127.0.0.1: a client certificate the client CA signed is trusted with every stream
of the scaler (no per-caller share), and with a client identities file the scaler, exempt from
tokens, still needs a listed, unscoped certificate identity."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from x509_builders import Leaf, TestCA

from controlplane.adapters.keda import KedaScalerServicer, keda_registrar
from controlplane.sim.clock import VirtualClock
from forecaster.types import Forecast
from protos.externalscaler import externalscaler_pb2 as pb
from protos.externalscaler import externalscaler_pb2_grpc as pb_grpc
from scheduler.security import TransportSecurity
from scheduler.server import DEFAULT_WORKERS, create_server, stop

AT = datetime(2026, 1, 5, 12, tzinfo=UTC)
CA = TestCA()
KEDA = CA.leaf("keda-operator")
STRANGER = CA.leaf("someone")
ALPHA_ROUTER = CA.leaf("router-a")
IDENTITIES = "cn:keda-operator\ncn:router-a tenant=alpha\n"
REF = pb.ScaledObjectRef(name="llama", namespace="serving", scalerMetadata={"model": "llama"})


class _Latest:
    def latest_forecasts(self) -> Mapping[str, Forecast]:
        return {"llama": Forecast("llama", AT, 60, (50.0, 50.0), (60.0, 60.0), "test")}


@contextmanager
def _mutual_tls(tmp_path: Path, identities: str | None = None
                ) -> Iterator[tuple[Callable[[Leaf | None], pb_grpc.ExternalScalerStub],
                                    KedaScalerServicer]]:
    """The scaler (8 streams, a quarter per caller) on a mutual TLS server: a stub per client
    certificate (None: none) and the servicer."""
    server_leaf = CA.leaf("placement", dns=("localhost",), ips=("127.0.0.1",))
    files = {name: tmp_path / name for name in ("tls.crt", "tls.key", "clients.pem", "ids")}
    files["tls.crt"].write_bytes(server_leaf.cert_pem)
    files["tls.key"].write_bytes(server_leaf.key_pem)
    files["clients.pem"].write_bytes(CA.cert_pem)
    files["ids"].write_text(identities or "")
    servicer = KedaScalerServicer(_Latest(), VirtualClock(AT), lookahead_s=120,
                                  target_rps={"llama": 40.0}, poll_s=0.05, max_streams=8,
                                  caller_share=0.25)
    server, port = create_server(
        "127.0.0.1:0", extra_servicers=[keda_registrar(servicer)],
        max_workers=DEFAULT_WORKERS + servicer.max_streams,
        security=TransportSecurity(files["tls.crt"], files["tls.key"], files["clients.pem"],
                                   client_identities_file=files["ids"] if identities else None))
    channels: list[grpc.Channel] = []

    def stub(leaf: Leaf | None) -> pb_grpc.ExternalScalerStub:
        creds = grpc.ssl_channel_credentials(CA.cert_pem, leaf.key_pem if leaf else None,
                                             leaf.cert_pem if leaf else None)
        channels.append(grpc.secure_channel(f"127.0.0.1:{port}", creds))
        return pb_grpc.ExternalScalerStub(channels[-1])

    try:
        yield stub, servicer
    finally:
        servicer.stopping.set()
        for channel in channels:
            channel.close()
        stop(server, grace_s=0.5)


def _first(stream: Iterator[object]) -> object:
    """A stream's first answer, or the code and details it was refused with."""
    try:
        return next(stream)
    except grpc.RpcError as error:
        return error.code(), error.details()


def test_a_client_certificate_under_mutual_tls_is_trusted_with_every_stream_of_the_scaler(
        tmp_path: Path) -> None:
    # KEDA with more external-push ScaledObjects than a share: an authenticated, unscoped
    # caller is not held to a share (only a tenant-scoped one or one known by its address is)
    with _mutual_tls(tmp_path) as (stub, servicer):
        keda = stub(KEDA)
        opened: list[Iterator[object]] = []
        answers = []
        for _ in range(9):  # one at a time: each answered before the next opens
            opened.append(keda.StreamIsActive(REF, timeout=20))
            answers.append(_first(opened[-1]))
        assert answers[:8] == [pb.IsActiveResponse(result=True)] * 8
        assert answers[8] == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                              "all 8 streams of this scaler are open; poll IsActive instead "
                              "(trigger type external)")
        assert servicer.open_streams() == 8
        for stream in opened:
            stream.cancel()  # type: ignore[attr-defined]


def test_under_mutual_tls_a_scaler_call_without_a_client_certificate_is_refused(
        tmp_path: Path) -> None:
    with _mutual_tls(tmp_path) as (stub, _):
        with pytest.raises(grpc.RpcError) as refused:
            stub(None).GetMetrics(pb.GetMetricsRequest(scaledObjectRef=REF), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # the handshake fails
        reply = stub(KEDA).GetMetrics(pb.GetMetricsRequest(scaledObjectRef=REF), timeout=5)
        assert reply.metricValues[0].metricValueFloat == pytest.approx(60.0)


def test_with_client_identities_the_scaler_needs_a_listed_unscoped_certificate(
        tmp_path: Path) -> None:
    # before: the scaler, exempt from tokens, answered any certificate the client CA signed,
    # listed or not, tenant-scoped or not: every tenant's forecast demand
    with _mutual_tls(tmp_path, IDENTITIES) as (stub, _):
        metrics = pb.GetMetricsRequest(scaledObjectRef=REF)
        for leaf, code, problem in (
                (STRANGER, grpc.StatusCode.UNAUTHENTICATED,
                 "client certificate (cn:someone): signed by the client CA, but none of its "
                 "identities is listed in client_identities_file"),
                (ALPHA_ROUTER, grpc.StatusCode.PERMISSION_DENIED,
                 "client certificate scoped to tenants alpha: externalscaler.ExternalScaler "
                 "answers for every tenant's models, so only an unscoped identity may call it")):
            scaler = stub(leaf)
            with pytest.raises(grpc.RpcError) as unary:
                scaler.GetMetrics(metrics, timeout=5)
            with pytest.raises(grpc.RpcError) as streamed:
                next(scaler.StreamIsActive(REF, timeout=5))
            for refused in (unary.value, streamed.value):
                assert refused.code() == code
                assert problem in (refused.details() or "")
        keda = stub(KEDA)
        assert keda.GetMetrics(metrics, timeout=5).metricValues[0].metricValueFloat == (
            pytest.approx(60.0))
        assert next(keda.StreamIsActive(REF, timeout=5)).result is True
