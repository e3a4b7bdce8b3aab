"""The two GPU Operator ConfigMaps Headroom owns: the device plugin's named sharing configs and
mig-parted's ``config.yaml`` for the MIG manager. Read, merge, then server-side apply with the
read ``resourceVersion`` as a precondition, so a concurrent change is a 409 (retry next tick).

Both controllers read their ConfigMap from a mounted volume, which kubelet updates only a minute
or more after the ConfigMap changes, so a config may select a node only once it has been in the
ConfigMap, unchanged, for ``k8s.config_propagation_s``. Each write therefore records when each
config it holds (a device-plugin key, a mig-parted config name) last changed, in the annotation
``headroom.dev/written-at`` (JSON: name -> RFC 3339 UTC time): a config whose content a write
leaves as it was keeps its time, and one without a time (written by someone else, or by a
Headroom from before the annotation) counts as long present."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

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

WRITTEN_AT = "headroom.dev/written-at"

Entries = Callable[[dict[str, str]], dict[str, str]]  # ConfigMap data -> config name -> content


def written_at(obj: dict[str, Any] | None) -> dict[str, datetime]:
    """The recorded write time of each config of a ConfigMap (an unreadable one: none)."""
    text = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(WRITTEN_AT, "")
    try:
        raw = json.loads(text) if text else {}
    except ValueError:
        return {}
    times: dict[str, datetime] = {}
    for key, value in (raw.items() if isinstance(raw, dict) else ()):
        try:
            at = datetime.fromisoformat(str(value))
        except ValueError:
            continue
        times[str(key)] = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return times


def _stamp(at: datetime) -> str:
    """``at`` in RFC 3339 UTC, rounded up to the second (never earlier than the write)."""
    utc = at.astimezone(UTC)
    whole = utc.replace(microsecond=0)
    if whole != utc:
        whole += timedelta(seconds=1)
    return whole.strftime("%Y-%m-%dT%H:%M:%SZ")


def _data_entries(data: dict[str, str]) -> dict[str, str]:
    return data


def ensure_data(api: KubeApi, name: str, namespace: str,
                wanted: Callable[[dict[str, str]], dict[str, str]], now: datetime,
                entries: Entries = _data_entries) -> dict[str, datetime]:
    """Make the ConfigMap's data ``wanted(current data)``, stamping the configs (``entries``)
    the write adds or changes with ``now``; returns each config's recorded write time."""
    current = api.read("v1", "ConfigMap", name, namespace)
    data = {str(k): str(v) for k, v in ((current or {}).get("data") or {}).items()}
    times = written_at(current)
    desired = wanted(dict(data))
    if current is not None and desired == data:
        return times
    before, after = entries(data), entries(desired)
    stamps = {key: _stamp(times[key] if before.get(key) == content and key in times else now)
              for key, content in after.items()
              if before.get(key) != content or key in times}
    version = current["metadata"].get("resourceVersion", "") if current is not None else ""
    obj = config_map(name, namespace, desired, version)
    obj["metadata"]["annotations"] = {WRITTEN_AT: json.dumps(stamps, sort_keys=True)}
    api.apply(obj)
    return written_at(obj)


def ensure_sharing_config(api: KubeApi, name: str, namespace: str, layout: SharingLayout,
                          mig_strategy: str, now: datetime) -> tuple[str, datetime | None]:
    """Add the named device-plugin config for ``layout``; returns its name and when it was last
    written (None: not recorded, long present)."""
    key = config_name(layout)
    entry = device_plugin_entry(layout, mig_strategy)
    times = ensure_data(api, name, namespace, lambda data: {**data, key: entry}, now)
    return key, times.get(key)


def _mig_entries(data: dict[str, str]) -> dict[str, str]:
    try:
        configs = mig_parted_configs(data.get(MIG_PARTED_KEY, ""))
    except ValueError:
        return {}
    return {key: json.dumps(value, sort_keys=True) for key, value in configs.items()}


def mig_config_presence(api: KubeApi, name: str, namespace: str, target: str,
                        layout: NodeMigLayout) -> tuple[bool, datetime | None]:
    """Whether mig-parted's ConfigMap holds ``target`` as ``ensure_mig_configs`` would write it
    for ``layout``'s product, and when it was last written (None: not recorded)."""
    current = api.read("v1", "ConfigMap", name, namespace)
    data = (current or {}).get("data") or {}
    try:
        configs = mig_parted_configs(str(data.get(MIG_PARTED_KEY, "")))
    except ValueError as error:
        raise PermanentError(f"configmap {namespace}/{name}: {error}") from None
    present = target in configs and with_mig_configs(
        configs, {target: layout})[target] == configs[target]
    return present, written_at(current).get(target)


def ensure_mig_configs(api: KubeApi, name: str, namespace: str, target: str,
                       layout: NodeMigLayout, rollback: str, now: datetime) -> None:
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

    ensure_data(api, name, namespace, merge, now, _mig_entries)
