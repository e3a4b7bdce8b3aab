"""GPU sharing of a node through the NVIDIA device plugin (REFERENCE.md §2): MPS or time-slicing,
chosen per node by the ``nvidia.com/device-plugin.config`` label that names one entry of the
device-plugin ConfigMap (pure values)."""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.domain.models import SharingMode
from scheduler.domain.catalog import MAX_MPS_CLIENTS

CONFIG_PREFIX = "headroom-"
SHARED_RESOURCE = "nvidia.com/gpu"  # the resource Headroom's configs share (whole GPUs)
# Headroom's configs advertise a share under the resource's own name; True would make the
# device plugin advertise "<name>.shared" instead (REFERENCE.md §2.1)
RENAME_BY_DEFAULT = False


@dataclass(frozen=True, slots=True)
class SharingLayout:
    """How a node's GPUs are shared: ``replicas`` clients per GPU (1 when exclusive)."""

    mode: SharingMode
    replicas: int = 1

    def problems(self) -> list[str]:
        if self.mode is SharingMode.MIG:
            return ["MIG is laid out through the MIG manager, not the device plugin"]
        if self.mode is SharingMode.EXCLUSIVE:
            return [] if self.replicas == 1 else ["exclusive sharing has exactly 1 replica"]
        if self.replicas < 2:
            return [f"{self.mode.value} needs at least 2 replicas per GPU, got {self.replicas}"]
        if self.mode is SharingMode.MPS and self.replicas > MAX_MPS_CLIENTS:
            return [f"mps allows at most {MAX_MPS_CLIENTS} clients per GPU, got {self.replicas}"]
        return []

    def describe(self) -> str:
        if self.mode is SharingMode.EXCLUSIVE:
            return "exclusive"
        return f"{self.mode.value} x{self.replicas}"


def config_name(layout: SharingLayout) -> str:
    """Deterministic device-plugin config name (also the node label value)."""
    if layout.mode is SharingMode.EXCLUSIVE:
        return CONFIG_PREFIX + "exclusive"
    kind = "mps" if layout.mode is SharingMode.MPS else "time-slicing"
    return f"{CONFIG_PREFIX}{kind}-{layout.replicas}"


def layout_from_config_name(name: str) -> SharingLayout | None:
    """Inverse of ``config_name`` for Headroom's own configs; None for others."""
    if name == CONFIG_PREFIX + "exclusive":
        return SharingLayout(SharingMode.EXCLUSIVE)
    for kind, mode in (("mps-", SharingMode.MPS), ("time-slicing-", SharingMode.TIME_SLICING)):
        rest = name.removeprefix(CONFIG_PREFIX + kind)
        if rest != name and rest.isdigit():
            return SharingLayout(mode, int(rest))
    return None


def mode_from_strategy(strategy: str) -> SharingMode:
    """``nvidia.com/gpu.sharing-strategy`` label (none | time-slicing | mps) -> mode."""
    return {"mps": SharingMode.MPS, "time-slicing": SharingMode.TIME_SLICING}.get(
        strategy, SharingMode.EXCLUSIVE)


def device_plugin_config(layout: SharingLayout, mig_strategy: str) -> dict[str, object]:
    """The device-plugin config document (one value of the ConfigMap). An MPS config names
    migStrategy ``none`` whatever the cluster's strategy: MPS runs on MIG-off nodes only
    (REFERENCE.md §2.1), and the plugin refuses to start on MPS with ``mixed``."""
    strategy = "none" if layout.mode is SharingMode.MPS else mig_strategy
    config: dict[str, object] = {"version": "v1", "flags": {"migStrategy": strategy}}
    resources = [{"name": SHARED_RESOURCE, "replicas": layout.replicas}]
    if layout.mode is SharingMode.MPS:
        config["sharing"] = {"mps": {"renameByDefault": RENAME_BY_DEFAULT,
                                     "resources": resources}}
    elif layout.mode is SharingMode.TIME_SLICING:
        # A request of more than one shared GPU would not get more compute (REFERENCE.md §11.9).
        config["sharing"] = {"timeSlicing": {"renameByDefault": RENAME_BY_DEFAULT,
                                             "failRequestsGreaterThanOne": True,
                                             "resources": resources}}
    return config


def shared_resource() -> str:
    """The extended resource one share of a GPU is advertised as under Headroom's MPS and
    time-slicing configs (what a pod on such a share asks for one of)."""
    return SHARED_RESOURCE + (".shared" if RENAME_BY_DEFAULT else "")
