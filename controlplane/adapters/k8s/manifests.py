"""The objects Headroom writes, built as plain dicts (applied server-side, schema-valid)."""

from __future__ import annotations

from typing import Any

import yaml

from controlplane.adapters.k8s.names import (
    CA_EXPENDABLE_PRIORITY_CUTOFF,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    KARPENTER_NODEPOOL,
    KARPENTER_NODES_LIMIT,
    MANAGED_BY,
    MIG_PARTED_KEY,
    POOL_LABEL,
    TARGET_NODES_ANNOTATION,
    WARM_POOL_LABEL,
    placeholder_name,
)
from controlplane.domain.mig_layout import NodeMigLayout, with_product_entries
from controlplane.domain.sharing_config import SharingLayout, device_plugin_config

JsonObject = dict[str, Any]
# Not below Cluster Autoscaler's default --expendable-pods-priority-cutoff (-10): a pod of lower
# priority is expendable there (no scale-up for it, no node kept for it), so a placeholder
# would neither bring nor keep a node on a cluster whose node groups CA scales
PLACEHOLDER_PRIORITY = CA_EXPENDABLE_PRIORITY_CUTOFF
PAUSE_USER_ID = 65535  # the pause image's user and group (it runs as non-root)


def placeholder_priority_class(name: str) -> JsonObject:
    """Low priority, never preempts: real workloads evict placeholders, not the reverse."""
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name, "labels": dict([MANAGED_BY])},
            "value": PLACEHOLDER_PRIORITY, "globalDefault": False, "preemptionPolicy": "Never",
            "description": "Headroom warm-capacity placeholders: preempted by any real workload"}


def placeholder_deployment(pool: str, nodepool: str, replicas: int, namespace: str,
                           priority_class: str, image: str, *,
                           node_label: str = KARPENTER_NODEPOOL,
                           target_nodes: int | None = None) -> JsonObject:
    """One pause pod per wanted node, each holding a node of its own by required anti-affinity
    on the hostname against the pool's other placeholders. It asks for no GPU, on every pool:
    any node may be MIG-partitioned (no ``nvidia.com/gpu``) or time-sliced or MPS-shared (a
    request of more than one fails admission there), now or later,
    so a GPU request fits no mode for good; real pods run beside it (node_pools.py says why and
    what that costs). The pods run as the pause image's non-root user with no privilege, as the
    restricted Pod Security level of Headroom's namespace requires. They select the nodes
    whose ``node_label`` is ``nodepool`` (Karpenter's NodePool label, or a Cluster Autoscaler
    node group's); ``target_nodes`` records the committed size on the Deployment (annotation
    ``headroom.dev/target-nodes``) where no NodePool holds it."""
    labels = {WARM_POOL_LABEL: pool}
    spec: JsonObject = {
        "priorityClassName": priority_class,
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        # the Pod Security Standards' restricted profile, which deploy/namespace.yaml enforces
        # on Headroom's namespace: without it admission refuses every pod of the ReplicaSet
        "securityContext": {"runAsNonRoot": True, "runAsUser": PAUSE_USER_ID,
                            "runAsGroup": PAUSE_USER_ID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "nodeSelector": {node_label: nodepool},
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{
            "name": "pause", "image": image,
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                          "limits": {"memory": "16Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
        }],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": HOSTNAME_LABEL}]}},
    }
    meta: JsonObject = {"name": placeholder_name(pool), "namespace": namespace,
                        "labels": {**labels, POOL_LABEL: pool, MANAGED_BY[0]: MANAGED_BY[1]}}
    if target_nodes is not None:
        meta["annotations"] = {TARGET_NODES_ANNOTATION: str(target_nodes)}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": spec}},
    }


def nodepool_size(nodepool: str, nodes: int) -> JsonObject:
    """The part of a Karpenter NodePool Headroom owns: its node-count limit and the target
    size. A node count, not ``nvidia.com/gpu``: Karpenter counts a pool's usage from its nodes'
    capacity, and a time-sliced or MPS node advertises GPUs x replicas as ``nvidia.com/gpu``
    (REFERENCE.md §2.1) while a MIG node under the mixed strategy advertises none (§1.6), so a
    GPU limit would stop a shared pool at one node and never bind a MIG one. Applied with the
    same field manager, it drops the GPU limit an earlier Headroom wrote."""
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": nodepool, "annotations": {TARGET_NODES_ANNOTATION: str(nodes)}},
            "spec": {"limits": {KARPENTER_NODES_LIMIT: str(nodes)}}}


def config_map(name: str, namespace: str, data: dict[str, str],
               resource_version: str = "") -> JsonObject:
    meta: JsonObject = {"name": name, "namespace": namespace, "labels": dict([MANAGED_BY])}
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def device_plugin_entry(layout: SharingLayout, mig_strategy: str) -> str:
    return yaml.safe_dump(device_plugin_config(layout, mig_strategy), sort_keys=False)


def mig_parted_document(configs: dict[str, list[dict[str, object]]]) -> str:
    return yaml.safe_dump({"version": "v1", "mig-configs": configs}, sort_keys=True)


def mig_parted_configs(text: str) -> dict[str, list[dict[str, object]]]:
    """Parse a ``config.yaml`` value; raise ValueError naming the problem."""
    try:
        raw = yaml.safe_load(text or "") or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{MIG_PARTED_KEY}: invalid YAML: {error}") from None
    configs = raw.get("mig-configs") if isinstance(raw, dict) else None
    if configs is None:
        return {}
    if not isinstance(configs, dict):
        raise ValueError(f"{MIG_PARTED_KEY}: mig-configs must be a map")
    return {str(k): list(v or []) for k, v in configs.items()}


def with_mig_configs(current: dict[str, list[dict[str, object]]],
                     layouts: dict[str, NodeMigLayout]) -> dict[str, list[dict[str, object]]]:
    """``current`` with each named config laying out its layout's product as the layout says,
    scoped by device-filter; the entries of the name for other products stay."""
    return {**current, **{name: with_product_entries(current.get(name, []), layout)
                          for name, layout in layouts.items()}}
