"""What NVIDIA's own tools would say of the configs Headroom writes into GPU Operator ConfigMaps
(kubernetes-validate checks the ConfigMap, not the YAML inside it): the device plugin's config
file (REFERENCE.md §2.1, and its start-up check that MPS is not run with migStrategy mixed) and
mig-parted's ``config.yaml`` (§1.7, and whether each entry is a MIG geometry the GPU can hold)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from controlplane.domain.mig_layout import layout_from_entries, layout_problems

_STRATEGIES = ("none", "single", "mixed")
_SHARING_KEYS = {"timeSlicing": {"renameByDefault", "failRequestsGreaterThanOne", "resources"},
                 "mps": {"renameByDefault", "failRequestsGreaterThanOne", "resources"}}
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-[1-7]g\.[0-9]+gb$")
_ENTRY_KEYS = {"devices", "device-filter", "mig-enabled", "mig-devices"}


def device_plugin_config_problems(text: str) -> list[str]:
    """Why the device plugin would refuse this config file (empty when it would load it)."""
    doc: Any = yaml.safe_load(text)
    if not isinstance(doc, dict):
        return ["not a map"]
    problems = [f"unknown key {k}" for k in doc if k not in ("version", "flags", "sharing")]
    if doc.get("version") != "v1":
        problems.append(f"version {doc.get('version')!r} is not v1")
    strategy = (doc.get("flags") or {}).get("migStrategy", "none")
    if strategy not in _STRATEGIES:
        problems.append(f"flags.migStrategy {strategy!r} not in {_STRATEGIES}")
    sharing = doc.get("sharing") or {}
    if len(sharing) > 1:
        problems.append("sharing: timeSlicing and mps are mutually exclusive")
    for mode, body in sharing.items():
        if mode not in _SHARING_KEYS:
            problems.append(f"sharing.{mode}: unknown sharing strategy")
            continue
        problems += [f"sharing.{mode}.{k}: unknown key" for k in body if k not in _SHARING_KEYS[
            mode]]
        for i, res in enumerate(body.get("resources") or []):
            name, replicas = res.get("name", ""), res.get("replicas")
            allowed = name == "nvidia.com/gpu" or (mode == "timeSlicing"
                                                   and _MIG_RESOURCE.match(name))
            if not allowed:
                problems.append(f"sharing.{mode}.resources[{i}].name {name!r} cannot be shared")
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
                problems.append(f"sharing.{mode}.resources[{i}].replicas {replicas!r}")
        if mode == "mps" and strategy == "mixed":
            problems.append("using --mig-strategy=mixed is not supported with MPS")
    return problems


def mig_parted_problems(text: str, product: str) -> list[str]:
    """Why mig-parted would refuse this ``config.yaml``, or fail to apply one of its configs on
    a node of ``product`` (empty when every config would apply)."""
    doc: Any = yaml.safe_load(text)
    if not isinstance(doc, dict) or doc.get("version") != "v1":
        return ["not a version v1 mig-parted config"]
    configs = doc.get("mig-configs")
    if not isinstance(configs, dict):
        return ["mig-configs must be a map"]
    problems: list[str] = []
    for name, entries in configs.items():
        if not isinstance(entries, list) or not entries:
            problems.append(f"{name}: must be a non-empty list of entries")
            continue
        for i, entry in enumerate(entries):
            where = f"{name}[{i}]"
            problems += [f"{where}.{k}: unknown key" for k in entry if k not in _ENTRY_KEYS]
            devices = entry.get("devices")
            if devices != "all" and not (isinstance(devices, list) and all(
                    isinstance(d, int) and d >= 0 for d in devices)):
                problems.append(f"{where}.devices: 'all' or a list of GPU indices")
            if not isinstance(entry.get("mig-enabled"), bool):
                problems.append(f"{where}.mig-enabled: must be a bool")
            counts = entry.get("mig-devices", {})
            if not isinstance(counts, dict) or not all(
                    isinstance(n, int) and n > 0 for n in counts.values()):
                problems.append(f"{where}.mig-devices: a map of profile -> positive count")
        problems += [f"{name}: {p}" for p in layout_problems(layout_from_entries(product,
                                                                                 entries))]
    return problems
