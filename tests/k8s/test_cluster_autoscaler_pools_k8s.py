"""Pools whose GPU node groups Cluster Autoscaler scales (k8s.node_provisioner:
cluster-autoscaler), on the API test server: there is no Karpenter NodePool, so a resize writes
only the placeholder Deployment, selecting the node group's label and recording the target on
itself, and the reader takes the pool's target and its drift from that Deployment."""

from __future__ import annotations

from typing import Any

import pytest
from apiserver import ApiServer
from k8s_builders import HEADROOM_NS, gpu_node, k8s_settings
from k8s_harness import assert_pool_drift_noted, assert_schema_valid, make_backend
from pod_security import restricted_problems

from controlplane.adapters.k8s.backend import K8sBackend
from controlplane.adapters.k8s.mig import relayout_view
from controlplane.adapters.k8s.node_pools import K8sNodePoolActuator
from controlplane.adapters.k8s.pool_targets import target_record
from controlplane.domain.mig_layout import uniform
from controlplane.domain.mig_relayout import RelayoutPolicy, start_relayout
from controlplane.settings import pool_specs
from controlplane.sim.clock import VirtualClock

PLACEHOLDERS = "headroom-warm-l4"
CA = {"node_provisioner": "cluster-autoscaler"}
# Cluster Autoscaler's default --expendable-pods-priority-cutoff: a pod of lower priority is
# expendable (CA neither scales up for it nor keeps a node for it)
CA_EXPENDABLE_CUTOFF = -10


def leading(server: ApiServer, clock: VirtualClock, **k8s: Any) -> K8sBackend:
    backend = make_backend(server, clock, **{**CA, **k8s})
    assert backend.elector.try_acquire_or_renew(clock.now())
    return backend


def node_group_node(name: str, group_labels: dict[str, str]) -> dict[str, Any]:
    """An L4 node of a Cluster Autoscaler node group: no Karpenter label, the group's labels
    from its node template."""
    node = gpu_node(name, product="NVIDIA-L4", gpus=4, extra_labels=group_labels)
    del node["metadata"]["labels"]["karpenter.sh/nodepool"]
    return node


def placeholders(server: ApiServer) -> dict[str, Any]:
    return server.get("apps/v1", "Deployment", PLACEHOLDERS, HEADROOM_NS)


def test_set_size_under_cluster_autoscaler_writes_placeholders_on_the_node_group_without_a_nodepool(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    outcome = leading(apiserver, clock).node_pools.set_size("l4", 3)
    assert outcome.ok, outcome.message
    deployment = placeholders(apiserver)
    assert deployment["spec"]["replicas"] == 3
    assert deployment["metadata"]["annotations"] == {"headroom.dev/target-nodes": "3"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"headroom.dev/pool": "l4"}
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"labelSelector": {"matchLabels": {"headroom.dev/warm-pool": "l4"}},
         "topologyKey": "kubernetes.io/hostname"}]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"]
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "10m", "memory": "16Mi"}
    assert restricted_problems(pod) == []
    # no safe-to-evict "false": CA may move a placeholder to converge on the target
    assert "annotations" not in deployment["spec"]["template"]["metadata"]
    # not expendable to Cluster Autoscaler: pending ones bring nodes, running ones keep them
    priority = apiserver.get("scheduling.k8s.io/v1", "PriorityClass", pod["priorityClassName"])
    assert priority["value"] >= CA_EXPENDABLE_CUTOFF
    assert not [r for r in apiserver.requests if "karpenter" in r.path]  # no NodePool read
    assert apiserver.list("karpenter.sh/v1", "NodePool") == []
    assert assert_schema_valid(apiserver) >= 2


