"""The write time Headroom records per config of the GPU Operator ConfigMaps it writes
(annotation ``headroom.dev/written-at``): a config a write adds or changes gets the write's
time, one it leaves as it was keeps its time, and one with no time (someone else's) stays
without, as long present."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from apiserver import ApiServer
from k8s_builders import GPU_OPERATOR_NS
from k8s_harness import client_for

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.configmaps import (
    WRITTEN_AT,
    ensure_mig_configs,
    ensure_sharing_config,
    mig_config_presence,
)
from controlplane.adapters.k8s.manifests import config_map
from controlplane.domain.mig_layout import config_name, uniform
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import SharingLayout

PLUGIN = "headroom-device-plugin-config"
MIG = "headroom-mig-parted-config"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LAYOUT = uniform("A100-80GB", ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))


def stamps(server: ApiServer, name: str) -> dict[str, str]:
    found: dict[str, str] = json.loads(server.get("v1", "ConfigMap", name, GPU_OPERATOR_NS)[
        "metadata"]["annotations"][WRITTEN_AT])
    return found


def test_a_sharing_config_keeps_its_write_time_while_others_are_added_beside_it(
        apiserver: ApiServer) -> None:
    apiserver.seed(config_map(PLUGIN, GPU_OPERATOR_NS, {"default": "version: v1\n"}))
    api = KubeApi(client_for(apiserver), "headroom")
    name, written = ensure_sharing_config(api, PLUGIN, GPU_OPERATOR_NS,
                                          SharingLayout(SharingMode.MPS, 4), "mixed", T0)
    assert (name, written) == ("headroom-mps-4", T0)
    later = T0 + timedelta(minutes=5, microseconds=1)
    _, other = ensure_sharing_config(api, PLUGIN, GPU_OPERATOR_NS,
                                     SharingLayout(SharingMode.MPS, 2), "mixed", later)
    assert other == T0 + timedelta(minutes=5, seconds=1)  # rounded up, never before the write
    _, again = ensure_sharing_config(api, PLUGIN, GPU_OPERATOR_NS,
                                     SharingLayout(SharingMode.MPS, 4), "mixed", later)
    assert again == T0  # unchanged: its time stays
    assert stamps(apiserver, PLUGIN) == {"headroom-mps-4": "2026-03-02T09:00:00Z",
                                         "headroom-mps-2": "2026-03-02T09:05:01Z"}


def test_a_mig_config_is_present_only_as_wanted_and_changed_content_gets_a_new_time(
        apiserver: ApiServer) -> None:
    api = KubeApi(client_for(apiserver), "headroom")
    target = config_name(LAYOUT)
    assert mig_config_presence(api, MIG, GPU_OPERATOR_NS, target, LAYOUT) == (False, None)
    ensure_mig_configs(api, MIG, GPU_OPERATOR_NS, target, LAYOUT, "all-1g.10gb", T0)
    assert mig_config_presence(api, MIG, GPU_OPERATOR_NS, target, LAYOUT) == (True, T0)
    assert set(stamps(apiserver, MIG)) == {target, "all-1g.10gb", "all-disabled"}
    h100 = uniform("H100-80GB", ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
    assert config_name(h100) == target
    assert mig_config_presence(api, MIG, GPU_OPERATOR_NS, target, h100)[0] is False
    later = T0 + timedelta(minutes=1)
    ensure_mig_configs(api, MIG, GPU_OPERATOR_NS, target, h100, "all-disabled", later)
    assert mig_config_presence(api, MIG, GPU_OPERATOR_NS, target, h100) == (True, later)
    assert stamps(apiserver, MIG)["all-1g.10gb"] == "2026-03-02T09:00:00Z"
