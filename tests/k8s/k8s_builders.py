"""Builders of realistic Kubernetes objects for the API test server (GFD labels, GPU pods)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controlplane.adapters.k8s.names import MODEL_NAME_ANNOTATION, label_value
from controlplane.domain.models import Isolation, ProfilePoint
from controlplane.settings import PoolSettings, Settings, load_settings
from controlplane.sim.catalog import DEMO_MODELS

MODELS_NS = "models"
#: llama-3-70b in bf16 on 2 whole A100s a replica (tensor parallel), 10 rps each
TP2_LLAMA = replace(next(s for s in DEMO_MODELS if s.name == "llama-3-70b"),
                    isolation=Isolation.TRUSTED,
                    profile=(ProfilePoint("A100-80GB", 0, 16, 1, 10.0, 500.0, 70_000, gpus=2),))
HEADROOM_NS = "headroom"
GPU_OPERATOR_NS = "gpu-operator"


def k8s_settings(**k8s: Any) -> Settings:
    pools = [PoolSettings(name="a100-80gb", product="A100-80GB", gpus_per_node=8, max_nodes=8,
                          price_per_gpu_hour=5.12),
             PoolSettings(name="l4", product="L4", gpus_per_node=4, max_nodes=8,
                          price_per_gpu_hour=0.8)]
    # the scenarios drive every actuator, the device plugin's MPS included, as on a cluster
    # whose plugin runs MPS (k8s.device_plugin_mps; its default, false, is tested on its own)
    return load_settings(backend="kubernetes", pools=pools,
                         k8s={"device_plugin_mps": True, **k8s})


def gpu_node(name: str, *, product: str = "NVIDIA-A100-SXM4-80GB", gpus: int = 8,
             nodepool: str = "a100-80gb", mig_config: str | None = None,
             mig_state: str = "success", ready: bool = True, unschedulable: bool = False,
             allocatable: dict[str, str] | None = None, sharing: str = "none",
             extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus),
              "nvidia.com/gpu.present": "true", "nvidia.com/gpu.sharing-strategy": sharing,
              "karpenter.sh/nodepool": nodepool, "kubernetes.io/hostname": name,
              **(extra_labels or {})}
    if "A100" in product or "H100" in product:
        labels["nvidia.com/mig.capable"] = "true"
    if mig_config is not None:
        labels["nvidia.com/mig.config"] = mig_config
        labels["nvidia.com/mig.config.state"] = mig_state
    resources = {"cpu": "96", "memory": "1000Gi", "pods": "110",
                 **(allocatable if allocatable is not None else {"nvidia.com/gpu": str(gpus)})}
    spec: dict[str, Any] = {"unschedulable": True} if unschedulable else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def model_deployment(model: str, *, name: str | None = None, namespace: str = MODELS_NS,
                     replicas: int = 1, ready: int | None = None, kind: str = "Deployment",
                     engine: str = "triton", limits: dict[str, str] | None = None
                     ) -> dict[str, Any]:
    """A workload labelled with ``model`` whose pods' container asks for ``limits`` (default one
    ``nvidia.com/mig-1g.10gb``)."""
    app = name or label_value(model).replace(".", "-").lower()
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": app, "namespace": namespace,
                     "labels": {"headroom.dev/model": label_value(model), "app": app},
                     "annotations": {MODEL_NAME_ANNOTATION: model}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                 "template": {"metadata": {"labels": {"app": app}},
                              "spec": {"containers": [{
                                  "name": engine, "image": f"example.com/{engine}:1",
                                  "resources": {"limits": limits if limits is not None
                                                else {"nvidia.com/mig-1g.10gb": "1"}}}]}}},
        "status": {"replicas": replicas, "readyReplicas": replicas if ready is None else ready},
    }
    if kind == "StatefulSet":
        obj["spec"]["serviceName"] = app
    return obj


def gpu_pod(name: str, node: str, *, namespace: str = MODELS_NS,
            labels: dict[str, str] | None = None, requests: dict[str, str] | None = None,
            ready: bool = True, owner_kind: str | None = None, owner_name: str | None = None,
            phase: str = "Running") -> dict[str, Any]:
    """A pod on ``node`` ("": one no node has bound yet, no ``nodeName``); with ``owner_kind``,
    owned by that controller (its owner reference says ``controller: true``, as a ReplicaSet's
    or DaemonSet's does); without, a bare pod."""
    wanted = requests if requests is not None else {"nvidia.com/mig-1g.10gb": "1"}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner_kind is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind,
                                    "name": owner_name or f"{name}-owner",
                                    "uid": f"uid-{owner_name or name}",
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {**({"nodeName": node} if node else {}), "containers": [{
                "name": "server", "image": "example.com/triton:1",
                "resources": {"requests": wanted, "limits": wanted}}]},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"}]}}


def pdb(name: str, match_labels: dict[str, str], *, namespace: str = MODELS_NS,
        min_available: int | str | None = None,
        max_unavailable: int | str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": match_labels}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


# what a pool's NodePool pins by default (GPUs per instance, per-GPU MiB), as the settings'
# pools are sized: 8 x A100-80GB, 4 x L4
_SHAPES = {"a100": ("8", "81920"), "l4": ("4", "")}


def nodepool(name: str, *, gpu_name: str = "a100", limits: dict[str, str] | None = None,
             pinned: bool = True) -> dict[str, Any]:
    """A GPU NodePool; ``pinned``: its requirements also fix the GPUs per instance and (for
    A100, made with 40 and 80 GB) the GPU memory, so it launches only the pool's shape."""
    requirements: list[dict[str, Any]] = [
        {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": [gpu_name]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    gpus, memory_mib = _SHAPES.get(gpu_name, ("", ""))
    if pinned and gpus:
        requirements.append({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "In",
                             "values": [gpus]})
    if pinned and memory_mib:
        requirements.append({"key": "karpenter.k8s.aws/instance-gpu-memory", "operator": "In",
                             "values": [memory_mib]})
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {"headroom.dev/pool": name}},
            "spec": {
                "requirements": requirements,
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                 "name": "gpu"},
                "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                "expireAfter": "720h"}},
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
    }
    if limits:
        spec["limits"] = limits
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": spec}


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
