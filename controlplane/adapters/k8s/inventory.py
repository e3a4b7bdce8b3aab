"""One pass over the cluster: nodes (GPU Feature Discovery labels), pods (GPU requests), model
workloads (Deployments/StatefulSets labelled with the model), disruption budgets, Karpenter
NodePools, the warm-capacity placeholder Deployments and the MIG manager's configs. The only
place that parses Kubernetes objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controlplane.adapters.k8s import names as n
from controlplane.adapters.k8s.api import KubeApi, NotFoundError
from controlplane.adapters.k8s.gpu_requests import UNPARSABLE, pod_gpu_requests, spec_gpu_requests
from controlplane.adapters.k8s.manifests import mig_parted_configs
from controlplane.adapters.k8s.quantity import count, parse_quantity
from controlplane.domain.desired import PoolSpec
from controlplane.domain.errors import PermanentError
from controlplane.domain.loading_guard import LOADING_GUARD
from controlplane.domain.mig_layout import (
    NodeMigLayout,
    builtin_layout,
    layout_from_entries,
    layout_problems,
    uniform,
)
from controlplane.domain.sharing_config import layout_from_config_name
from controlplane.settings import KubernetesSettings
from scheduler.domain.catalog import gfd_label_base, lookup
from scheduler.domain.cluster import product_key

JsonObject = dict[str, Any]
DEFAULT_GRACE_S = 30.0  # a pod's terminationGracePeriodSeconds when its spec sets none
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"  # a field selector: not finished


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: dict[str, str]
    ready: bool
    unschedulable: bool
    allocatable: dict[str, str]
    product: str
    pool: str  # "" when no configured pool matches
    gpu_count: int
    gpu_memory_mib: int
    mig_capable: bool

    @property
    def mig_config(self) -> str:
        return self.labels.get(n.MIG_CONFIG, "")

    @property
    def mig_state(self) -> str:
        return self.labels.get(n.MIG_CONFIG_STATE, "")


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    node: str
    phase: str
    ready: bool
    labels: dict[str, str]
    gpu_requests: dict[str, int]
    daemon: bool  # owned by a DaemonSet (a drain leaves it)
    mirror: bool  # a static pod's mirror (a drain leaves it)
    managed: bool = False  # an owner reference with controller: true (a ReplicaSet, Job, ...
    # would recreate it); a drain never evicts a pod without one: that would delete it for good
    do_not_disrupt: bool = False  # annotated karpenter.sh/do-not-disrupt: "true" (a drain
    # honours it as Karpenter's own voluntary disruptions do), not by Headroom's loading guard
    deleting: bool = False  # it has a deletionTimestamp (terminating)


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    kind: str  # Deployment | StatefulSet
    namespace: str
    name: str
    model: str
    replicas: int
    ready: int
    selector: dict[str, str]
    gpu_requests: tuple[tuple[str, int], ...] = ()  # per pod, sorted (pod_gpu_requests)
    stop_grace_s: float = DEFAULT_GRACE_S  # its pods' terminationGracePeriodSeconds
    pre_stop: bool = False  # a container of its pods has a lifecycle.preStop hook

    def selects(self, pod: JsonObject) -> bool:
        """Whether ``pod`` is one of its pods: in its namespace, with its selector's labels,
        and not being deleted."""
        meta = pod["metadata"]
        return self._selects(meta.get("namespace", ""), meta.get("labels") or {},
                             bool(meta.get("deletionTimestamp")))

    def selects_info(self, pod: PodInfo) -> bool:
        """``selects`` for a pod as the inventory lists it."""
        return self._selects(pod.namespace, pod.labels, pod.deleting)

    def _selects(self, namespace: str, labels: Mapping[str, str], deleting: bool) -> bool:
        return (namespace == self.namespace and bool(self.selector) and not deleting
                and all(labels.get(k) == v for k, v in self.selector.items()))


@dataclass(frozen=True, slots=True)
class BudgetInfo:
    namespace: str
    name: str
    disruptions_allowed: int


@dataclass(frozen=True, slots=True)
class Inventory:
    nodes: tuple[NodeInfo, ...]
    pods: tuple[PodInfo, ...]
    workloads: tuple[WorkloadInfo, ...]
    budgets: tuple[BudgetInfo, ...]
    nodepools: dict[str, JsonObject]
    mig_configs: dict[str, list[dict[str, object]]]
    notes: tuple[str, ...] = field(default=())
    # pool -> its warm-capacity placeholder Deployment
    placeholders: dict[str, JsonObject] = field(default_factory=dict)
    # the named configs the device-plugin ConfigMap holds (None: not read)
    sharing_configs: frozenset[str] | None = None

    def node(self, name: str) -> NodeInfo | None:
        return next((node for node in self.nodes if node.name == name), None)

    def lost_sharing_config(self, node: NodeInfo) -> str:
        """The Headroom sharing config the node's ``nvidia.com/device-plugin.config`` label
        names when the device-plugin ConfigMap does not hold it (deleted or edited by someone
        else: the plugin ignores the name); "" otherwise."""
        name = node.labels.get(n.DEVICE_PLUGIN_CONFIG, "")
        if self.sharing_configs is None or layout_from_config_name(name) is None:
            return ""
        return "" if name in self.sharing_configs else name

    def pods_on(self, node: str) -> tuple[PodInfo, ...]:
        return tuple(p for p in self.pods if p.node == node)

    def layout_of(self, node: NodeInfo) -> NodeMigLayout | None:
        """The MIG layout the node's ``nvidia.com/mig.config`` label names; when there is no
        label, or it names a config neither mig-parted's ConfigMap nor its defaults define
        (another ConfigMap's, or one since removed), the instances the device plugin offers."""
        entries = self.mig_configs.get(node.mig_config) if node.mig_config else None
        if entries is not None:
            return layout_from_entries(node.product, entries)
        named = builtin_layout(node.product, node.mig_config) if node.mig_config else None
        return named or offered_layout(node)


def offered_mig(node: NodeInfo) -> dict[str, int]:
    """The MIG instances the device plugin offers on the node (``nvidia.com/mig-<profile>``
    allocatable, its mixed strategy, or ``nvidia.com/mig-<profile>.shared`` when a sharing
    config renames it): profile -> count, those it offers at least one of."""
    offered: dict[str, int] = {}
    for resource, quantity in sorted(node.allocatable.items()):
        if profile := n.mig_profile(resource):
            offered[profile] = offered.get(profile, 0) + count(quantity)
    return {profile: instances for profile, instances in offered.items() if instances > 0}


def offered_layout(node: NodeInfo) -> NodeMigLayout | None:
    """The instances the device plugin offers (``offered_mig``) as the same instances on every
    GPU; None when it offers none, or they do not split evenly over the GPUs or fit the product
    (which GPU holds which is unknown)."""
    offered = offered_mig(node)
    if not offered or node.gpu_count <= 0 or any(c % node.gpu_count for c in offered.values()):
        return None
    per_gpu = [p for p, instances in offered.items() for _ in range(instances // node.gpu_count)]
    layout = uniform(node.product, tuple(per_gpu))
    return None if layout_problems(layout) else layout


def normalize_product(raw: str, memory_mib: int) -> str:
    """GFD's ``nvidia.com/gpu.product`` (e.g. NVIDIA-A100-SXM4-80GB, Tesla-T4, or a MIG/SHARED
    variant) -> the catalog's product name (``catalog.lookup``, given the GPU's reported
    memory); the label without GFD's suffixes when the catalog does not know it."""
    product = lookup(raw, memory_mib)
    return product.name if product is not None else gfd_label_base(raw)


def _is_ready(conditions: list[JsonObject]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def parse_node(obj: JsonObject, pools: Sequence[PoolSpec], nodepools: dict[str, str],
               pool_label: str = n.KARPENTER_NODEPOOL) -> NodeInfo:
    """``nodepools``: the value of ``pool_label`` (a Karpenter NodePool, or under Cluster
    Autoscaler ``k8s.node_group_label``'s node group) on a pool's nodes -> the pool."""
    labels = dict(obj["metadata"].get("labels") or {})
    status = obj.get("status") or {}
    allocatable = {k: str(v) for k, v in (status.get("allocatable") or {}).items()}
    capacity = status.get("capacity") or {}
    raw_memory = labels.get(n.GPU_MEMORY, "")
    memory = int(raw_memory) if raw_memory.isdigit() else 0
    raw_product = labels.get(n.GPU_PRODUCT, "")
    product = normalize_product(raw_product, memory) if raw_product else ""
    gpus = labels.get(n.GPU_COUNT, "")
    gpu_count = int(gpus) if gpus.isdigit() else count(capacity.get(n.GPU_RESOURCE, 0))
    catalog = lookup(product) if product else None
    pool = nodepools.get(labels.get(pool_label, ""), "") or labels.get(n.POOL_LABEL, "")
    if pool not in {p.name for p in pools}:
        pool = next((p.name for p in pools
                     if product and product_key(p.product) == product_key(product)), "")
    return NodeInfo(
        name=obj["metadata"]["name"], labels=labels,
        ready=_is_ready(status.get("conditions") or []),
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
        allocatable=allocatable,
        product=product, pool=pool, gpu_count=gpu_count,
        gpu_memory_mib=memory or (catalog.memory_mib if catalog else 0),
        mig_capable=labels.get(n.MIG_CAPABLE) == "true" or bool(catalog and catalog.mig_capable))


def parse_pod(obj: JsonObject) -> PodInfo:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    annotations = meta.get("annotations") or {}
    requests = spec_gpu_requests(spec)
    unparsable = sorted(r for r, units in requests.items() if units == UNPARSABLE)
    if unparsable:  # the API server admits only quantities: a proxy or stub in between
        raise ValueError(f"pod {meta.get('namespace', '')}/{meta['name']}: "
                         f"{', '.join(unparsable)} is not a Kubernetes quantity")
    owners = meta.get("ownerReferences") or []
    return PodInfo(
        namespace=meta.get("namespace", ""), name=meta["name"], node=spec.get("nodeName", ""),
        phase=status.get("phase", "Pending"), ready=_is_ready(status.get("conditions") or []),
        labels=dict(meta.get("labels") or {}), gpu_requests=requests,
        daemon=any(o.get("kind") == "DaemonSet" for o in owners),
        mirror="kubernetes.io/config.mirror" in annotations,
        managed=any(o.get("controller") is True for o in owners),
        # Headroom's own guard of a loading pod (loading_guard.py) holds off only Karpenter
        do_not_disrupt=annotations.get(n.DO_NOT_DISRUPT) == "true"
        and LOADING_GUARD not in annotations,
        deleting=bool(meta.get("deletionTimestamp")))


def parse_workload(obj: JsonObject, kind: str, model_label: str) -> WorkloadInfo:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    model = (meta.get("annotations") or {}).get(n.MODEL_NAME_ANNOTATION) or (
        meta.get("labels") or {}).get(model_label, "")
    pod_spec = ((spec.get("template") or {}).get("spec")) or {}
    grace = pod_spec.get("terminationGracePeriodSeconds")
    return WorkloadInfo(kind, meta.get("namespace", ""), meta["name"], model,
                        int(spec.get("replicas", 1)), int(status.get("readyReplicas") or 0),
                        dict((spec.get("selector") or {}).get("matchLabels") or {}),
                        tuple(sorted(pod_gpu_requests(obj).items())),
                        float(grace) if grace is not None else DEFAULT_GRACE_S,
                        any((c.get("lifecycle") or {}).get("preStop")
                            for c in pod_spec.get("containers") or []))


def list_workloads(api: KubeApi, settings: KubernetesSettings,
                   selector: str = "") -> list[WorkloadInfo]:
    """The Deployments and StatefulSets in ``k8s.workload_namespaces`` (all when empty) that
    ``selector`` picks (default: those with the model label at all)."""
    found: list[WorkloadInfo] = []
    for namespace in settings.workload_namespaces or [""]:
        for kind in ("Deployment", "StatefulSet"):
            found.extend(parse_workload(obj, kind, settings.model_label) for obj in api.list(
                "apps/v1", kind, namespace, label_selector=selector or settings.model_label))
    return found


def fetch_inventory(api: KubeApi, settings: KubernetesSettings,
                    pools: Sequence[PoolSpec]) -> Inventory:
    """Read everything a snapshot needs. Raises TransientError when the API is unreachable."""
    notes: list[str] = []
    karpenter = settings.uses_nodepools
    try:  # Cluster Autoscaler node groups have no NodePool to read
        nodepool_objs = {o["metadata"]["name"]: o for o in api.list(
            "karpenter.sh/v1", "NodePool")} if karpenter else {}
    except NotFoundError:
        nodepool_objs = {}
        notes.append("karpenter NodePool API not found: pool targets come from node counts")
    by_nodepool = {settings.nodepool_names.get(p.name, p.name): p.name for p in pools}
    pool_label = n.KARPENTER_NODEPOOL if karpenter else settings.node_group_label
    nodes = tuple(parse_node(o, pools, by_nodepool, pool_label) for o in api.list("v1", "Node"))
    try:
        pods = tuple(parse_pod(o) for o in api.list(
            "v1", "Pod", field_selector=LIVE_PODS))
    except ValueError as error:  # no API server serves one: not worth retrying every tick
        raise PermanentError(f"the API server listed a pod Headroom cannot read: {error}"
                             ) from error
    workloads = list_workloads(api, settings)
    budgets = tuple(
        BudgetInfo(o["metadata"].get("namespace", ""), o["metadata"]["name"],
                   int((o.get("status") or {}).get("disruptionsAllowed") or 0))
        for o in api.list("policy/v1", "PodDisruptionBudget"))
    notes.extend(f"pdb {b.namespace}/{b.name} allows no disruption now" for b in budgets
                 if b.disruptions_allowed <= 0)
    mig_configs: dict[str, list[dict[str, object]]] = {}
    config = api.read("v1", "ConfigMap", settings.mig_config_map, settings.gpu_operator_namespace)
    if config is not None:
        try:
            mig_configs = mig_parted_configs((config.get("data") or {}).get(n.MIG_PARTED_KEY, ""))
        except ValueError as error:
            notes.append(f"configmap {settings.mig_config_map}: {error}")
    placeholders = {
        (o["metadata"].get("labels") or {}).get(n.WARM_POOL_LABEL, ""): o
        for o in api.list("apps/v1", "Deployment", settings.namespace,
                          label_selector=n.WARM_POOL_LABEL)}
    plugin = api.read("v1", "ConfigMap", settings.device_plugin_config_map,
                      settings.gpu_operator_namespace)
    sharing_configs = frozenset(str(k) for k in ((plugin or {}).get("data") or {}))
    return Inventory(nodes, pods, tuple(workloads), budgets, nodepool_objs, mig_configs,
                     tuple(notes), placeholders, sharing_configs)


def free_gpu_resources(node: NodeInfo, pods: Sequence[PodInfo]) -> dict[str, int]:
    """Allocatable minus requested, per GPU-like resource."""
    free = {r: int(parse_quantity(q)) for r, q in node.allocatable.items() if n.is_gpu_resource(r)}
    for pod in pods:
        for resource, quantity in pod.gpu_requests.items():
            free[resource] = free.get(resource, 0) - quantity
    return free
