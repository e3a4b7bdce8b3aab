"""A restarted control plane keeps the fleet's MIG layouts, against the Kubernetes API test
server: a brand-new control plane (fresh store, fresh placement engine, no plan of its own) reads
a node's layout from its ``nvidia.com/mig.config`` label through the real Kubernetes reader,
takes it as PlanFleet's prior, and over its first ticks (longer than a busy node's settling time)
neither relabels the node nor evicts the model's pods from it. A node whose layout serves
nothing is still re-laid out (the fake MIG manager applies the new config): the prior, not
inertia, keeps the first."""

from __future__ import annotations

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

from controlplane.adapters.k8s.backend import K8sBackend
from controlplane.adapters.k8s.manifests import config_map, mig_parted_document, with_mig_configs
from controlplane.adapters.k8s.names import MIG_PARTED_KEY
from controlplane.domain.actions import RelayoutMig
from controlplane.domain.mig_layout import config_name, uniform
from controlplane.domain.observed import ModelLoad
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.sim.clock import VirtualClock
from tests.restart_scenario import A100, CHAT, RATE_RPS, relayouts_asked

NODE = "a100-1"
TICK_S = 30


def _seed(server: ApiServer, held: tuple[str, ...], running: int) -> str:
    """One one-GPU A100-80GB node holding ``held`` (the config a previous Headroom wrote to
    mig-parted's ConfigMap and labelled the node with, applied), ``running`` of the model's 2
    replicas on it; returns the config's name."""
    layout = uniform(A100, held)
    name = config_name(layout)
    settings = k8s_settings().k8s
    server.seed(config_map(settings.mig_config_map, GPU_OPERATOR_NS, {
        MIG_PARTED_KEY: mig_parted_document(with_mig_configs({}, {name: layout}))}))
    server.seed(nodepool("a100-80gb", limits={"nodes": "1"}))
    slices = {f"nvidia.com/mig-{p}": str(held.count(p)) for p in set(held)}
    server.seed(gpu_node(NODE, gpus=1, mig_config=name, allocatable=slices))
    server.seed(model_deployment(CHAT.name, name="chat", replicas=2, ready=running))
    for i in range(running):
        server.seed(gpu_pod(f"chat-{i}", NODE, labels={"app": "chat"},
                            requests={f"nvidia.com/mig-{held[i]}": "1"},
                            owner_kind="Deployment", owner_name="chat"))
    return name


def _restarted_loop(server: ApiServer, clock: VirtualClock, url: str, running: int,
                    mig: FakeMigManager) -> tuple[list[TickReport], K8sBackend]:
    """Six leader ticks (3 min, past a busy node's settling time) of a control plane started
    on the seeded fleet, seeing the model's RATE_RPS; the fake MIG manager acts between ticks."""
    backend = make_backend(server, clock, load=FixedLoads(
        {CHAT.name: ModelLoad(RATE_RPS, running * CHAT.profile[0].throughput_rps)}))
    return leader_ticks(backend, clock, url, CHAT, mig, tick_s=TICK_S), backend


def _evictions(server: ApiServer) -> list[str]:
    return [w.path for w in server.writes() if w.path.endswith("/eviction")]


def test_a_restarted_control_plane_keeps_a_busy_nodes_layout_that_serves_the_demand(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    held = _seed(apiserver, ("2g.20gb", "2g.20gb"), running=2)
    mig = FakeMigManager(apiserver, clock=clock)
    reports, backend = _restarted_loop(apiserver, clock, sqlite_url, running=2, mig=mig)
    assert all(r.status is TickStatus.APPLIED for r in reports), [r.reason for r in reports]
    assert relayouts_asked(reports) == 0 and backend.relayouts.relayouts_of(NODE) == ()
    first = reports[0].placement
    assert first is not None
    assert sorted(s.mig_profile for s in first.segments) == ["2g.20gb", "2g.20gb"]
    assert {s.gpu_id for s in first.segments} == {f"{NODE}/0"}
    labels = apiserver.get("v1", "Node", NODE)["metadata"]["labels"]
    assert labels[MIG_CONFIG] == held and mig.applied == []
    assert _evictions(apiserver) == []
    assert {p["metadata"]["name"] for p in apiserver.list("v1", "Pod")} == {"chat-0", "chat-1"}
    assert not apiserver.get("v1", "Node", NODE)["spec"].get("unschedulable")
    assert assert_schema_valid(apiserver) >= 5


def test_a_restarted_control_plane_still_re_lays_out_a_layout_that_cannot_serve_the_demand(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    held = _seed(apiserver, ("1g.10gb",), running=0)  # no 1g point: the replicas stay Pending
    mig = FakeMigManager(apiserver, clock=clock)
    reports, _ = _restarted_loop(apiserver, clock, sqlite_url, running=0, mig=mig)
    asked = [a for r in reports if r.plan for a in r.plan.actions if isinstance(a, RelayoutMig)]
    assert asked and asked[0].node == NODE
    assert asked[0].to_layout.profiles_of(0) != ("1g.10gb",)
    to = config_name(asked[0].to_layout)
    labels = apiserver.get("v1", "Node", NODE)["metadata"]["labels"]
    assert labels[MIG_CONFIG] == to != held
    assert (NODE, f"{to}:success") in mig.applied
    assert assert_schema_valid(apiserver) >= 4
