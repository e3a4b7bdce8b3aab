"""mig-parted's ConfigMap on a fleet of several MIG-capable GPU products: one config name (the
rollback all-balanced or all-disabled, or one Headroom layout both products can hold) selected on
nodes of different products holds one entry per product, scoped by PCI device-id
``device-filter`` as mig-parted's defaults are, so each node gets its own product's geometry."""

from __future__ import annotations

from datetime import UTC, datetime

import yaml
from apiserver import ApiServer
from gpu_operator_configs import mig_parted_problems
from k8s_builders import GPU_OPERATOR_NS
from k8s_harness import client_for

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.configmaps import ensure_mig_configs
from controlplane.adapters.k8s.manifests import config_map, mig_parted_document
from controlplane.domain.mig_layout import builtin_layout, config_name, layout_from_entries, uniform

CONFIG_MAP = "headroom-mig-parted-config"
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
A100_40 = uniform("A100-40GB", ("3g.20gb", "3g.20gb"))
A100_80 = uniform("A100-80GB", ("4g.40gb", "3g.40gb"))
H100_80 = uniform("H100-80GB", ("4g.40gb", "3g.40gb"))


def configs(server: ApiServer) -> dict[str, list[dict[str, object]]]:
    text = server.get("v1", "ConfigMap", CONFIG_MAP, GPU_OPERATOR_NS)["data"]["config.yaml"]
    found: dict[str, list[dict[str, object]]] = yaml.safe_load(text)["mig-configs"]
    return found


def text_of(server: ApiServer) -> str:
    return str(server.get("v1", "ConfigMap", CONFIG_MAP, GPU_OPERATOR_NS)["data"]["config.yaml"])


def test_a_rollback_config_shared_by_two_products_gives_each_its_own_geometry(
        apiserver: ApiServer) -> None:
    api = KubeApi(client_for(apiserver), "headroom")
    ensure_mig_configs(api, CONFIG_MAP, GPU_OPERATOR_NS, config_name(A100_40), A100_40,
                       "all-balanced", NOW)
    ensure_mig_configs(api, CONFIG_MAP, GPU_OPERATOR_NS, config_name(A100_80), A100_80,
                       "all-balanced", NOW)
    balanced = configs(apiserver)["all-balanced"]
    for product in ("A100-40GB", "A100-80GB"):
        wanted = builtin_layout(product, "all-balanced")
        assert wanted is not None
        assert layout_from_entries(product, balanced) == wanted, product
        assert mig_parted_problems(text_of(apiserver), product) == [], product
    disabled = configs(apiserver)["all-disabled"]
    assert all(entry.get("device-filter") for entry in disabled + balanced)
    for product in ("A100-40GB", "A100-80GB"):
        assert layout_from_entries(product, disabled).groups, product
        assert not layout_from_entries(product, disabled).is_mig_enabled(), product


def test_a_layout_written_for_two_products_keeps_the_first_products_entry(
        apiserver: ApiServer) -> None:
    api = KubeApi(client_for(apiserver), "headroom")
    name = config_name(A100_80)
    assert name == config_name(H100_80)  # same profiles, same config name
    ensure_mig_configs(api, CONFIG_MAP, GPU_OPERATOR_NS, name, A100_80, "all-disabled", NOW)
    ensure_mig_configs(api, CONFIG_MAP, GPU_OPERATOR_NS, name, H100_80, "all-disabled", NOW)
    entries = configs(apiserver)[name]
    assert layout_from_entries("A100-80GB", entries) == A100_80
    assert layout_from_entries("H100-80GB", entries) == H100_80
    assert layout_from_entries("H200-141GB", entries).groups == ()  # scoped: not every GPU
    writes = len(apiserver.writes())
    ensure_mig_configs(api, CONFIG_MAP, GPU_OPERATOR_NS, name, A100_80, "all-disabled", NOW)
    ensure_mig_configs(api, CONFIG_MAP, GPU_OPERATOR_NS, name, H100_80, "all-disabled", NOW)
    assert len(apiserver.writes()) == writes  # already there: nothing written again


def test_an_unscoped_entry_written_before_keeps_applying_to_the_other_products(
        apiserver: ApiServer) -> None:
    # an all-disabled an earlier Headroom wrote with no device-filter (every GPU), then an
    # all-balanced rollback for an A100-40GB node: the H100's all-disabled still resolves
    apiserver.seed(config_map(CONFIG_MAP, GPU_OPERATOR_NS, {"config.yaml": mig_parted_document({
        "all-balanced": [{"devices": "all", "mig-enabled": True,
                          "mig-devices": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]})}))
    api = KubeApi(client_for(apiserver), "headroom")
    ensure_mig_configs(api, CONFIG_MAP, GPU_OPERATOR_NS, config_name(A100_40), A100_40,
                       "all-balanced", NOW)
    balanced = configs(apiserver)["all-balanced"]
    for product in ("A100-40GB", "H100-80GB"):
        wanted = builtin_layout(product, "all-balanced")
        assert wanted is not None and layout_from_entries(product, balanced) == wanted, product
    assert mig_parted_problems(text_of(apiserver), "A100-40GB") == []
