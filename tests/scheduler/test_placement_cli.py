"""`headroom placement serve`: prints the bound address, serves, stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parents[2]


def test_serve_prints_its_address_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from controlplane.cli.placement import app; app()", "serve",
         "--listen", "127.0.0.1:0"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("placement API listening on 127.0.0.1:")
        addr = line.rsplit(" ", 1)[-1]
        with grpc.insecure_channel(addr) as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="headroom.v1.Placement"), timeout=10)
            assert status.status == health_pb2.HealthCheckResponse.SERVING
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "placement API stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_reports_an_address_it_cannot_bind() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from controlplane.cli.placement import app; app()", "serve",
         "--listen", "256.0.0.1:1"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "cannot listen on 256.0.0.1:1" in proc.stderr


def _allowed_cpus(pid: int) -> set[str]:
    """Cpus_allowed_list of every thread of ``pid`` (a thread that ends meanwhile is skipped)."""
    found = set()
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
    proc = subprocess.Popen(
        [sys.executable, "-c", "from controlplane.cli.placement import app; app()", "serve",
         "--listen", "127.0.0.1:0", "--cpus", str(cpu)], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("placement API listening on 127.0.0.1:")
        with grpc.insecure_channel(line.rsplit(" ", 1)[-1]) as channel:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert _allowed_cpus(proc.pid) == {str(cpu)}
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and f"pinned to CPU(s) {cpu}" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_refuses_cpus_it_may_not_use_naming_the_option() -> None:
    cpu = max(os.sched_getaffinity(0)) + 1
    proc = subprocess.run(
        [sys.executable, "-c", "from controlplane.cli.placement import app; app()", "serve",
         "--listen", "127.0.0.1:0", "--cpus", f"0,{cpu}"], cwd=REPO, capture_output=True,
        text=True, timeout=60)
    assert proc.returncode == 2
    assert "--cpus" in proc.stderr and f"[{cpu}] not among" in proc.stderr


def test_serve_with_metrics_listen_serves_prometheus_metrics_until_stopped() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from controlplane.cli.placement import app; app()", "serve",
         "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("placement API listening on 127.0.0.1:")
        line = proc.stdout.readline().strip()
        assert line.startswith("metrics on http://127.0.0.1:") and line.endswith("/metrics")
        with urllib.request.urlopen(line.rsplit(" ", 1)[-1], timeout=10) as response:
            text = response.read().decode()
        assert "headroom_placement_bindings 0.0" in text
        assert "headroom_placement_inventory_gpus 0.0" in text
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "placement API stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_refuses_a_metrics_address_it_cannot_serve_naming_the_option() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from controlplane.cli.placement import app; app()", "serve",
         "--listen", "127.0.0.1:0", "--metrics-listen", "9464"], cwd=REPO, capture_output=True,
        text=True, timeout=60)
    assert proc.returncode == 2
    assert "--metrics-listen" in proc.stderr and "expected HOST:PORT" in proc.stderr
