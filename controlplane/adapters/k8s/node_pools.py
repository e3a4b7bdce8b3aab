"""K8sNodePoolActuator: a pool's size as warm capacity Karpenter (or Cluster Autoscaler) honours.

``set_size(pool, nodes)`` under Karpenter (``k8s.node_provisioner``'s default) writes two
absolute targets with server-side apply:
- the Karpenter NodePool's ``spec.limits.nodes = nodes`` (so the pool does not grow past the
  target) and the annotation ``headroom.dev/target-nodes``. A node count, not a GPU limit:
  Karpenter counts a pool's usage from its nodes' capacity, in which a time-sliced or MPS node
  advertises GPUs x replicas as ``nvidia.com/gpu`` (a GPU limit would stop the pool at one
  node) and a MIG node under the mixed strategy none (it would never bind). A Karpenter that
  does not count nodes against ``limits.nodes`` ignores it: the placeholders, one per wanted
  node, then bound the growth Headroom causes, and pending real pods may grow the pool past
  the target (the next tick observes the nodes);
- a Deployment of ``nodes`` low-priority pause pods (PriorityClass value -10, never preempting)
  on that NodePool, one per wanted node. Pending placeholders make the autoscaler bring nodes up
  to the limit; a running one keeps its node from being empty; consolidation removes nodes no
  pod needs once the target drops.
A running MIG relayout may hold a floor (its surge capacity): the applied size is never below it.

Each placeholder holds a node of its own by required pod anti-affinity on
``kubernetes.io/hostname`` against the pool's other placeholders, which Karpenter's scheduling
simulation honours (a pending one gets a node of its own; a time-sliced or MPS node, which
advertises GPUs x replicas as ``nvidia.com/gpu``, takes one and no second). It asks for no GPU,
on every pool, whatever the product: the shape must not depend on a node's mode, and any node
may change mode at any time, as the actuators change it:
- a MIG-capable node (A100, H100, ...) may be MIG-partitioned, now or after a relayout, and
  under the mixed strategy a MIG GPU offers ``nvidia.com/mig-<profile>`` and no
  ``nvidia.com/gpu`` (REFERENCE.md §1.6): a whole-GPU placeholder would never run there;
- any node without MIG (L4, T4, L40S, ...) may be switched to time-slicing or MPS by the sharing
  actuator, and Headroom's time-slicing config sets ``failRequestsGreaterThanOne`` (REFERENCE.md
  §2.1; the device plugin hands out MPS shares one per request likewise): kubelet rejects a
  request of more than one ``nvidia.com/gpu`` there (UnexpectedAdmissionError), and the
  ReplicaSet would loop creating Failed pods.
Either way the warm node would hold no pod and be consolidated as empty. Real pods run beside a
placeholder, without preemption. Asking for the node's MIG resources, or one shared GPU, instead
was rejected: they differ per node and change with every relayout or sharing switch, and
Karpenter does not model ``nvidia.com/mig-*`` or shared replicas (REFERENCE.md §8.1, §11.19), so
a pending one would not bring a node up. What it costs: a placeholder no longer makes Karpenter
pick an instance with ``gpus_per_node`` GPUs, so every pool's NodePool must admit only that shape
(the plan's ``gpus_per_node`` steps assume it), e.g. ``karpenter.k8s.aws/instance-gpu-count``;
the reader names a NodePool that does not (nodepool_pins.py). Server-side apply drops the GPU
request an earlier Headroom's placeholders had.

Under Cluster Autoscaler (``k8s.node_provisioner: cluster-autoscaler``) there is no NodePool:
``set_size`` writes only the placeholder Deployment, whose pods select the pool's node group by
``k8s.node_group_label`` = ``nodepool_names[pool]`` (default ``headroom.dev/pool`` = the pool
name; the inventory puts a node in a pool by the same label), and the annotation
``headroom.dev/target-nodes`` on that Deployment records the target. Pending placeholders make
CA raise the node group's size (it must know the group's nodes carry the label: from a node of
the group, or the ``k8s.io/cluster-autoscaler/node-template/label/<key>`` tag when it scales
from zero, REFERENCE.md §8.2); the group's min and max are the operator's, so the target is a
floor: pending real pods may grow the group up to its max, and the next tick observes the
nodes. A running placeholder keeps its node: CA removes a node below its (GPU) utilization
threshold only when every pod on it fits elsewhere, and a placeholder fits only on a node of
the group without one (anti-affinity), so the group keeps a node per placeholder. That holds
only while placeholders are not expendable: CA ignores pods of priority below
``--expendable-pods-priority-cutoff`` (default -10) both for scale-up and scale-down, and
PLACEHOLDER_PRIORITY is -10, at the cutoff, not below it (a CA run with a higher cutoff makes
them expendable: keep it at -10 or lower). Placeholders carry no
``cluster-autoscaler.kubernetes.io/safe-to-evict`` annotation: as a Deployment's pods CA may
move them, and must, to converge on the target; "false" would pin each to its node, so when the
ReplicaSet drops the placeholder on a busy node after a smaller target, the idle node keeping
its placeholder would never be removed ("true" adds nothing a Deployment's pods lack).

Under Karpenter the NodePool is written last: the reader takes a pool's size from its
annotation, so the annotation only moves once every other write has succeeded. A write that
fails leaves the old size observed, and the next tick plans (and writes) the whole target again.
So does a placeholder Deployment or a node limit that someone else deleted or edited (drift.py:
the placeholders' replicas, GPUs they ask for (none), nodeSelector, affinity, tolerations,
priority class, security contexts): the reader marks the pool's target not intact. Under Cluster
Autoscaler the one apply of the Deployment commits replicas, pod template and annotation
together; a JSON patch that fails after it leaves a template the reader finds changed for the
annotated target, so the next tick writes it again. A deleted Deployment takes the record with
it: the reader then takes the registered nodes as the target until Headroom writes one. An apply
leaves the fields another manager added (a nodeSelector key, a GPU limit in a container) in
place, so when what it returns still differs, a JSON patch replaces those pod-template fields
whole; a second write of the same target is the apply alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.drift import placeholder_drift, reset_pod_template
from controlplane.adapters.k8s.manifests import (
    JsonObject,
    nodepool_size,
    placeholder_deployment,
    placeholder_priority_class,
)
from controlplane.adapters.k8s.names import KARPENTER_NODEPOOL
from controlplane.adapters.k8s.outcomes import failed, outcome_of
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.desired import PoolSpec
from controlplane.domain.errors import PermanentError, TransientError
from controlplane.settings import KubernetesSettings

Floors = Callable[[], Mapping[str, int]]


def no_floors() -> Mapping[str, int]:
    return {}


def pool_placeholders(pool: PoolSpec, settings: KubernetesSettings, nodes: int) -> JsonObject:
    """The placeholder Deployment Headroom writes for ``pool`` at ``nodes`` nodes: on its
    NodePool's nodes, or on its node group's, recording ``nodes`` there."""
    karpenter = settings.uses_nodepools
    return placeholder_deployment(
        pool.name, settings.nodepool_names.get(pool.name, pool.name), nodes,
        settings.namespace, settings.placeholder_priority_class, settings.placeholder_image,
        node_label=KARPENTER_NODEPOOL if karpenter else settings.node_group_label,
        target_nodes=None if karpenter else nodes)


class K8sNodePoolActuator:
    def __init__(self, api: KubeApi, settings: KubernetesSettings, pools: Sequence[PoolSpec],
                 floors: Floors = no_floors) -> None:
        self.api = api
        self.settings = settings
        self.pools = {p.name: p for p in pools}
        self.floors = floors

    def nodepool_name(self, pool: str) -> str:
        return self.settings.nodepool_names.get(pool, pool)

    def _apply_size(self, pool: PoolSpec, requested: int, floor: int) -> str:
        nodes = max(requested, floor)
        held = f" (held at the relayout surge floor {floor})" if floor > requested else ""
        if not self.settings.uses_nodepools:  # one object: replicas and target together
            self.api.apply(placeholder_priority_class(self.settings.placeholder_priority_class))
            self._write_placeholders(pool_placeholders(pool, self.settings, nodes))
            return f"pool {pool.name} target {nodes} nodes{held}"
        nodepool = self.nodepool_name(pool.name)
        if self.api.read("karpenter.sh/v1", "NodePool", nodepool) is None:
            raise PermanentError(f"pool {pool.name}: Karpenter NodePool {nodepool} not found")
        self.api.apply(placeholder_priority_class(self.settings.placeholder_priority_class))
        self._write_placeholders(pool_placeholders(pool, self.settings, nodes))
        try:
            self.api.apply(nodepool_size(nodepool, nodes))  # commit point
        except (TransientError, PermanentError) as error:  # same class: same retry verdict
            raise type(error)(f"NodePool {nodepool}: {error}; its placeholder Deployment "
                              f"already asks for {nodes} nodes") from None
        return f"pool {pool.name} target {nodes} nodes{held}"

    def _write_placeholders(self, wanted: JsonObject) -> None:
        """Apply the Deployment; when what the apply returns still differs (another manager,
        e.g. kubectl edit, added a nodeSelector key or a GPU resource Headroom never applied,
        which an apply leaves in place), replace those pod-template fields with a JSON patch.
        An API error names the Deployment, as the NodePool write's names the NodePool."""
        meta = wanted["metadata"]
        try:
            applied = self.api.apply(wanted)
            if not placeholder_drift(wanted, applied):
                return
            self.api.json_patch("apps/v1", "Deployment", meta["name"],
                                reset_pod_template(wanted, applied), meta["namespace"])
        except (TransientError, PermanentError) as error:  # same class: same retry verdict
            raise type(error)(f"Deployment {meta['namespace']}/{meta['name']}: {error}"
                              ) from None

    def set_size(self, pool: str, nodes: int) -> ActionOutcome:
        """Absolute target; idempotent. Unknown pool or (under Karpenter) missing NodePool:
        non-retryable."""
        spec = self.pools.get(pool)
        if spec is None:
            return failed(pool, f"unknown pool {pool}")
        if nodes < 0:
            return failed(pool, f"negative size {nodes}")
        floor = self.floors().get(pool, 0)
        return outcome_of(pool, lambda: self._apply_size(spec, nodes, floor))