def test_the_placeholders_and_the_inventory_agree_on_a_node_groups_own_label(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    group = {"eks.amazonaws.com/nodegroup": "gpu-l4"}
    apiserver.seed(node_group_node("l4-1", group))
    backend = leading(apiserver, clock, node_group_label="eks.amazonaws.com/nodegroup",
                      nodepool_names={"l4": "gpu-l4"})
    assert backend.node_pools.set_size("l4", 2).ok
    assert placeholders(apiserver)["spec"]["template"]["spec"]["nodeSelector"] == group
    inventory = backend.reader.inventory()
    node = inventory.node("l4-1")
    assert node is not None and node.pool == "l4"
    assert assert_schema_valid(apiserver) >= 3


def test_the_reader_takes_a_cluster_autoscaler_pools_target_from_its_placeholders(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(node_group_node("l4-1", {"headroom.dev/pool": "l4"}))
    backend = leading(apiserver, clock)
    before = backend.reader.snapshot()
    seen = before.pool("l4")
    assert seen is not None and seen.target_nodes == 1 and seen.target_intact  # not sized yet
    assert backend.node_pools.set_size("l4", 3).ok
    observed = backend.reader.snapshot()
    seen = observed.pool("l4")
    assert seen is not None
    assert (seen.nodes_ready, seen.target_nodes, seen.target_intact) == (1, 3, True)
    assert not [note for note in observed.notes if "outside Headroom" in note or "NodePool" in note]


def _scale_by_hand(server: ApiServer) -> None:
    server.update("apps/v1", "Deployment", PLACEHOLDERS, {"spec": {"replicas": 0}}, HEADROOM_NS,
                  manager="kubectl")


def _select_another_group(server: ApiServer) -> None:
    server.update("apps/v1", "Deployment", PLACEHOLDERS, {"spec": {"template": {"spec": {
        "nodeSelector": {"headroom.dev/pool": "a100-80gb"}}}}}, HEADROOM_NS,
                  manager="kubectl-edit")


@pytest.mark.parametrize(("change", "noted"), [
    (_scale_by_hand, "placeholder Deployment holds 0 nodes"),
    (_select_another_group, "placeholder Deployment headroom-warm-l4 selects nodes "
                            "headroom.dev/pool=a100-80gb, not headroom.dev/pool=l4")],
    ids=["replicas", "nodeSelector"])
def test_placeholders_edited_under_cluster_autoscaler_are_drift_and_the_same_target_is_written_back(
        apiserver: ApiServer, clock: VirtualClock, change: Any, noted: str) -> None:
    backend = leading(apiserver, clock)
    assert backend.node_pools.set_size("l4", 2).ok
    change(apiserver)
    assert_pool_drift_noted(backend.reader.snapshot(), "l4", noted, 2)
    assert backend.node_pools.set_size("l4", 2).ok
    assert placeholders(apiserver)["spec"]["replicas"] == 2
    assert backend.reader.snapshot().notes == ()


def test_a_relayout_surge_floor_holds_a_cluster_autoscaler_pools_placeholders_too(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    settings = k8s_settings(**CA)
    actuator = K8sNodePoolActuator(leading(apiserver, clock).api, settings.k8s,
                                   pool_specs(settings),
                                   floors=lambda: {"l4": 3})  # a relayout's surge capacity
    outcome = actuator.set_size("l4", 1)
    assert outcome.ok, outcome.message
    assert "held at the relayout surge floor 3" in outcome.message
    deployment = placeholders(apiserver)
    assert deployment["spec"]["replicas"] == 3
    assert deployment["metadata"]["annotations"] == {"headroom.dev/target-nodes": "3"}


def test_a_relayout_under_cluster_autoscaler_sizes_its_surge_from_the_placeholders_target(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(gpu_node("a100-1", gpus=8, mig_config="all-disabled",
                            extra_labels={"headroom.dev/pool": "a100-80gb"}))
    backend = leading(apiserver, clock)
    assert backend.node_pools.set_size("a100-80gb", 3).ok  # two nodes still coming up
    inventory = backend.reader.inventory()
    settings = k8s_settings(**CA)
    pool = next(p for p in pool_specs(settings) if p.name == "a100-80gb")
    relayout = start_relayout("a100-1", "a100-80gb", "all-disabled", "all-1g.10gb",
                              uniform("A100-80GB", ("1g.10gb",) * 7), clock.now(),
                              RelayoutPolicy(), "plan_needs_mig")
    view = relayout_view(inventory, relayout, pool, target_record(inventory, settings.k8s, pool))
    assert view.pool_target_nodes == 3  # not the one registered node, which would shrink it
