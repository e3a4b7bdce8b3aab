"""Label keys, annotations and object names Headroom reads and writes (REFERENCE.md §1.7,
§2, §3)."""

from __future__ import annotations

import hashlib
import re

# GPU Feature Discovery / GPU Operator / device plugin (NVIDIA's spelling).
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_MEMORY = "nvidia.com/gpu.memory"  # MiB
MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"
DEVICE_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
GPU_REPLICAS = "nvidia.com/gpu.replicas"  # written by the device plugin (GFD)
GPU_RESOURCE = "nvidia.com/gpu"
# what a device plugin with renameByDefault: true appends to a time-sliced or MPS resource
SHARED_SUFFIX = ".shared"
# a time-sliced or MPS GPU share, as a device plugin with renameByDefault: true advertises it
GPU_SHARED_RESOURCE = GPU_RESOURCE + SHARED_SUFFIX
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
MIG_PARTED_KEY = "config.yaml"

# Kubernetes' well-known node label, Karpenter's and Headroom's own.
HOSTNAME_LABEL = "kubernetes.io/hostname"
KARPENTER_NODEPOOL = "karpenter.sh/nodepool"
# a pod annotation asking every voluntary disruption (Karpenter's, a drain) to leave the pod
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
# its Cluster Autoscaler counterpart: "false" keeps CA from removing the pod's node
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# a NodePool's limit on its node count (spec.limits.nodes), beside its resource limits
KARPENTER_NODES_LIMIT = "nodes"
# Karpenter's (AWS provider) instance labels a NodePool's requirements pin a GPU shape with
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
KARPENTER_INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
KARPENTER_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
KARPENTER_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"  # MiB per GPU
POOL_LABEL = "headroom.dev/pool"
# --expendable-pods-priority-cutoff's default: a pod of lower priority is expendable to Cluster
# Autoscaler, which neither scales up for it nor keeps a node for it
CA_EXPENDABLE_PRIORITY_CUTOFF = -10
WARM_POOL_LABEL = "headroom.dev/warm-pool"
MODEL_NAME_ANNOTATION = "headroom.dev/model-name"
TARGET_NODES_ANNOTATION = "headroom.dev/target-nodes"
# on a node a MIG relayout cordoned: label_value(relayout id); remove it to keep the cordon
RELAYOUT_CORDON_LABEL = "headroom.dev/relayout-cordon"
MANAGED_BY = ("app.kubernetes.io/managed-by", "headroom")
KEPT_LABEL_PREFIXES = ("nvidia.com/", "karpenter.sh/", "headroom.dev/",
                       "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone")

_LABEL_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


def label_value(text: str) -> str:
    """A valid label value for any string (model names may hold '/'): invalid runs become '.',
    ends are trimmed to alphanumerics, long values keep a hash suffix."""
    value = _LABEL_CHARS.sub(".", text).strip("-_.")
    if len(value) > 63:
        digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        value = value[:52].rstrip("-_.") + "-" + digest
    return value


def placeholder_name(pool: str) -> str:
    return f"headroom-warm-{pool}"


def is_gpu_resource(resource: str) -> bool:
    """A whole GPU, a renamed GPU share or a MIG instance (renamed shares of one too)."""
    return resource in (GPU_RESOURCE, GPU_SHARED_RESOURCE) or resource.startswith(
        MIG_RESOURCE_PREFIX)


def mig_profile(resource: str) -> str:
    """The MIG profile (``1g.10gb``) a ``nvidia.com/mig-<profile>`` resource is an instance of,
    renamed ``<name>.shared`` by a sharing config or not; "" for any other resource."""
    if not resource.startswith(MIG_RESOURCE_PREFIX):
        return ""
    return resource.removeprefix(MIG_RESOURCE_PREFIX).removesuffix(SHARED_SUFFIX)
