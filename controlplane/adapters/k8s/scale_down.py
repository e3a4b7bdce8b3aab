"""Before a Deployment scales down: annotate its pods with the pod-deletion-cost that makes the
ReplicaSet remove the replicas on the emptiest nodes (``domain.deletion_cost``).

Best effort, as the annotation is a hint the ReplicaSet weighs after readiness: a pod deleted
meanwhile is passed over, and when the pods cannot be read or annotated (an API error, or an
RBAC without ``patch`` on pods) the scale goes ahead unsteered and its outcome says why. Only a
Deployment's ReplicaSet reads the annotation; a StatefulSet removes its highest ordinal."""

from __future__ import annotations

import logging
from collections import Counter

from controlplane.adapters.k8s import names as n
from controlplane.adapters.k8s.api import JsonObject, KubeApi, NotFoundError
from controlplane.adapters.k8s.fence import LeadershipEnded
from controlplane.adapters.k8s.inventory import LIVE_PODS, PodInfo, WorkloadInfo, parse_pod
from controlplane.domain.deletion_cost import POD_DELETION_COST, ReplicaPod, changed_costs
from controlplane.domain.errors import PermanentError, TransientError

log = logging.getLogger("headroom.k8s.scale_down")


def _movable(pod: PodInfo) -> bool:
    """A pod a drain of its node would have to move (what keeps the node from being empty)."""
    return bool(pod.node) and not (pod.daemon or pod.mirror or n.WARM_POOL_LABEL in pod.labels)


def _replicas(workload: WorkloadInfo, live: list[JsonObject]) -> list[ReplicaPod]:
    return [ReplicaPod(obj["metadata"]["name"], (obj.get("spec") or {}).get("nodeName", ""),
                       (obj["metadata"].get("annotations") or {}).get(POD_DELETION_COST))
            for obj in live if workload.selects(obj)]


def _steer(api: KubeApi, workload: WorkloadInfo) -> int:
    live = api.list("v1", "Pod", field_selector=LIVE_PODS)
    movable_on = Counter(pod.node for pod in map(parse_pod, live) if _movable(pod))
    leaving = {obj["metadata"]["name"] for obj in api.list("v1", "Node")
               if (obj.get("spec") or {}).get("unschedulable")}
    written = 0
    for name, cost in sorted(changed_costs(_replicas(workload, live), movable_on,
                                           leaving).items()):
        try:
            api.merge_patch("v1", "Pod", name, {"metadata": {"annotations": {
                POD_DELETION_COST: str(cost)}}}, workload.namespace)
            written += 1
        except NotFoundError:  # deleted since the list: nothing to rank
            continue
    return written


def steer_scale_down(api: KubeApi, workload: WorkloadInfo, replicas: int) -> tuple[str, str]:
    """Annotate the pods of a Deployment scaling down to ``replicas`` so its ReplicaSet removes
    those on the emptiest nodes: what was done, for the outcome's message, and its ``STEERING``
    result (both "" when not a scale-down of a Deployment). Raises only when leadership ended
    (the scale would be refused too)."""
    if workload.kind != "Deployment" or replicas >= workload.replicas:
        return "", ""
    try:
        written = _steer(api, workload)
    except LeadershipEnded:
        raise
    except (TransientError, PermanentError, ValueError) as error:
        log.warning("scale_down.unsteered", extra={
            "workload": f"{workload.namespace}/{workload.name}", "error": str(error)})
        return f"; not steered to the emptiest nodes ({POD_DELETION_COST}: {error})", "unsteered"
    if written:
        return (f"; {POD_DELETION_COST} on {written} pods: replicas on the emptiest nodes go "
                "first"), "steered"
    return f"; {POD_DELETION_COST} already ranks the emptiest nodes first", "ranked"
