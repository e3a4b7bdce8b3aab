"""K8sSharingActuator: MPS / time-slicing per node through the device plugin (REFERENCE.md §2):
a named config in the device-plugin ConfigMap plus the ``nvidia.com/device-plugin.config``
node label that selects it (the plugin applies it live)."""

from __future__ import annotations

from controlplane.adapters.k8s import names as n
from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.configmaps import ensure_sharing_config
from controlplane.adapters.k8s.outcomes import failed, outcome_of
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.errors import PermanentError
from controlplane.domain.mig_layout import ALL_DISABLED
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import SharingLayout
from controlplane.settings import KubernetesSettings


class K8sSharingActuator:
    def __init__(self, api: KubeApi, settings: KubernetesSettings) -> None:
        self.api = api
        self.settings = settings

    def _apply(self, node: str, layout: SharingLayout) -> str:
        obj = self.api.read("v1", "Node", node)
        if obj is None:
            raise PermanentError(f"unknown node {node}")
        labels = obj["metadata"].get("labels") or {}
        mig_config = labels.get(n.MIG_CONFIG, "")
        if layout.mode is SharingMode.MPS and mig_config not in ("", ALL_DISABLED):
            raise PermanentError(f"node {node}: MPS runs on whole GPUs only, but MIG is laid "
                                 f"out ({n.MIG_CONFIG}={mig_config}); reason mps_not_on_mig")
        name = ensure_sharing_config(self.api, self.settings.device_plugin_config_map,
                                     self.settings.gpu_operator_namespace, layout,
                                     self.settings.mig_strategy)
        if labels.get(n.DEVICE_PLUGIN_CONFIG) != name:
            self.api.merge_patch("v1", "Node", node,
                                 {"metadata": {"labels": {n.DEVICE_PLUGIN_CONFIG: name}}})
        return f"node {node} sharing {layout.describe()} ({n.DEVICE_PLUGIN_CONFIG}={name})"

    def apply_sharing(self, node: str, layout: SharingLayout) -> ActionOutcome:
        """Absolute target; idempotent. Unknown node, an invalid layout or MPS on a MIG node
        is a non-retryable failure."""
        problems = layout.problems()
        if problems:
            return failed(node, "; ".join(problems))
        return outcome_of(node, lambda: self._apply(node, layout))
