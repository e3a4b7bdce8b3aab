"""K8sReplicaActuator: replicas of a model's Triton/vLLM workload through the scale subresource."""

from __future__ import annotations

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.inventory import WorkloadInfo, parse_workload
from controlplane.adapters.k8s.names import label_value
from controlplane.adapters.k8s.outcomes import failed, outcome_of
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.errors import PermanentError
from controlplane.settings import KubernetesSettings


class K8sReplicaActuator:
    def __init__(self, api: KubeApi, settings: KubernetesSettings) -> None:
        self.api = api
        self.settings = settings

    def workloads_of(self, model: str) -> list[WorkloadInfo]:
        """Deployments and StatefulSets labelled with the model (its label-safe spelling) whose
        full name (annotation ``headroom.dev/model-name``, else the label) is ``model``."""
        selector = f"{self.settings.model_label}={label_value(model)}"
        found: list[WorkloadInfo] = []
        for namespace in self.settings.workload_namespaces or [""]:
            for kind in ("Deployment", "StatefulSet"):
                for obj in self.api.list("apps/v1", kind, namespace, label_selector=selector):
                    workload = parse_workload(obj, kind, self.settings.model_label)
                    if workload.model == model:
                        found.append(workload)
        return found

    def _scale(self, model: str, replicas: int) -> str:
        workloads = self.workloads_of(model)
        if not workloads:
            raise PermanentError(f"unknown model {model}: no Deployment or StatefulSet labelled "
                                 f"{self.settings.model_label}={label_value(model)}")
        if len(workloads) > 1:
            names = ", ".join(f"{w.kind} {w.namespace}/{w.name}" for w in workloads)
            raise PermanentError(f"model {model} is served by several workloads ({names}); "
                                 "label exactly one")
        workload = workloads[0]
        self.api.scale(workload.kind, workload.name, workload.namespace, replicas)
        return (f"model {model} target {replicas} replicas "
                f"({workload.kind} {workload.namespace}/{workload.name})")

    def set_replicas(self, model: str, replicas: int) -> ActionOutcome:
        """Absolute target through ``/scale`` (merge patch; idempotent). No workload labelled
        with the model, or more than one, is a non-retryable failure."""
        if replicas < 0:
            return failed(model, f"negative replicas {replicas}")
        return outcome_of(model, lambda: self._scale(model, replicas))
