"""The loop's node stage against the API test server: the reader sees layouts, sharing and GPU
pods; the plan's re-layout and sharing change go through the Kubernetes actuators, and the next
tick, seeing them under way, plans nothing more."""

from __future__ import annotations

from apiserver import ApiServer
from k8s_builders import gpu_node, gpu_pod, nodepool
from k8s_harness import assert_schema_valid, make_backend

from controlplane.actuation import apply_actions
from controlplane.domain.actions import ApplySharing, RelayoutMig
from controlplane.domain.guards import GuardMemory
from controlplane.domain.models import SharingMode
from controlplane.domain.node_plan import NodeConfigLimits, node_config_plan
from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.domain.sharing_config import SharingLayout
from controlplane.sim.clock import VirtualClock

MPS4 = SharingLayout(SharingMode.MPS, 4)


def _placement() -> FleetPlacement:
    slices = tuple(PlacedSegment("small", "A100-80GB/0", "A100-80GB", "mig", "1g.10gb", i, 1,
                                 10.0) for i in range(7))
    shared = tuple(PlacedSegment("embed", f"L4/{i}", "L4", "mps", "", 0, 0, 40.0, 4)
                   for i in range(4))
    return FleetPlacement(1, (*slices, *shared), (), (), 0.0, ())


def test_the_node_stage_re_lays_out_an_empty_node_and_shares_a_busy_one_through_the_api(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb", limits={"nodes": "1"}))
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    apiserver.seed(gpu_node("a100-1", mig_config="all-disabled"))
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    apiserver.seed(gpu_pod("embed-0", "l4-1", requests={"nvidia.com/gpu": "1"}))
    backend = make_backend(apiserver, clock)
    assert backend.elector.try_acquire_or_renew(clock.now())
    observed = backend.reader.snapshot()
    nodes = {n.name: n for n in observed.nodes}
    assert nodes["a100-1"].gpu_pods == 0 and nodes["l4-1"].gpu_pods == 1
    pools = backend.reader.pools
    plan = node_config_plan(_placement(), observed, pools, backend.mig.in_flight(),
                            GuardMemory(), NodeConfigLimits(), clock.now())
    assert [(type(a).__name__, a.node) for a in plan.actions] == [
        ("RelayoutMig", "a100-1"), ("ApplySharing", "l4-1")]
    relayout, sharing = plan.actions
    assert isinstance(relayout, RelayoutMig) and isinstance(sharing, ApplySharing)
    assert relayout.to_layout.profiles_of(0) == ("1g.10gb",) * 7
    assert sharing.to_layout == MPS4

    started, written = apply_actions(plan.actions, backend.actuators)
    assert started.ok, started.message
    assert backend.mig.in_flight() == {"a100-1": relayout.to_layout}
    # the sharing config is written, and selects the node once the plugin's file holds it
    assert not written.ok and written.retryable
    assert written.message.startswith("config_propagating: headroom-mps-4")
    labels = apiserver.get("v1", "Node", "l4-1")["metadata"]["labels"]
    assert "nvidia.com/device-plugin.config" not in labels

    clock.advance(120)
    assert backend.elector.try_acquire_or_renew(clock.now())
    pending = node_config_plan(_placement(), backend.reader.snapshot(), pools,
                               backend.mig.in_flight(), plan.memory, NodeConfigLimits(),
                               clock.now())
    assert pending.actions == (sharing,)  # not done: the next tick applies it again
    assert all(o.ok for o in apply_actions(pending.actions, backend.actuators))
    labels = apiserver.get("v1", "Node", "l4-1")["metadata"]["labels"]
    assert labels["nvidia.com/device-plugin.config"] == "headroom-mps-4"

    again = node_config_plan(_placement(), backend.reader.snapshot(), pools,
                             backend.mig.in_flight(), pending.memory, NodeConfigLimits(),
                             clock.now())
    assert again.actions == () and again.skipped == ()
    assert assert_schema_valid(apiserver) > 0


def test_an_mps_node_the_plan_needs_as_mig_is_set_exclusive_and_its_relayout_waits_retryably(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb", limits={"nodes": "1"}))
    apiserver.seed(gpu_node("a100-1", gpus=1, mig_config="all-disabled", sharing="mps",
                            extra_labels={"nvidia.com/device-plugin.config": "headroom-mps-4",
                                          "nvidia.com/gpu.replicas": "4"}))
    backend = make_backend(apiserver, clock)
    assert backend.elector.try_acquire_or_renew(clock.now())
    slices = FleetPlacement(1, _placement().segments[:7], (), (), 0.0, ())
    pools, limits = backend.reader.pools, NodeConfigLimits()
    plan = node_config_plan(slices, backend.reader.snapshot(), pools, backend.mig.in_flight(),
                            GuardMemory(), limits, clock.now())
    assert [(type(a).__name__, a.reason) for a in plan.actions] == [
        ("ApplySharing", "exclusive_before_mig"), ("RelayoutMig", "plan_needs_mig")]
    written, waiting = apply_actions(plan.actions, backend.actuators)
    assert written.message.startswith("config_propagating: headroom-exclusive")
    assert not waiting.ok and waiting.retryable  # not started before the sharing it needs
    assert waiting.message.startswith("not started: the sharing it needs first is not applied "
                                      "(config_propagating: headroom-exclusive")
    clock.advance(120)
    assert backend.elector.try_acquire_or_renew(clock.now())
    plan = node_config_plan(slices, backend.reader.snapshot(), pools, backend.mig.in_flight(),
                            plan.memory, limits, clock.now())
    exclusive, relayout = apply_actions(plan.actions, backend.actuators)
    assert exclusive.ok, exclusive.message
    # GFD still reports MPS until the device plugin has restarted without it
    assert not relayout.ok and relayout.retryable
    assert relayout.message == (
        "mps_still_running: node a100-1 selects nvidia.com/device-plugin.config="
        "headroom-exclusive but nvidia.com/gpu.sharing-strategy is still mps; waiting for the "
        "device plugin")
    assert backend.mig.in_flight() == {}
    apiserver.update("v1", "Node", "a100-1", {"metadata": {"labels": {
        "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.replicas": "1"}}},
        manager="gpu-feature-discovery")
    clock.advance(30)
    assert backend.elector.try_acquire_or_renew(clock.now())
    again = node_config_plan(slices, backend.reader.snapshot(), pools, backend.mig.in_flight(),
                             plan.memory, limits, clock.now())
    assert [type(a).__name__ for a in again.actions] == ["RelayoutMig"]
    started, = apply_actions(again.actions, backend.actuators)
    assert started.ok, started.message
    assert set(backend.mig.in_flight()) == {"a100-1"}
    assert assert_schema_valid(apiserver) > 0
