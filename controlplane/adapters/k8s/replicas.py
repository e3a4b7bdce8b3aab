"""K8sReplicaActuator: replicas of a model's Triton/vLLM workload through the scale subresource."""

from __future__ import annotations

from controlplane.adapters.k8s.api import KubeApi, NotFoundError
from controlplane.adapters.k8s.inventory import WorkloadInfo, list_workloads
from controlplane.adapters.k8s.names import MODEL_NAME_ANNOTATION, label_value
from controlplane.adapters.k8s.outcomes import failed, outcome_of
from controlplane.adapters.k8s.scale_down import steer_scale_down
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.errors import PermanentError
from controlplane.settings import KubernetesSettings

HPA_OWNS_WORKLOAD = "hpa_owns_workload"


class K8sReplicaActuator:
    def __init__(self, api: KubeApi, settings: KubernetesSettings) -> None:
        self.api = api
        self.settings = settings

    def labelled(self, model: str) -> list[WorkloadInfo]:
        """Deployments and StatefulSets labelled with the model's label-safe spelling."""
        return list_workloads(self.api, self.settings,
                              f"{self.settings.model_label}={label_value(model)}")

    def workloads_of(self, model: str) -> list[WorkloadInfo]:
        """Deployments and StatefulSets labelled with the model (its label-safe spelling) whose
        full name (annotation ``headroom.dev/model-name``, else the label) is ``model``."""
        return [w for w in self.labelled(model) if w.model == model]

    def _unknown(self, model: str, labelled: list[WorkloadInfo]) -> PermanentError:
        label = f"{self.settings.model_label}={label_value(model)}"
        if not labelled:
            return PermanentError(f"unknown model {model}: no Deployment or StatefulSet "
                                  f"labelled {label}")
        other = labelled[0]  # the label matches, the full name it serves does not
        return PermanentError(
            f"unknown model {model}: {other.kind} {other.namespace}/{other.name} is labelled "
            f"{label} but serves model {other.model} (its annotation {MODEL_NAME_ANNOTATION}, "
            f"else the label); set that annotation to {model}")

    def _autoscaler_of(self, workload: WorkloadInfo) -> str:
        """The name of an HPA (KEDA makes one per ScaledObject) whose scale target is the
        workload; "" when none is (or the cluster serves no autoscaling/v2)."""
        try:
            found = self.api.list("autoscaling/v2", "HorizontalPodAutoscaler", workload.namespace)
        except NotFoundError:
            return ""
        for hpa in found:
            target = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
            if (target.get("kind"), target.get("name")) == (workload.kind, workload.name):
                return str(hpa["metadata"]["name"])
        return ""

    def _scale(self, model: str, replicas: int) -> ActionOutcome:
        labelled = self.labelled(model)
        workloads = [w for w in labelled if w.model == model]
        if not workloads:
            raise self._unknown(model, labelled)
        if len(workloads) > 1:
            names = ", ".join(f"{w.kind} {w.namespace}/{w.name}" for w in workloads)
            raise PermanentError(f"model {model} is served by several workloads ({names}); "
                                 "label exactly one")
        workload = workloads[0]
        autoscaler = self._autoscaler_of(workload)
        if autoscaler:
            raise PermanentError(
                f"model {model}: HorizontalPodAutoscaler {workload.namespace}/{autoscaler} "
                f"scales {workload.kind} {workload.namespace}/{workload.name} and would undo a "
                f"scale to {replicas} replicas; Headroom leaves it to the HPA (scale it on "
                "Headroom's forecasts through the KEDA external scaler); reason "
                f"{HPA_OWNS_WORKLOAD}")
        steered, steering = steer_scale_down(self.api, workload, replicas)
        self.api.scale(workload.kind, workload.name, workload.namespace, replicas)
        return ActionOutcome(model, True, f"model {model} target {replicas} replicas "
                             f"({workload.kind} {workload.namespace}/{workload.name}){steered}",
                             steering=steering)

    def set_replicas(self, model: str, replicas: int) -> ActionOutcome:
        """Absolute target through ``/scale`` (merge patch; idempotent); a Deployment scaling
        down first has its pods ranked so the replicas on the emptiest nodes go
        (``scale_down.steer_scale_down``). No workload labelled
        with the model, or more than one, or one a HorizontalPodAutoscaler scales (it would
        undo the scale, and the two would fight every tick), is a non-retryable failure."""
        if replicas < 0:
            return failed(model, f"negative replicas {replicas}")
        return outcome_of(model, lambda: self._scale(model, replicas))
