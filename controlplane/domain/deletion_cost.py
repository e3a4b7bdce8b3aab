"""Which replicas a scale-down removes, steered so it empties nodes (pure).

A Deployment's ReplicaSet picks the pods a scale-down deletes by rank (kube-controller-manager's
``ActivePodsWithRanks``): unscheduled before scheduled, pending before running, not ready before
ready, then a lower ``controller.kubernetes.io/pod-deletion-cost`` first, then pods doubled up
with more of the same ReplicaSet on their node, the most recently ready, the newest. Left to
that, a scale-down of a model spread over nodes takes a replica from the node that runs the most
of the model, which is the opposite of what consolidation needs: each node keeps a few pods, and
Karpenter (or Cluster Autoscaler) can remove a node only by evicting its serving replicas onto
other nodes, each eviction a model reload of seconds to minutes (LANDSCAPE.md gap 11).

``deletion_costs`` ranks the ready replicas of a model for the ReplicaSet instead, node by node:
a replica on a node that leaves (cordoned) first; then one on a node where nothing else would
have to move (no other pod a drain would move), fewest replicas of the model first, as removing
those empties the node; then nodes with more other pods later. Repeated scale-downs so empty the
emptiest nodes, and the autoscaler removes empty nodes, which moves nothing. Pods that are not
ready or not scheduled go first anyway.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
LEAVING_NODE_COST = 0  # a replica on a cordoned node: the first a scale-down removes
# a node's rank is (other movable pods, replicas of the model) -> 1 + others x STEP + replicas,
# each count capped at STEP - 1, so the annotation stays well inside an int32
STEP = 1000


@dataclass(frozen=True, slots=True)
class ReplicaPod:
    name: str
    node: str  # "" when not scheduled
    cost: str | None  # its pod-deletion-cost annotation now, None when it has none


def deletion_costs(replicas: Sequence[ReplicaPod], movable_on: Mapping[str, int],
                   leaving: Collection[str]) -> dict[str, int]:
    """Pod name -> the pod-deletion-cost that ranks it for a scale-down of its model.

    ``movable_on``: node -> the pods a drain of it would move (not a DaemonSet's, a static
    pod's mirror or a Headroom warm placeholder), the model's replicas included. On a node in
    ``leaving`` (cordoned), or not scheduled: ``LEAVING_NODE_COST``. Else
    ``1 + others x STEP + replicas``, where ``replicas`` are the model's on that node and
    ``others`` the rest of its movable pods: a node the model's replicas alone keep busy ranks
    before any node that also runs other pods, and the one with fewer of them first."""
    mine = Counter(pod.node for pod in replicas)
    costs = {}
    for pod in replicas:
        if not pod.node or pod.node in leaving:
            costs[pod.name] = LEAVING_NODE_COST
            continue
        others = max(0, movable_on.get(pod.node, 0) - mine[pod.node])
        costs[pod.name] = 1 + min(others, STEP - 1) * STEP + min(mine[pod.node], STEP - 1)
    return costs


def changed_costs(replicas: Sequence[ReplicaPod], movable_on: Mapping[str, int],
                  leaving: Collection[str]) -> dict[str, int]:
    """The costs of ``deletion_costs`` that differ from the replicas' annotations now: the
    writes that steer this scale-down (none when every replica is annotated as it should be)."""
    now = {pod.name: pod.cost for pod in replicas}
    return {name: cost for name, cost in deletion_costs(replicas, movable_on, leaving).items()
            if now[name] != str(cost)}
