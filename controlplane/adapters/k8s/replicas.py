"""K8sReplicaActuator: replicas of a model's Triton/vLLM workload through the scale subresource,
checking that its pods ask for the GPU resource of the slices the plan places them on."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from controlplane.adapters.k8s.api import KubeApi, NotFoundError
from controlplane.adapters.k8s.inventory import WorkloadInfo, parse_workload
from controlplane.adapters.k8s.names import MODEL_NAME_ANNOTATION, label_value
from controlplane.adapters.k8s.outcomes import failed, outcome_of
from controlplane.adapters.k8s.slice_drift import slice_drift
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.errors import PermanentError
from controlplane.domain.placement import PlannedSlice
from controlplane.settings import KubernetesSettings

HPA_OWNS_WORKLOAD = "hpa_owns_workload"
log = logging.getLogger("headroom.k8s.replicas")


class K8sReplicaActuator:
    def __init__(self, api: KubeApi, settings: KubernetesSettings) -> None:
        self.api = api
        self.settings = settings

    def _listed(self, model: str) -> list[tuple[WorkloadInfo, dict[str, Any]]]:
        """Deployments and StatefulSets labelled with the model's label-safe spelling, each
        parsed and as read."""
        selector = f"{self.settings.model_label}={label_value(model)}"
        found: list[tuple[WorkloadInfo, dict[str, Any]]] = []
        for namespace in self.settings.workload_namespaces or [""]:
            for kind in ("Deployment", "StatefulSet"):
                found.extend((parse_workload(obj, kind, self.settings.model_label), obj) for obj
                             in self.api.list("apps/v1", kind, namespace,
                                              label_selector=selector))
        return found

    def labelled(self, model: str) -> list[WorkloadInfo]:
        """Deployments and StatefulSets labelled with the model's label-safe spelling."""
        return [workload for workload, _ in self._listed(model)]

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

    def _slice_drift(self, model: str, workload: WorkloadInfo, obj: dict[str, Any],
                     slices: Sequence[PlannedSlice]) -> list[str]:
        """What in the workload does not fit the planned slices, each logged; left as it is."""
        found = slice_drift(model, workload.kind, obj, slices, self.settings.mig_strategy)
        for finding in found:
            log.warning("replicas.slice_mismatch", extra={
                "model": model, "workload": f"{workload.kind} {workload.namespace}/"
                f"{workload.name}", "finding": finding})
        return found

    def _scale(self, model: str, replicas: int, slices: Sequence[PlannedSlice],
               found: list[str]) -> str:
        listed = self._listed(model)
        mine = [(w, obj) for w, obj in listed if w.model == model]
        if not mine:
            raise self._unknown(model, [w for w, _ in listed])
        if len(mine) > 1:
            names = ", ".join(f"{w.kind} {w.namespace}/{w.name}" for w, _ in mine)
            raise PermanentError(f"model {model} is served by several workloads ({names}); "
                                 "label exactly one")
        workload, obj = mine[0]
        found.extend(self._slice_drift(model, workload, obj, slices))
        autoscaler = self._autoscaler_of(workload)
        if autoscaler:
            raise PermanentError(
                f"model {model}: HorizontalPodAutoscaler {workload.namespace}/{autoscaler} "
                f"scales {workload.kind} {workload.namespace}/{workload.name} and would undo a "
                f"scale to {replicas} replicas; Headroom leaves it to the HPA (scale it on "
                "Headroom's forecasts through the KEDA external scaler); reason "
                f"{HPA_OWNS_WORKLOAD}")
        self.api.scale(workload.kind, workload.name, workload.namespace, replicas)
        return "; ".join([f"model {model} target {replicas} replicas "
                          f"({workload.kind} {workload.namespace}/{workload.name})", *found])

    def set_replicas(self, model: str, replicas: int,
                     slices: Sequence[PlannedSlice] = ()) -> ActionOutcome:
        """Absolute target through ``/scale`` (merge patch; idempotent). No workload labelled
        with the model, or more than one, or one a HorizontalPodAutoscaler scales (it would
        undo the scale, and the two would fight every tick), is a non-retryable failure.

        Its pods asking for another GPU resource than ``slices`` (where the plan places the
        model's replicas) does not stop the scale, and the workload is not changed (it is the
        user's): each finding is logged (``replicas.slice_mismatch``) and in the outcome's
        message and notes (the tick's notes)."""
        if replicas < 0:
            return failed(model, f"negative replicas {replicas}")
        found: list[str] = []
        outcome = outcome_of(model, lambda: self._scale(model, replicas, slices, found))
        return replace(outcome, notes=tuple(found)) if found else outcome
