"""Nodes a user's GPU DaemonSet holds, against the Kubernetes API test server: the reader
observes the pods a drain leaves that hold a node's GPUs (not the GPU Operator's, not finished
ones), the observation survives the store's codec, and the reconcile loop re-lays out the
pool's other node instead of asking, every tick, for a re-layout the adapter refuses."""

from __future__ import annotations

from typing import Any

from apiserver import ApiServer
from fake_controllers import MIG_CONFIG, FakeMigManager
from k8s_builders import (
    GPU_OPERATOR_NS,
    gpu_node,
    gpu_pod,
    k8s_settings,
    model_deployment,
    nodepool,
)
from k8s_harness import FixedLoads, assert_schema_valid, leader_ticks, make_backend

from controlplane.adapters.k8s.manifests import config_map, mig_parted_document, with_mig_configs
from controlplane.adapters.k8s.names import MIG_PARTED_KEY
from controlplane.domain.actions import RelayoutMig
from controlplane.domain.mig_layout import config_name, uniform
from controlplane.domain.observed import ModelLoad
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.sim.clock import VirtualClock
from controlplane.store.codec import observed_from_json, observed_to_json
from tests.restart_scenario import A100, CHAT, RATE_RPS

SLICE = "nvidia.com/mig-1g.10gb"
PROBE = "monitoring/gpu-probe-a100-1"
HELD_WHY = f"relayout_skipped:a100-1:gpu_daemon_pods:{PROBE}"


def daemon_pod(name: str, node: str, namespace: str, requests: dict[str, str],
               phase: str = "Running") -> dict[str, Any]:
    return gpu_pod(name, node, namespace=namespace, requests=requests, owner_kind="DaemonSet",
                   owner_name=name.removesuffix(f"-{node}"), phase=phase)


def _seed(server: ApiServer) -> str:
    """Two empty one-GPU A100-80GB nodes laid out as one 1g.10gb (which serves nothing the
    model can run on), a user's DaemonSet pod holding a100-1's slice; returns the layout's
    config."""
    held = uniform(A100, ("1g.10gb",))
    name = config_name(held)
    server.seed(config_map(k8s_settings().k8s.mig_config_map, GPU_OPERATOR_NS, {
        MIG_PARTED_KEY: mig_parted_document(with_mig_configs({}, {name: held}))}))
    server.seed(nodepool("a100-80gb", limits={"nodes": "2"}))
    for node in ("a100-1", "a100-2"):
        server.seed(gpu_node(node, gpus=1, mig_config=name, allocatable={SLICE: "1"}))
    server.seed(daemon_pod("gpu-probe-a100-1", "a100-1", "monitoring", {SLICE: "1"}))
    server.seed(model_deployment(CHAT.name, name="chat", replicas=2, ready=0))
    return name


def test_the_reader_observes_a_users_gpu_daemonset_pod_as_holding_its_node(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    _seed(apiserver)
    apiserver.seed(daemon_pod("nvidia-dcgm-exporter-a100-2", "a100-2", GPU_OPERATOR_NS,
                              {SLICE: "1"}))
    apiserver.seed(daemon_pod("gpu-burn-a100-2", "a100-2", "monitoring", {SLICE: "1"},
                              phase="Succeeded"))
    apiserver.seed(daemon_pod("fluent-bit-a100-2", "a100-2", "logging", {}))
    observed = make_backend(apiserver, clock).reader.snapshot()
    held = {n.name: n.undrained_gpu_pods for n in observed.nodes}
    assert held == {"a100-1": (PROBE,), "a100-2": ()}
    assert {n.name: n.gpu_pods for n in observed.nodes} == {"a100-1": 0, "a100-2": 0}
    assert observed_from_json(observed_to_json(observed)) == observed


def _ticks(server: ApiServer, clock: VirtualClock, url: str, mig: FakeMigManager
           ) -> list[TickReport]:
    """Six leader ticks, 30 s apart, of a control plane on the seeded fleet seeing the model's
    RATE_RPS; the fake MIG manager acts between ticks."""
    backend = make_backend(server, clock, load=FixedLoads({CHAT.name: ModelLoad(RATE_RPS, 0.0)}))
    return leader_ticks(backend, clock, url, CHAT, mig)


def test_the_loop_re_lays_out_the_pools_other_node_and_says_why_it_passed_the_held_one_over(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    held = _seed(apiserver)
    mig = FakeMigManager(apiserver, clock=clock)
    reports = _ticks(apiserver, clock, sqlite_url, mig)
    assert all(r.status is TickStatus.APPLIED for r in reports), [r.reason for r in reports]
    asked = [a for r in reports if r.plan for a in r.plan.actions if isinstance(a, RelayoutMig)]
    assert asked and {a.node for a in asked} == {"a100-2"}
    first = next(r.plan for r in reports if r.plan and r.plan.actions)
    assert HELD_WHY in [s.reason for s in first.skipped]
    to = config_name(asked[0].to_layout)
    assert (("a100-2", f"{to}:success") in mig.applied and
            apiserver.get("v1", "Node", "a100-2")["metadata"]["labels"][MIG_CONFIG] == to)
    one = apiserver.get("v1", "Node", "a100-1")
    assert one["metadata"]["labels"][MIG_CONFIG] == held
    assert not one["spec"].get("unschedulable")
    assert assert_schema_valid(apiserver) >= 4
