"""A missing or broken kubeconfig is one KubeconfigError naming the file and the setting, never a
loader traceback; ``headroom serve`` prints it on one line and exits with code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import config

from controlplane.adapters.k8s import backend
from controlplane.adapters.k8s.backend import KubeconfigError, api_client_from
from controlplane.settings import KubernetesSettings

BROKEN = {
    "missing.yaml": None,
    "empty.yaml": "",
    "not-yaml.yaml": "{clusters: [unclosed",
    "a-list.yaml": "- a\n- b\n",
    "no-context.yaml": "apiVersion: v1\nkind: Config\nclusters: []\n",
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_kubeconfig_setting_is_one_line_naming_the_file_and_the_setting(
        tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if BROKEN[name] is not None:
        path.write_text(BROKEN[name] or "")
    with pytest.raises(KubeconfigError) as raised:
        api_client_from(KubernetesSettings(kubeconfig=str(path)))
    message = str(raised.value)
    assert message.startswith(f"kubeconfig {path} (k8s.kubeconfig): ")
    assert "\n" not in message and len(message) > len(f"kubeconfig {path} (k8s.kubeconfig): ")


def test_outside_a_pod_without_a_kubeconfig_the_error_names_both_sources(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def not_in_pod(**_: object) -> None:
        raise config.ConfigException("Service host/port is not set.")

    monkeypatch.setattr(backend, "_load_incluster_config", not_in_pod)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    load_kube_config = backend._load_kube_config  # config.load_kube_config, typed
    monkeypatch.setattr(backend, "_load_kube_config", lambda **kwargs: load_kube_config(
        config_file=str(tmp_path / "absent"), **kwargs))  # the loader read KUBECONFIG at import
    with pytest.raises(KubeconfigError) as raised:
        api_client_from(KubernetesSettings())
    message = str(raised.value)
    assert "not in a pod (Service host/port is not set.)" in message
    assert f"kubeconfig {tmp_path / 'absent'} (KUBECONFIG, or set k8s.kubeconfig)" in message
