"""`headroom serve` and `headroom placement serve` with TLS, a bearer token and a plaintext
health port, as an operator configures them; and what they refuse before serving."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import grpc
import pytest
import trustme
from clihelpers import (
    HEADROOM,
    PLACEMENT_SERVE,
    WARM_HEADROOM,
    _env,
    _free_port,
    _wait_for,
    tls_files,
)
from grpc_health.v1 import health_pb2, health_pb2_grpc

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc

REPO = Path(__file__).resolve().parents[2]
TOKEN = "t0ken-for-tests"


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def pems(tmp_path: Path, ca: trustme.CA) -> dict[str, Path]:
    return tls_files(tmp_path, ca, TOKEN)


def _secure_stub(port: int, ca: trustme.CA, token: str | None) -> pb_grpc.PlacementStub:
    creds = grpc.ssl_channel_credentials(root_certificates=ca.cert_pem.bytes())
    if token is not None:
        creds = grpc.composite_channel_credentials(
            creds, grpc.access_token_call_credentials(token))
    return pb_grpc.PlacementStub(grpc.secure_channel(f"127.0.0.1:{port}", creds))


def _healthy(port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                          timeout=2)
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def test_serve_with_tls_and_a_token_serves_only_callers_that_send_it(
        tmp_path: Path, pems: dict[str, Path], ca: trustme.CA) -> None:
    port, health = _free_port(), _free_port()
    config = tmp_path / "headroom.yaml"
    config.write_text(f"backend: sim\ndb:\n  url: sqlite:///{tmp_path / 'serve.db'}\n"
                      f"placement:\n  listen: 127.0.0.1:{port}\n"
                      f"  health_listen: 127.0.0.1:{health}\n"
                      f"  tls_cert_file: {pems['cert']}\n  tls_key_file: {pems['key']}\n"
                      f"  token_file: {pems['token']}\n"
                      "reconcile:\n  interval_s: 1\n  max_staleness_s: 30\n"
                      "sim:\n  history_s: 3600\n")
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(config)],
                            env=_env(HEADROOM_PLACEMENT__LISTEN=f"127.0.0.1:{port}"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: _healthy(health), 60)
        stub = _secure_stub(port, ca, TOKEN)
        _wait_for(lambda: stub.GetPlan(pb.GetPlanRequest(), timeout=2).revision >= 1, 60)
        with pytest.raises(grpc.RpcError) as err:
            _secure_stub(port, ca, None).GetPlan(pb.GetPlanRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert f"placement API (gRPC) on 127.0.0.1:{port} (TLS, bearer token)" in stdout + stderr
    assert TOKEN not in stdout + stderr


@pytest.mark.parametrize(("host", "placement", "named"), [
    ("0.0.0.0", "", "placement.listen 0.0.0.0:{port} is reachable beyond"),
    ("127.0.0.1", "  tls_cert_file: {cert}\n", "placement.tls_cert_file and "
                                               "placement.tls_key_file go together"),
    ("127.0.0.1", "  token_file: {missing}\n", "placement.token_file {missing}: cannot read it"),
    ("127.0.0.1", "  client_identities_file: {missing}\n",
     "placement.client_identities_file maps client certificates to tenants: it needs "
     "placement.tls_client_ca_file"),
])
def test_serve_refuses_an_unsafe_or_unusable_placement_security_in_one_line(
        tmp_path: Path, pems: dict[str, Path], host: str, placement: str, named: str) -> None:
    values = {"port": _free_port(), "cert": pems["cert"], "missing": tmp_path / "missing"}
    config = tmp_path / "headroom.yaml"
    config.write_text(f"backend: sim\ndb:\n  url: sqlite:///{tmp_path / 'serve.db'}\n"
                      f"placement:\n  metrics_listen: null\n{placement.format(**values)}")
    env = _env(HEADROOM_PLACEMENT__LISTEN=f"{host}:{values['port']}")
    run = subprocess.run([*WARM_HEADROOM, "serve", "--config", str(config)], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert named.format(**values) in run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert not (tmp_path / "serve.db").exists()  # refused before the store is touched


def test_serve_beyond_loopback_without_tls_is_allowed_when_the_operator_says_so(
        tmp_path: Path) -> None:
    from controlplane.settings import load_settings

    config = tmp_path / "headroom.yaml"
    config.write_text("placement:\n  listen: 0.0.0.0:50051\n  allow_insecure: true\n")
    assert load_settings(config).placement.allow_insecure


def test_placement_serve_with_tls_a_token_and_a_health_port(
        pems: dict[str, Path], ca: trustme.CA) -> None:
    proc = subprocess.Popen(
        [*PLACEMENT_SERVE, "--listen", "127.0.0.1:0", "--tls-cert", str(pems["cert"]),
         "--tls-key", str(pems["key"]), "--token-file", str(pems["token"]),
         "--health-listen", "127.0.0.1:0"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip().rsplit(" ", 1)[-1]
        assert proc.stdout.readline().strip() == "secured with TLS, bearer token"
        health_line = proc.stdout.readline().strip()
        assert health_line.startswith("health checks (plaintext) on 127.0.0.1:")
        assert _healthy(int(health_line.rsplit(":", 1)[-1]))
        port = int(address.rsplit(":", 1)[-1])
        assert _secure_stub(port, ca, TOKEN).GetPlan(pb.GetPlanRequest(), timeout=5).gpus == []
        with pytest.raises(grpc.RpcError) as err:
            _secure_stub(port, ca, "wrong").GetPlan(pb.GetPlanRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err_text = proc.communicate(timeout=30)
    assert proc.returncode == 0, err_text
    assert "placement API stopped" in out


@pytest.mark.parametrize(("flags", "named"), [
    (["--listen", "0.0.0.0:0"], "--listen 0.0.0.0:0 is reachable beyond this machine"),
    (["--listen", "127.0.0.1:0", "--tls-cert", "{cert}"], "--tls-cert and --tls-key go together"),
    (["--listen", "127.0.0.1:0", "--token-file", "{key}/nope"], "--token-file {key}/nope: "
                                                                "cannot read it"),
    (["--listen", "127.0.0.1:0", "--tls-cert", "{cert}", "--tls-key", "{token}"],
     "--tls-cert {cert}: not a PEM certificate chain matching tls_key_file"),
    (["--listen", "127.0.0.1:0", "--tls-cert", "{cert}", "--tls-key", "{key}",
      "--client-identities", "{token}"],
     "--client-identities maps client certificates to tenants: it needs --tls-client-ca"),
    (["--listen", "127.0.0.1:0", "--tls-cert", "{cert}", "--tls-key", "{key}",
      "--tls-client-ca", "{cert}", "--client-identities", "{token}"],
     "--client-identities {token}: line 1: an identity starts with cn:, dns:, uri:"),
])
def test_placement_serve_refuses_unsafe_or_unusable_security_naming_the_option(
        pems: dict[str, Path], flags: list[str], named: str) -> None:
    values = {k: str(v) for k, v in pems.items()}
    run = subprocess.run([*PLACEMENT_SERVE, *(f.format(**values) for f in flags)], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert named.format(**values) in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
