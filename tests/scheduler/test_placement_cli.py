"""`headroom placement serve`: prints the bound address, serves, stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-c", "from controlplane.cli.placement import app; app()", "serve",
         "--listen"]


@contextmanager
def _serving(*flags: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``placement serve --listen 127.0.0.1:0 *flags`` and its bound address (killed at the end
    if the test did not stop it)."""
    proc = subprocess.Popen([*SERVE, "127.0.0.1:0", *flags], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("placement API listening on 127.0.0.1:")
        yield proc, line.rsplit(" ", 1)[-1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _stopped(proc: subprocess.Popen[str]) -> str:
    """SIGTERM; the server must say it stopped and exit 0. Returns its stderr."""
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "placement API stopped" in out
    return err


def _refused(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SERVE, *flags], cwd=REPO, capture_output=True, text=True, timeout=60)


def test_serve_prints_its_address_and_stops_on_sigterm() -> None:
    with _serving() as (proc, addr):
        with grpc.insecure_channel(addr) as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="headroom.v1.Placement"), timeout=10)
            assert status.status == health_pb2.HealthCheckResponse.SERVING
        _stopped(proc)


def test_serve_reports_an_address_it_cannot_bind_in_one_line_naming_the_option() -> None:
    proc = _refused("256.0.0.1:1")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --listen '256.0.0.1:1': cannot resolve '256.0.0.1' (")
    assert proc.stderr.count("\n") == 1  # no line of gRPC's own before it


def test_a_port_another_process_holds_is_one_line_naming_the_option() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = _refused(f"127.0.0.1:{port}")
    assert proc.returncode == 2
    assert proc.stderr == (f"error: --listen '127.0.0.1:{port}': port {port} is taken (Address "
                           "already in use)\n")  # no line of gRPC's own before it


def test_a_port_above_65535_is_refused_instead_of_wrapping_around() -> None:
    proc = _refused("127.0.0.1:99999")  # gRPC served it on port 99999 - 65536 = 34463
    assert proc.returncode == 2
    assert proc.stderr == ("error: --listen '127.0.0.1:99999': expected HOST:PORT (port 0: a "
                           "free port)\n")


def _allowed_cpus(pid: int) -> set[str]:
    """Cpus_allowed_list of every thread of ``pid`` (a thread that ends meanwhile is skipped)."""
    found: set[str] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except FileNotFoundError:
            continue
        found.update(line.split(":", 1)[1].strip() for line in status.splitlines()
                     if line.startswith("Cpus_allowed_list:"))
    return found


def test_serve_with_cpus_pins_every_server_thread_to_them() -> None:
    cpu = max(os.sched_getaffinity(0))
    with _serving("--cpus", str(cpu)) as (proc, addr):
        with grpc.insecure_channel(addr) as channel:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert _allowed_cpus(proc.pid) == {str(cpu)}
        assert f"pinned to CPU(s) {cpu}" in _stopped(proc)


def test_serve_refuses_cpus_it_may_not_use_naming_the_option() -> None:
    cpu = max(os.sched_getaffinity(0)) + 1
    proc = _refused("127.0.0.1:0", "--cpus", f"0,{cpu}")
    assert proc.returncode == 2
    assert "--cpus" in proc.stderr and f"[{cpu}] not among" in proc.stderr


def test_serve_with_metrics_listen_serves_prometheus_metrics_until_stopped() -> None:
    with _serving("--metrics-listen", "127.0.0.1:0") as (proc, _):
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("metrics on http://127.0.0.1:") and line.endswith("/metrics")
        with urllib.request.urlopen(line.rsplit(" ", 1)[-1], timeout=10) as response:
            text = response.read().decode()
        assert "headroom_placement_bindings 0.0" in text
        assert "headroom_placement_inventory_gpus 0.0" in text
        _stopped(proc)


def test_serve_refuses_a_metrics_address_it_cannot_serve_naming_the_option() -> None:
    proc = _refused("127.0.0.1:0", "--metrics-listen", "9464")
    assert proc.returncode == 2
    assert "--metrics-listen" in proc.stderr and "expected HOST:PORT" in proc.stderr


def test_a_stop_sent_the_moment_the_address_is_printed_still_stops_cleanly() -> None:
    for _ in range(3):  # a supervisor may stop the server as soon as it reads the address
        with _serving() as (proc, _address):
            _stopped(proc)
