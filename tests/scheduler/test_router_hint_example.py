"""deploy/examples/router_hint.py, the minimal router loop on RankReplicas, run as a subprocess
against a real placement server on 127.0.0.1: in plaintext, and with TLS and a bearer token."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from placement_builders import make_node, make_place

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.engine import PlacementEngine
from scheduler.security import TransportSecurity
from scheduler.server import create_server, stop

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "examples" / "router_hint.py"
TOKEN = "router-token"


def _router(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(EXAMPLE), "--addr", f"127.0.0.1:{port}", *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def _engine() -> PlacementEngine:
    """llama-0 on n0, llama-1 on n1 (one GPU each)."""
    engine = PlacementEngine()
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0", gpus=1),
                                                         make_node("n1", gpus=1)]))
    for workload_id in ("llama-0", "llama-1"):
        engine.place(make_place(workload_id))
    return engine


def _node(engine: PlacementEngine, workload_id: str) -> str:
    binding = engine.binding(workload_id)
    assert binding is not None
    return binding.node


@pytest.fixture
def plaintext() -> Iterator[tuple[int, PlacementEngine]]:
    engine = _engine()
    server, port = create_server("127.0.0.1:0", engine)
    try:
        yield port, engine
    finally:
        stop(server, grace_s=0.5)


def test_the_router_routes_to_the_replica_headroom_ranks_first(
        plaintext: tuple[int, PlacementEngine]) -> None:
    port, engine = plaintext
    node_of = {w: _node(engine, w) for w in ("llama-0", "llama-1")}
    # its stand-in metrics: llama-0 has 4 waiting and half its KV cache, llama-1 none and 20 %
    done = _router(port)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"route to llama-1 on {node_of['llama-1']} (score 0.800)\n"

    done = _router(port, "--replica", "llama-0=0", "--replica", "llama-1=3", "--rounds", "2",
                   "--interval-s", "0")
    first = f"route to llama-0 on {node_of['llama-0']} (score 1.000)"
    assert done.stdout.splitlines() == [first, first]


def test_the_router_moves_off_a_cordoned_node_and_says_when_nothing_is_bound(
        plaintext: tuple[int, PlacementEngine]) -> None:
    port, engine = plaintext
    idle_node = _node(engine, "llama-0")
    cordoned = make_node(idle_node, gpus=1)
    cordoned.unschedulable = True
    other = make_node("n1" if idle_node == "n0" else "n0", gpus=1)
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[cordoned, other]))
    done = _router(port, "--replica", "llama-0=0", "--replica", "llama-1=9")
    assert done.stdout.startswith(f"route to llama-1 on {other.name} (score 0.100)")

    done = _router(port, "--replica", "gone-0=0")
    assert (done.returncode, done.stdout) == (1, "")
    assert "place them again" in done.stderr


def test_the_router_speaks_tls_with_a_bearer_token(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    files = {"server.crt": b"".join(blob.bytes() for blob in cert.cert_chain_pems),
             "server.key": cert.private_key_pem.bytes(), "ca.crt": ca.cert_pem.bytes(),
             "token": f"{TOKEN}\n".encode()}
    for name, blob in files.items():
        (tmp_path / name).write_bytes(blob)
    security = TransportSecurity(tls_cert_file=tmp_path / "server.crt",
                                 tls_key_file=tmp_path / "server.key",
                                 token_file=tmp_path / "token")
    engine = _engine()
    server, port = create_server("127.0.0.1:0", engine, security=security)
    try:
        tls = ("--ca-file", str(tmp_path / "ca.crt"))
        done = _router(port, *tls, "--token-file", str(tmp_path / "token"),
                       "--replica", "llama-0=1", "--replica", "llama-1=0")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("route to llama-1 on ")
        refused = _router(port, *tls, "--replica", "llama-0=1")
        assert refused.returncode == 2
        assert refused.stderr.startswith("error: RankReplicas: UNAUTHENTICATED: no bearer token")
    finally:
        stop(server, grace_s=0.5)
