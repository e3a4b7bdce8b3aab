"""The two GPU Operator ConfigMaps Headroom owns: the device plugin's named sharing configs and
mig-parted's ``config.yaml`` for the MIG manager. Read, merge, then server-side apply with the
read ``resourceVersion`` as a precondition, so a concurrent change is a 409 (retry next tick)."""

from __future__ import annotations

from collections.abc import Callable

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.manifests import (
    config_map,
    device_plugin_entry,
    mig_parted_configs,
    mig_parted_document,
    with_mig_configs,
)
from controlplane.adapters.k8s.names import MIG_PARTED_KEY
from controlplane.domain.errors import PermanentError
from controlplane.domain.mig_layout import (
    ALL_DISABLED,
    NodeMigLayout,
    builtin_layout,
    layout_from_entries,
)
from controlplane.domain.sharing_config import SharingLayout, config_name


def ensure_data(api: KubeApi, name: str, namespace: str,
                wanted: Callable[[dict[str, str]], dict[str, str]]) -> bool:
    """Make the ConfigMap's data ``wanted(current data)``; True when something was written."""
    current = api.read("v1", "ConfigMap", name, namespace)
    data = {str(k): str(v) for k, v in ((current or {}).get("data") or {}).items()}
    desired = wanted(dict(data))
    if current is not None and desired == data:
        return False
    version = current["metadata"].get("resourceVersion", "") if current is not None else ""
    api.apply(config_map(name, namespace, desired, version))
    return True


def ensure_sharing_config(api: KubeApi, name: str, namespace: str, layout: SharingLayout,
                          mig_strategy: str) -> str:
    """Add the named device-plugin config for ``layout``; returns its name."""
    key = config_name(layout)
    entry = device_plugin_entry(layout, mig_strategy)
    ensure_data(api, name, namespace, lambda data: {**data, key: entry})
    return key


def ensure_mig_configs(api: KubeApi, name: str, namespace: str, target: str,
                       layout: NodeMigLayout, rollback: str) -> None:
    """Add ``target`` to mig-parted's config.yaml, and keep ``rollback`` (the node's previous
    config, when it is one of mig-parted's defaults) and all-disabled resolvable for the
    node's product. Every entry written is scoped to the product's GPUs by ``device-filter``,
    and a name other products' nodes select keeps their entries: on a fleet of several MIG
    products one config name holds one entry per product, as mig-parted's defaults do."""

    def merge(data: dict[str, str]) -> dict[str, str]:
        try:
            configs = mig_parted_configs(data.get(MIG_PARTED_KEY, ""))
        except ValueError as error:
            raise PermanentError(f"configmap {namespace}/{name}: {error}") from None
        layouts = {target: layout}
        for keep in (rollback, ALL_DISABLED):
            known = builtin_layout(layout.product, keep)
            if known is not None and (keep not in configs or layout_from_entries(
                    layout.product, configs[keep]) != known):
                layouts[keep] = known
        merged = with_mig_configs(configs, layouts)
        if merged == configs:
            return data
        return {**data, MIG_PARTED_KEY: mig_parted_document(merged)}

    ensure_data(api, name, namespace, merge)
