"""The warm-capacity placeholder Deployment on the API test server, on a pool of a MIG-capable
product (its nodes may be MIG-partitioned: under the mixed strategy a MIG GPU advertises
nvidia.com/mig-<profile> and no nvidia.com/gpu) and on a pool of a product without MIG (its
nodes may be time-sliced or MPS-shared, where a request of more than one GPU fails admission):
on either it asks for no GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from apiserver import ApiServer
from k8s_builders import HEADROOM_NS, gpu_node, gpu_pod, k8s_settings, nodepool
from k8s_harness import assert_schema_valid, client_for, leading
from pod_security import restricted_problems
from relayout_scenario import SLICE, TARGET, relayout_actuator, seed

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.quantity import count
from controlplane.adapters.k8s.reader import K8sClusterReader
from controlplane.domain.mig_relayout import RelayoutPhase
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import SharingLayout
from controlplane.settings import pool_specs
from controlplane.sim.clock import VirtualClock
from controlplane.store.relayout import MemoryRelayoutStore

HOSTNAME = "kubernetes.io/hostname"
NAMESPACE_YAML = Path(__file__).resolve().parents[2] / "deploy" / "namespace.yaml"
MIG_NODE = {"nvidia.com/mig-1g.10gb": "14", "nvidia.com/mig-3g.40gb": "4"}  # 2 GPUs, MIG on



def placeholder(server: ApiServer, pool: str) -> dict[str, Any]:
    return server.get("apps/v1", "Deployment", f"headroom-warm-{pool}", HEADROOM_NS)


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def schedulable_on(template: dict[str, Any], node: dict[str, Any],
                   pods_on_node: list[dict[str, Any]]) -> list[str]:
    """Why kube-scheduler would not bind a pod of ``template`` to ``node`` (its resource fit,
    nodeSelector and required pod anti-affinity on the hostname); [] when it would."""
    spec, labels = template["spec"], node["metadata"]["labels"]
    allocatable = node["status"]["allocatable"]
    why = [f"nodeSelector {k}={v}" for k, v in spec.get("nodeSelector", {}).items()
           if labels.get(k) != v]
    free = {r: count(q) for r, q in allocatable.items()}
    for pod in pods_on_node:
        for container in pod["spec"]["containers"]:
            for resource, quantity in container["resources"].get("requests", {}).items():
                free[resource] = free.get(resource, 0) - count(quantity)
    for container in spec["containers"]:
        for resource, quantity in container["resources"].get("requests", {}).items():
            if count(quantity) > free.get(resource, 0):
                why.append(f"Insufficient {resource}")
    terms = (spec.get("affinity", {}).get("podAntiAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", []))
    for term in terms:
        if term["topologyKey"] == HOSTNAME and any(
                _matches(term["labelSelector"], p["metadata"].get("labels") or {})
                for p in pods_on_node):
            why.append("anti-affinity: a matching pod is on the node")
    return why


def _gpu_resources(template: dict[str, Any]) -> set[str]:
    resources = template["spec"]["containers"][0]["resources"]
    return {r for part in resources.values() for r in part if r.startswith("nvidia.com/")}


def test_a_mig_capable_pools_placeholders_ask_for_no_gpu_and_hold_one_node_each(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    outcome = leading(apiserver, clock).node_pools.set_size("a100-80gb", 3)
    assert outcome.ok, outcome.message
    deployment = placeholder(apiserver, "a100-80gb")
    template = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] == 3
    assert _gpu_resources(template) == set()
    assert template["spec"]["nodeSelector"] == {"karpenter.sh/nodepool": "a100-80gb"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in template[
        "spec"]["tolerations"]
    assert template["spec"]["affinity"] == {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"headroom.dev/warm-pool": "a100-80gb"}},
            "topologyKey": HOSTNAME}]}}
    assert _matches(template["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"],
        template["metadata"]["labels"])  # its own pods: one per node
    assert assert_schema_valid(apiserver) >= 3


def test_an_empty_mig_partitioned_node_takes_one_placeholder_of_its_pool_and_no_second(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    mig_node = gpu_node("a100-mig", gpus=2, mig_config="all-balanced", allocatable=MIG_NODE)
    apiserver.seed(mig_node)
    assert leading(apiserver, clock).node_pools.set_size("a100-80gb", 2).ok
    template = placeholder(apiserver, "a100-80gb")["spec"]["template"]
    # the warm node holds a pod, so consolidation does not take it for empty
    assert schedulable_on(template, mig_node, []) == []
    running = gpu_pod("headroom-warm-a100-80gb-0", "a100-mig", namespace=HEADROOM_NS,
                      requests={}, labels=dict(template["metadata"]["labels"]))
    # the second stays pending: Karpenter brings up a node of its own for it
    assert schedulable_on(template, mig_node, [running]) == [
        "anti-affinity: a matching pod is on the node"]


def test_a_pool_without_mig_asks_for_no_gpu_either_and_holds_one_node_each(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    assert leading(apiserver, clock).node_pools.set_size("l4", 2).ok
    deployment = placeholder(apiserver, "l4")
    labels = {"headroom.dev/warm-pool": "l4"}
    assert deployment["spec"] == {
        "replicas": 2, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {
            "priorityClassName": "headroom-warm-placeholder",
            "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65535, "runAsGroup": 65535,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "nodeSelector": {"karpenter.sh/nodepool": "l4"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                                          "limits": {"memory": "16Mi"}},
                            "securityContext": {"allowPrivilegeEscalation": False,
                                                "readOnlyRootFilesystem": True,
                                                "capabilities": {"drop": ["ALL"]}}}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": HOSTNAME}]}}}}}
    l4_node = gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4")
    assert schedulable_on(deployment["spec"]["template"], l4_node, []) == []
    assert assert_schema_valid(apiserver) >= 3


@pytest.mark.parametrize(("pool", "gpu_name"), [("a100-80gb", "a100"), ("l4", "l4")])
def test_placeholder_pods_meet_the_pod_security_level_of_the_namespace_deploy_puts_them_in(
        apiserver: ApiServer, clock: VirtualClock, pool: str, gpu_name: str) -> None:
    namespace = yaml.safe_load(NAMESPACE_YAML.read_text())
    assert namespace["metadata"]["name"] == HEADROOM_NS
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    apiserver.seed(nodepool(pool, gpu_name=gpu_name))
    assert leading(apiserver, clock).node_pools.set_size(pool, 2).ok
    pod = placeholder(apiserver, pool)["spec"]["template"]["spec"]
    # the admission controller refuses every pod the ReplicaSet creates otherwise
    assert restricted_problems(pod) == []
    assert pod["securityContext"]["runAsUser"] == 65535  # the pause image's user
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_a_time_sliced_node_takes_one_placeholder_of_its_pool_not_several(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    backend = leading(apiserver, clock)
    assert backend.node_pools.set_size("l4", 3).ok
    # the sharing actuator may switch any L4 node to time-slicing at any time; the config it
    # writes makes kubelet refuse a pod asking for more than one shared GPU
    # (failRequestsGreaterThanOne: UnexpectedAdmissionError), so a whole-node placeholder
    # would fail admission there
    slicing = SharingLayout(SharingMode.TIME_SLICING, 3)
    assert not backend.sharing.apply_sharing("l4-1", slicing).ok  # its config propagates first
    clock.advance(120)
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert backend.sharing.apply_sharing("l4-1", slicing).ok
    config_name = apiserver.get("v1", "Node", "l4-1")["metadata"]["labels"][
        "nvidia.com/device-plugin.config"]
    config = yaml.safe_load(apiserver.get("v1", "ConfigMap", "headroom-device-plugin-config",
                                          "gpu-operator")["data"][config_name])
    assert config["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] is True
    template = placeholder(apiserver, "l4")["spec"]["template"]
    assert _gpu_resources(template) == set()
    # time-slicing (and MPS) with renameByDefault false advertise GPUs x replicas as
    # nvidia.com/gpu: 4 L4s shared 3 ways offer 12, and without the anti-affinity several
    # placeholders would share one node while the pool's other nodes go empty
    shared = gpu_node("l4-shared", product="NVIDIA-L4", gpus=4, nodepool="l4",
                      sharing="time-slicing", allocatable={"nvidia.com/gpu": "12"},
                      extra_labels={"nvidia.com/gpu.replicas": "3"})
    running = gpu_pod("headroom-warm-l4-0", "l4-shared", namespace=HEADROOM_NS,
                      requests={}, labels=dict(template["metadata"]["labels"]))
    assert schedulable_on(template, shared, []) == []
    assert schedulable_on(template, shared, [running]) == [
        "anti-affinity: a matching pod is on the node"]


def test_the_reader_takes_headroom_s_own_placeholders_on_either_kind_of_pool_as_intact(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    backend = leading(apiserver, clock)
    assert backend.node_pools.set_size("a100-80gb", 2).ok
    assert backend.node_pools.set_size("l4", 3).ok
    observed = backend.reader.snapshot()
    for pool, nodes in (("a100-80gb", 2), ("l4", 3)):
        seen = observed.pool(pool)
        assert seen is not None and seen.target_intact and seen.target_nodes == nodes
    assert not [note for note in observed.notes if "outside Headroom" in note]


@pytest.mark.parametrize(("pool", "gpu_name", "gpus"), [("a100-80gb", "a100", 8),
                                                        ("l4", "l4", 4)])
def test_a_placeholder_of_the_old_whole_gpu_shape_is_replaced_by_the_next_set_size(
        apiserver: ApiServer, clock: VirtualClock, pool: str, gpu_name: str, gpus: int) -> None:
    apiserver.seed(nodepool(pool, gpu_name=gpu_name))
    backend = leading(apiserver, clock)
    old = _whole_gpu_shape(pool, gpus, replicas=2)  # what an older Headroom applied
    backend.api.apply(old)
    assert _gpu_resources(placeholder(apiserver, pool)["spec"]["template"]) == {
        "nvidia.com/gpu"}
    assert backend.node_pools.set_size(pool, 2).ok
    template = placeholder(apiserver, pool)["spec"]["template"]
    assert _gpu_resources(template) == set()  # server-side apply dropped the fields it left
    assert "podAntiAffinity" in template["spec"]["affinity"]
    assert assert_schema_valid(apiserver) >= 3


def test_the_placeholders_a_relayout_surge_writes_fit_the_nodes_on_either_side_of_it(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver, spare_slots=1)  # a100-1 must be drained onto a surge node first
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    for _ in range(2):
        clock.advance(30)
        actuator.advance()
    assert store.relayouts_of("a100-1")[-1].phase is RelayoutPhase.SURGE
    deployment = placeholder(apiserver, "a100-80gb")
    assert deployment["spec"]["replicas"] == 3  # the surge floor
    template = deployment["spec"]["template"]
    mig_node = apiserver.get("v1", "Node", "a100-2")
    whole = gpu_node("a100-whole", gpus=1, mig_config="all-disabled")
    assert mig_node["status"]["allocatable"].get(SLICE) and "nvidia.com/gpu" not in mig_node[
        "status"]["allocatable"]
    # the surge node may come up MIG-partitioned or not: the placeholder holds either
    assert schedulable_on(template, mig_node, []) == []
    assert schedulable_on(template, whole, []) == []
    assert assert_schema_valid(apiserver) >= 3


def _whole_gpu_shape(pool: str, gpus: int, replicas: int) -> dict[str, Any]:
    labels = {"headroom.dev/warm-pool": pool}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"headroom-warm-{pool}", "namespace": HEADROOM_NS,
                         "labels": {**labels, "headroom.dev/pool": pool,
                                    "app.kubernetes.io/managed-by": "headroom"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "priorityClassName": "headroom-warm-placeholder",
                         "terminationGracePeriodSeconds": 0,
                         "automountServiceAccountToken": False,
                         "nodeSelector": {"karpenter.sh/nodepool": pool},
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                          "effect": "NoSchedule"}],
                         "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                         "resources": {
                                             "requests": {"nvidia.com/gpu": str(gpus),
                                                          "cpu": "10m", "memory": "16Mi"},
                                             "limits": {"nvidia.com/gpu": str(gpus),
                                                        "memory": "16Mi"}}}]}}}}


def test_placeholders_of_a_pool_no_longer_configured_are_named_in_the_notes(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    assert leading(apiserver, clock).node_pools.set_size("l4", 2).ok
    settings = k8s_settings()
    pools = tuple(p for p in pool_specs(settings) if p.name != "l4")  # l4 taken out of config
    reader = K8sClusterReader(KubeApi(client_for(apiserver), "headroom"), settings.k8s, pools,
                              clock)
    assert [n for n in reader.snapshot().notes if "headroom-warm-l4" in n] == [
        "placeholder Deployment headroom/headroom-warm-l4 holds 2 nodes for pool l4, which is "
        "not configured: nothing resizes it now; scale it to 0 or delete it to let the nodes "
        "go"]
    assert placeholder(apiserver, "l4")["spec"]["replicas"] == 2  # noted, not touched
