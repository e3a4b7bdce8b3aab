"""K8sLoadingGuard: each leader tick, ``karpenter.sh/do-not-disrupt: "true"`` on the models'
pods while they load, removed once they are ready (``domain.loading_guard`` decides which).
Under Cluster Autoscaler (``k8s.node_provisioner: cluster-autoscaler``), which does not read
that annotation, ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`` instead: CA then
does not remove the pod's node.

The pods are those of the models' labelled Deployments and StatefulSets (their namespace and
selector), of the models the models table lists. Each change is a merge patch of the pod's
annotations (``patch`` on pods in deploy/rbac.yaml); a pod deleted meanwhile is passed over."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import UTC, datetime

from controlplane.adapters.k8s import names as n
from controlplane.adapters.k8s.api import JsonObject, KubeApi, NotFoundError
from controlplane.adapters.k8s.inventory import LIVE_PODS, WorkloadInfo, list_workloads
from controlplane.adapters.k8s.leader import parse_micro_time
from controlplane.domain.loading_guard import (
    LOADING_GUARD,
    GuardChange,
    GuardSync,
    ModelPod,
    guard_changes,
    guarded_after,
)
from controlplane.domain.timestamps import utc_text
from controlplane.ports import Clock
from controlplane.settings import KubernetesSettings

LONG_AGO = datetime(1970, 1, 1, tzinfo=UTC)


def _time(text: object) -> datetime | None:
    """A Kubernetes time (RFC 3339, as ``parse_micro_time`` reads a Lease's); None when
    missing or not a time."""
    try:
        return parse_micro_time(str(text)) if text else None
    except ValueError:
        return None


def model_pod(obj: JsonObject, hold_key: str = n.DO_NOT_DISRUPT) -> ModelPod:
    """``hold_key``: the annotation that holds voluntary disruption off (a pod that carries it
    without Headroom's mark is someone else's choice)."""
    meta, status = obj["metadata"], obj.get("status") or {}
    annotations = meta.get("annotations") or {}
    ready: JsonObject = next((c for c in status.get("conditions") or []
                              if c.get("type") == "Ready"), {})
    loading_since = _time(ready.get("lastTransitionTime")) or _time(status.get("startTime"))
    mark = annotations.get(LOADING_GUARD)
    return ModelPod(
        namespace=meta.get("namespace", ""), name=meta["name"],
        node=(obj.get("spec") or {}).get("nodeName", ""), ready=ready.get("status") == "True",
        loading_since=loading_since,
        # a mark that does not parse is Headroom's all the same: released as held long ago
        guarded_at=(_time(mark) or LONG_AGO) if mark is not None else None,
        do_not_disrupt=hold_key in annotations)


class K8sLoadingGuard:
    def __init__(self, api: KubeApi, settings: KubernetesSettings, clock: Clock,
                 models: Callable[[], Collection[str]] | None = None) -> None:
        self.api, self.settings, self.clock, self.models = api, settings, clock, models
        karpenter = settings.uses_nodepools
        self.hold_key = n.DO_NOT_DISRUPT if karpenter else n.SAFE_TO_EVICT
        self.hold_value = "true" if karpenter else "false"

    def _workloads(self) -> list[WorkloadInfo]:
        managed = None if self.models is None else frozenset(self.models())
        return [w for w in list_workloads(self.api, self.settings)
                if managed is None or w.model in managed]

    def pods(self) -> list[ModelPod]:
        """The pods of the models' workloads, not finished nor being deleted."""
        workloads = self._workloads()
        live = [obj for namespace in sorted({w.namespace for w in workloads})
                for obj in self.api.list("v1", "Pod", namespace, field_selector=LIVE_PODS)]
        return [model_pod(obj, self.hold_key) for obj in live
                if any(w.selects(obj) for w in workloads)]

    def sync(self) -> GuardSync:
        """Guard the loading pods and release the others: what changed and how many pods are
        guarded after it. Raises TransientError / PermanentError when the API cannot be read
        or written."""
        now = self.clock.now()
        pods = self.pods()
        done: list[GuardChange] = []
        gone: list[GuardChange] = []  # releases of pods deleted meanwhile: not guarded either
        for change in guard_changes(pods, now, self.settings.loading_guard_max_s):
            value = self.hold_value if change.guard else None
            mark = utc_text(now) if change.guard else None
            try:
                self.api.merge_patch("v1", "Pod", change.name, {"metadata": {"annotations": {
                    self.hold_key: value, LOADING_GUARD: mark}}}, change.namespace)
            except NotFoundError:  # deleted since the list
                if not change.guard:
                    gone.append(change)
                continue
            done.append(change)
        return GuardSync(tuple(done), guarded_after(pods, done + gone))
