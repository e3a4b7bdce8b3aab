"""K8sSharingActuator: MPS / time-slicing per node through the device plugin (REFERENCE.md §2):
a named config in the device-plugin ConfigMap plus the ``nvidia.com/device-plugin.config``
node label that selects it (the plugin applies it live). The plugin reads the ConfigMap from a
mounted volume that lags the API by a minute or more, and fails (crash-loops) on a label naming
a config its file does not hold yet, so a config Headroom has just written selects the node only
``k8s.config_propagation_s`` later: until then the action is pending (retryable, not done), and
the next tick's plan, which still sees the old label, applies it again."""

from __future__ import annotations

from datetime import timedelta

from controlplane.adapters.k8s import names as n
from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.configmaps import ensure_sharing_config
from controlplane.adapters.k8s.outcomes import failed, outcome_of, pending
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.errors import PermanentError
from controlplane.domain.mig_layout import ALL_DISABLED
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import SharingLayout
from controlplane.ports import Clock
from controlplane.settings import KubernetesSettings


class K8sSharingActuator:
    def __init__(self, api: KubeApi, settings: KubernetesSettings, clock: Clock) -> None:
        self.api = api
        self.settings = settings
        self.clock = clock

    def _apply(self, node: str, layout: SharingLayout) -> str | ActionOutcome:
        obj = self.api.read("v1", "Node", node)
        if obj is None:
            raise PermanentError(f"unknown node {node}")
        labels = obj["metadata"].get("labels") or {}
        mig_config = labels.get(n.MIG_CONFIG, "")
        if layout.mode is SharingMode.MPS and not self.settings.device_plugin_mps:
            # a label naming an MPS config would stop the node's device plugin (it refuses MPS
            # under the mixed MIG strategy) and with it every GPU the node advertises
            raise PermanentError(f"node {node}: MPS needs the device plugin's MPS, which it "
                                 "refuses under the GPU Operator's mixed MIG strategy "
                                 "(k8s.device_plugin_mps is false); reason mps_unavailable")
        if layout.mode is SharingMode.MPS and mig_config not in ("", ALL_DISABLED):
            raise PermanentError(f"node {node}: MPS runs on whole GPUs only, but MIG is laid "
                                 f"out ({n.MIG_CONFIG}={mig_config}); reason mps_not_on_mig")
        now = self.clock.now()
        name, written = ensure_sharing_config(self.api, self.settings.device_plugin_config_map,
                                              self.settings.gpu_operator_namespace, layout,
                                              self.settings.mig_strategy, now)
        selected = labels.get(n.DEVICE_PLUGIN_CONFIG) == name
        settled_at = (written + timedelta(seconds=self.settings.config_propagation_s)
                      if written is not None else None)
        if not selected and settled_at is not None and now < settled_at and (
                not self.api.dry_run):  # a dry run previews the label write too
            return pending(node, f"config_propagating: {name} written to "
                           f"{self.settings.device_plugin_config_map} at {written:%H:%M:%S}; "
                           f"node {node} is labelled {n.DEVICE_PLUGIN_CONFIG}={name} after "
                           f"{settled_at:%H:%M:%S}, once the device plugin's mounted file "
                           "holds it")
        if not selected:
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
