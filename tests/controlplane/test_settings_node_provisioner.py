"""k8s.node_provisioner, k8s.node_group_label and, under Cluster Autoscaler, the node-group
label values k8s.nodepool_names holds: read from the config file, refused naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.settings import ConfigError, Settings, load_settings

POOL = "pools:\n  - {name: l4, product: L4, price_per_gpu_hour: 0.8}\n"


def _load(tmp_path: Path, yaml_text: str) -> Settings:
    config = tmp_path / "headroom.yaml"
    config.write_text(POOL + yaml_text)
    return load_settings(config)


def _refusal(tmp_path: Path, yaml_text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, yaml_text)
    return str(caught.value).removeprefix(f"{tmp_path / 'headroom.yaml'}: ")


def test_pools_are_karpenter_nodepools_selected_by_headroom_s_pool_label_unless_told() -> None:
    k8s = load_settings().k8s
    assert (k8s.node_provisioner, k8s.node_group_label) == ("karpenter", "headroom.dev/pool")


def test_cluster_autoscaler_node_groups_with_their_own_label_are_read_from_the_file(
        tmp_path: Path) -> None:
    settings = _load(tmp_path, "k8s:\n  node_provisioner: cluster-autoscaler\n"
                               "  node_group_label: eks.amazonaws.com/nodegroup\n"
                               "  nodepool_names: {l4: gpu-l4}\n")
    k8s = settings.k8s
    assert (k8s.node_provisioner, k8s.node_group_label, k8s.nodepool_names) == (
        "cluster-autoscaler", "eks.amazonaws.com/nodegroup", {"l4": "gpu-l4"})


@pytest.mark.parametrize(("yaml_text", "refused"), [
    ("k8s:\n  node_provisioner: autoscaler\n",
     "k8s.node_provisioner: Input should be 'karpenter' or 'cluster-autoscaler'"),
    ("k8s:\n  node_group_label: 'node group/'\n",
     "k8s.node_group_label: Value error, 'node group/' is not a label key"),
    ("k8s:\n  node_provisioner: cluster-autoscaler\n  nodepool_names: {l4: gpu l4}\n",
     "k8s.nodepool_names.l4: 'gpu l4' is not a label value (k8s.node_group_label "
     "headroom.dev/pool on the pool's nodes)")],
    ids=["an unknown provisioner", "a label key with a space", "a node group value with a space"])
def test_a_bad_node_provisioner_setting_is_refused_naming_its_key(
        tmp_path: Path, yaml_text: str, refused: str) -> None:
    assert refused in _refusal(tmp_path, yaml_text)
