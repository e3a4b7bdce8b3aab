"""Under ``backend: kubernetes`` a model's whole-GPU MPS points are refused at serve's start
(and at ``models import --config``) unless ``k8s.device_plugin_mps`` says the cluster's device
plugin runs MPS: under the GPU Operator's mixed MIG strategy, which Headroom's MIG layouts
need, the plugin refuses MPS, so a plan from such a point would never be actuated."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controlplane.domain.models import ProfilePoint
from controlplane.reconcile_config import check_models_table
from controlplane.settings import ConfigError, load_settings
from controlplane.sim.catalog import DEMO_MODELS

BERT = next(m for m in DEMO_MODELS if m.name == "bert-embed")
WHOLE_GPU_MPS = ProfilePoint("L4", 0, 8, 4, 400.0, 30.0, 4000)
SHARED_BERT = replace(BERT, profile=(*BERT.profile, WHOLE_GPU_MPS))


def test_a_whole_gpu_mps_point_is_refused_on_kubernetes_naming_the_model_and_the_point(
        ) -> None:
    settings = load_settings(None, backend="kubernetes")
    with pytest.raises(ConfigError) as refused:
        check_models_table(settings, (*DEMO_MODELS[:3], SHARED_BERT))
    point = len(BERT.profile)
    assert str(refused.value) == (
        f"model 'bert-embed' profile[{point}] (L4, whole GPU, 4 MPS processes): whole-GPU MPS "
        "needs the device plugin's MPS, which it refuses under the GPU Operator's mixed MIG "
        "strategy; remove the point(s), or set k8s.device_plugin_mps true on a cluster whose "
        "ClusterPolicy mig.strategy is none")


def test_mps_inside_a_mig_instance_runs_under_the_replicas_own_daemon_and_is_kept() -> None:
    mig_mps = [p for m in DEMO_MODELS for p in m.profile if p.mps_processes > 1]
    assert mig_mps and all(p.compute_slices > 0 for p in mig_mps)
    check_models_table(load_settings(None, backend="kubernetes"), DEMO_MODELS)


def test_a_cluster_whose_plugin_runs_mps_and_the_simulated_fleet_take_whole_gpu_mps() -> None:
    check_models_table(load_settings(None, backend="kubernetes",
                                     k8s={"device_plugin_mps": True}), (SHARED_BERT,))
    check_models_table(load_settings(None, backend="sim"), (SHARED_BERT,))
