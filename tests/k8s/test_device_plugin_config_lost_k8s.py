"""Someone deletes the device-plugin ConfigMap Headroom writes its sharing configs to (a GitOps
prune, a GPU Operator reinstall) or drops Headroom's entry from it, while a node's
``nvidia.com/device-plugin.config`` label still names that config. The device plugin ignores a
name its ConfigMap does not hold (REFERENCE.md §2.1), so the node's sharing is not in force: the
reader notes it for ``headroom status`` and reads the node's sharing from the plugin's own labels,
as for a config that is not Headroom's; writing the sharing again puts the entry back."""

from __future__ import annotations

from apiserver import ApiServer
from k8s_builders import GPU_OPERATOR_NS, gpu_node, gpu_pod, nodepool
from k8s_harness import make_backend

from controlplane.actuation import apply_actions
from controlplane.domain.actions import ApplySharing
from controlplane.domain.guards import GuardMemory
from controlplane.domain.models import SharingMode
from controlplane.domain.node_plan import NodeConfigLimits, node_config_plan
from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.domain.sharing_config import SharingLayout
from controlplane.sim.clock import VirtualClock

CONFIG_MAP = "headroom-device-plugin-config"
MPS4 = SharingLayout(SharingMode.MPS, 4)


def _placement() -> FleetPlacement:
    shared = tuple(PlacedSegment("embed", f"L4/{i}", "L4", "mps", "", 0, 0, 40.0, 4)
                   for i in range(4))
    return FleetPlacement(1, shared, (), (), 0.0, ())


def _sharing_actions(apiserver: ApiServer, clock: VirtualClock) -> tuple[ApplySharing, ...]:
    backend = make_backend(apiserver, clock)
    plan = node_config_plan(_placement(), backend.reader.snapshot(), backend.reader.pools,
                            backend.mig.in_flight(), GuardMemory(), NodeConfigLimits(),
                            clock.now())
    return tuple(a for a in plan.actions if isinstance(a, ApplySharing))


def test_a_node_whose_sharing_config_was_deleted_is_noted_and_read_from_the_plugins_labels(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    apiserver.seed(gpu_pod("embed-0", "l4-1", requests={"nvidia.com/gpu": "1"}))
    backend = make_backend(apiserver, clock)
    assert backend.elector.try_acquire_or_renew(clock.now())
    first = _sharing_actions(apiserver, clock)
    assert [a.to_layout for a in first] == [MPS4]
    (written,) = apply_actions(first, backend.actuators)
    assert written.message.startswith("config_propagating: headroom-mps-4")
    clock.advance(120)  # the device plugin's mounted file holds it now: the node is labelled
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert all(o.ok for o in apply_actions(_sharing_actions(apiserver, clock), backend.actuators))
    assert _sharing_actions(apiserver, clock) == ()  # in force: nothing to do

    # the device plugin applied it (GFD's labels say so), then someone deletes the ConfigMap
    apiserver.update("v1", "Node", "l4-1", {"metadata": {"labels": {
        "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"}}})
    assert _sharing_actions(apiserver, clock) == ()
    apiserver.delete("v1", "ConfigMap", CONFIG_MAP, GPU_OPERATOR_NS)
    observed = backend.reader.snapshot()
    (note,) = [n for n in observed.notes if "device-plugin.config" in n]
    assert note == (f"node l4-1: selects nvidia.com/device-plugin.config=headroom-mps-4, which "
                    f"ConfigMap {GPU_OPERATOR_NS}/{CONFIG_MAP} does not hold (deleted or edited "
                    "outside Headroom): the device plugin ignores it; its sharing is read from "
                    "the plugin's labels until Headroom writes the config again")
    (l4,) = observed.nodes
    assert {(g.sharing, g.sharing_replicas) for g in l4.gpus} == {("mps", 4)}
    # writing the sharing again (the next change the plan makes) puts the entry back
    assert backend.sharing.apply_sharing("l4-1", MPS4).ok
    assert "headroom-mps-4" in apiserver.get("v1", "ConfigMap", CONFIG_MAP, GPU_OPERATOR_NS)[
        "data"]
    assert not [n for n in backend.reader.snapshot().notes if "device-plugin.config" in n]
