"""A MIG relayout and the pods a drain leaves on the node (API test server): a user's DaemonSet
pod that requests GPUs holds the relayout before the cordon, naming it, and the relayout starts
once it is gone; one that arrives after the cordon holds the MIG label; the GPU Operator's own
DaemonSet pods, a DaemonSet pod that requests no GPU and a finished pod hold nothing."""

from __future__ import annotations

from typing import Any

from apiserver import ApiServer
from fake_controllers import FakeMigManager, FakeReplicaController
from k8s_builders import GPU_OPERATOR_NS, gpu_pod
from relayout_scenario import FROM, SLICE, TARGET, TO, relayout_actuator, seed
from test_mig_relayout_k8s import node_labels, run

from controlplane.domain.mig_relayout import RelayoutPhase
from controlplane.sim.clock import VirtualClock
from controlplane.store.relayout import MemoryRelayoutStore

PROBE_WHY = (
    "gpu_daemon_pods: monitoring/gpu-probe-a100-1 (requests GPUs and is left running by a drain "
    "(DaemonSet or static pods) and not stopped by the GPU Operator's MIG manager, which stops "
    "only its own; delete it, or keep it off the node with a nodeSelector or node affinity, "
    "then the relayout goes on)")


def daemon_pod(name: str, namespace: str, requests: dict[str, str],
               phase: str = "Running") -> dict[str, Any]:
    """A DaemonSet's pod on a100-1."""
    return gpu_pod(name, "a100-1", namespace=namespace, requests=requests,
                   owner_kind="DaemonSet", owner_name=name.removesuffix("-a100-1"), phase=phase)


def gpu_probe() -> dict[str, Any]:
    """A user's DaemonSet pod (not the GPU Operator's) that holds a MIG instance."""
    return daemon_pod("gpu-probe-a100-1", "monitoring", {SLICE: "1"})


def cordoned(server: ApiServer) -> bool:
    return bool(server.get("v1", "Node", "a100-1")["spec"].get("unschedulable"))


def test_a_user_daemonset_pod_requesting_gpus_holds_the_relayout_before_the_cordon_naming_it(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    apiserver.seed(gpu_probe())
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    writes = len(apiserver.writes())
    for _ in range(2):  # held on every tick while the pod runs
        clock.advance(30)
        refused = actuator.start_relayout("a100-1", TARGET, "placement_wants_3g")
        assert not refused.ok and refused.retryable
        assert refused.message == f"node a100-1: {PROBE_WHY}"
    assert store.relayouts_of("a100-1") == () and len(apiserver.writes()) == writes
    assert not cordoned(apiserver)
    assert node_labels(apiserver, "a100-1")["nvidia.com/mig.config"] == FROM
    apiserver.delete("v1", "Pod", "gpu-probe-a100-1", "monitoring")  # its owner moves it
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    mig_manager = FakeMigManager(apiserver, clock=clock)
    run(actuator, clock, mig_manager, FakeReplicaController(apiserver, "m", replicas=3))
    final = store.relayouts_of("a100-1")[-1]
    assert final.phase is RelayoutPhase.DONE, (final.phase, final.alert)
    assert node_labels(apiserver, "a100-1")["nvidia.com/mig.config"] == TO
    assert mig_manager.violations == []


def test_a_gpu_daemonset_pod_that_arrives_after_the_start_holds_the_mig_label_until_it_is_gone(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    apiserver.seed(gpu_probe())  # a DaemonSet's pod tolerates the cordon
    mig_manager = FakeMigManager(apiserver, clock=clock)
    replicas = FakeReplicaController(apiserver, "m", replicas=3)
    run(actuator, clock, mig_manager, replicas, ticks=10)
    held = store.relayouts_of("a100-1")[-1]
    assert held.is_active and held.wait_reason == PROBE_WHY, (held.phase, held.wait_reason)
    assert node_labels(apiserver, "a100-1")["nvidia.com/mig.config"] == FROM
    apiserver.delete("v1", "Pod", "gpu-probe-a100-1", "monitoring")
    run(actuator, clock, mig_manager, replicas)
    final = store.relayouts_of("a100-1")[-1]
    assert final.phase is RelayoutPhase.DONE, (final.phase, final.alert)
    assert node_labels(apiserver, "a100-1")["nvidia.com/mig.config"] == TO
    assert not cordoned(apiserver) and mig_manager.violations == []


def test_operator_daemonset_pods_a_log_shipper_and_finished_pods_do_not_hold_a_relayout(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)  # with the GPU Operator's device plugin pod on a100-1
    apiserver.seed(daemon_pod("nvidia-dcgm-exporter-a100-1", GPU_OPERATOR_NS, {SLICE: "1"}))
    apiserver.seed(daemon_pod("fluent-bit-a100-1", "logging", {}))
    apiserver.seed(daemon_pod("gpu-burn-a100-1", "monitoring", {SLICE: "1"}, phase="Failed"))
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    started = actuator.start_relayout("a100-1", TARGET, "placement_wants_3g")
    assert started.ok, started.message
    mig_manager = FakeMigManager(apiserver, clock=clock)
    run(actuator, clock, mig_manager, FakeReplicaController(apiserver, "m", replicas=3))
    final = store.relayouts_of("a100-1")[-1]
    assert final.phase is RelayoutPhase.DONE, (final.phase, final.alert)
    assert node_labels(apiserver, "a100-1")["nvidia.com/mig.config"] == TO
    assert mig_manager.violations == []
