"""Replica, node-pool and sharing actuators against the API test server: absolute, idempotent,
schema-valid writes under one field manager; errors mapped onto retryable or not."""

from __future__ import annotations

import logging

import pytest
import yaml
from apiserver import ApiServer, validate_object
from gpu_operator_configs import device_plugin_config_problems
from k8s_builders import (
    GPU_OPERATOR_NS,
    HEADROOM_NS,
    MODELS_NS,
    gpu_node,
    model_deployment,
    nodepool,
)
from k8s_harness import leading, make_backend

from controlplane.actuation import Actuators, apply_action
from controlplane.adapters.k8s.backend import K8sBackend
from controlplane.adapters.k8s.manifests import config_map, device_plugin_entry
from controlplane.adapters.k8s.outcomes import outcome_of
from controlplane.domain.actions import ActionOutcome, SetReplicas
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import SharingLayout
from controlplane.sim.clock import VirtualClock


def test_set_replicas_scales_the_labelled_workload_absolutely_and_idempotently(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(model_deployment("language/m-large", replicas=1))
    backend = leading(apiserver, clock)
    first = backend.replicas.set_replicas("language/m-large", 4)
    assert first.ok and "Deployment models/language-m-large" in first.message
    version = apiserver.get("apps/v1", "Deployment", "language-m-large", MODELS_NS)[
        "metadata"]["resourceVersion"]
    again = backend.replicas.set_replicas("language/m-large", 4)
    stored = apiserver.get("apps/v1", "Deployment", "language-m-large", MODELS_NS)
    assert again.ok and stored["spec"]["replicas"] == 4
    assert stored["metadata"]["resourceVersion"] == version  # the second write changed nothing
    scale_writes = [r for r in apiserver.writes() if r.path.endswith("/scale")]
    assert {r.field_manager for r in scale_writes} == {"headroom"}
    assert {r.content_type for r in scale_writes} == {"application/merge-patch+json"}


def test_set_replicas_reaches_statefulsets_and_scales_to_zero(apiserver: ApiServer,
                                                              clock: VirtualClock) -> None:
    apiserver.seed(model_deployment("llm", replicas=2, kind="StatefulSet", engine="vllm"))
    assert leading(apiserver, clock).replicas.set_replicas("llm", 0).ok
    assert apiserver.get("apps/v1", "StatefulSet", "llm", MODELS_NS)["spec"]["replicas"] == 0


def hpa(name: str, target: str, kind: str = "Deployment") -> dict[str, object]:
    """An autoscaling/v2 HPA on ``target`` (as KEDA makes for a ScaledObject)."""
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": MODELS_NS},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target},
                     "minReplicas": 1, "maxReplicas": 10,
                     "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu", "target": {"type": "Utilization",
                                                   "averageUtilization": 80}}}]}}


def test_a_workload_an_hpa_scales_is_left_to_it_naming_the_hpa(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(model_deployment("language/m-large", replicas=1))
    apiserver.seed(hpa("keda-hpa-m-large", "language-m-large"))
    apiserver.seed(hpa("other", "language-m-large", kind="StatefulSet"))  # not this workload
    outcome = leading(apiserver, clock).replicas.set_replicas("language/m-large", 4)
    assert not outcome.ok and not outcome.retryable
    assert outcome.message == (
        "model language/m-large: HorizontalPodAutoscaler models/keda-hpa-m-large scales "
        "Deployment models/language-m-large and would undo a scale to 4 replicas; Headroom "
        "leaves it to the HPA (scale it on Headroom's forecasts through the KEDA external "
        "scaler); reason hpa_owns_workload")
    stored = apiserver.get("apps/v1", "Deployment", "language-m-large", MODELS_NS)
    assert stored["spec"]["replicas"] == 1
    assert [r for r in apiserver.writes() if r.path.endswith("/scale")] == []


def test_unknown_or_ambiguous_models_fail_without_retry(apiserver: ApiServer,
                                                        clock: VirtualClock) -> None:
    backend = leading(apiserver, clock)
    unknown = backend.replicas.set_replicas("nope", 2)
    assert not unknown.ok and not unknown.retryable and "unknown model nope" in unknown.message
    apiserver.seed(model_deployment("twin", name="twin-a"))
    apiserver.seed(model_deployment("twin", name="twin-b"))
    twin = backend.replicas.set_replicas("twin", 2)
    assert not twin.ok and not twin.retryable and "several workloads" in twin.message


def test_a_labelled_workload_without_the_full_name_annotation_is_named_in_the_failure(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    unannotated = model_deployment("language/m-large")
    del unannotated["metadata"]["annotations"]
    apiserver.seed(unannotated)
    outcome = leading(apiserver, clock).replicas.set_replicas("language/m-large", 2)
    assert not outcome.ok and not outcome.retryable
    assert outcome.message == (
        "unknown model language/m-large: Deployment models/language-m-large is labelled "
        "headroom.dev/model=language.m-large but serves model language.m-large (its "
        "annotation headroom.dev/model-name, else the label); set that annotation to "
        "language/m-large")
    assert apiserver.get("apps/v1", "Deployment", "language-m-large", MODELS_NS)["spec"][
        "replicas"] == 1


def test_a_conflict_is_retryable_and_leaves_the_object_alone(apiserver: ApiServer,
                                                             clock: VirtualClock) -> None:
    apiserver.seed(model_deployment("m", replicas=1))
    backend = leading(apiserver, clock)
    apiserver.inject_fault("PATCH", "/deployments/m/scale", 409)
    outcome = backend.replicas.set_replicas("m", 3)
    assert not outcome.ok and outcome.retryable and outcome.message.startswith("conflict")
    assert apiserver.get("apps/v1", "Deployment", "m", MODELS_NS)["spec"]["replicas"] == 1
    assert backend.replicas.set_replicas("m", 3).ok  # the next tick succeeds


def test_a_failed_action_is_logged_as_a_warning_with_its_error_and_whether_a_retry_may_help(
        apiserver: ApiServer, clock: VirtualClock, caplog: pytest.LogCaptureFixture) -> None:
    apiserver.seed(model_deployment("m", replicas=3))
    backend = leading(apiserver, clock)
    apiserver.inject_fault("PATCH", "/deployments/m/scale", 500)
    with caplog.at_level(logging.INFO, logger="headroom.actuation"):
        outcome = apply_action(SetReplicas("m", 3, 5, "paused"),
                               Actuators(backend.node_pools, backend.replicas))
    assert not outcome.ok and outcome.retryable
    (record,) = [r for r in caplog.records if r.getMessage() == "action.failed"]
    assert record.levelno == logging.WARNING
    assert (record.__dict__["model"], record.__dict__["to"]) == ("m", 5)
    assert record.__dict__["error"] == outcome.message
    assert outcome.message.startswith("HTTP 500: injected fault 500")
    assert record.__dict__["retryable"] is True


def test_set_size_writes_nodepool_limits_and_placeholder_pods(apiserver: ApiServer,
                                                              clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb", limits={"cpu": "1000"}))
    outcome = leading(apiserver, clock).node_pools.set_size("a100-80gb", 3)
    assert outcome.ok, outcome.message
    pool = apiserver.get("karpenter.sh/v1", "NodePool", "a100-80gb")
    assert pool["spec"]["limits"] == {"cpu": "1000", "nodes": "3"}  # a node count, no GPUs
    assert pool["metadata"]["annotations"]["headroom.dev/target-nodes"] == "3"
    assert pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "gpu"  # untouched
    placeholder = apiserver.get("apps/v1", "Deployment", "headroom-warm-a100-80gb", HEADROOM_NS)
    template = placeholder["spec"]["template"]["spec"]
    assert placeholder["spec"]["replicas"] == 3
    assert template["priorityClassName"] == "headroom-warm-placeholder"
    assert template["nodeSelector"] == {"karpenter.sh/nodepool": "a100-80gb"}
    # A100s may be MIG-partitioned: the placeholder holds its node by anti-affinity, no GPU
    assert "nvidia.com/gpu" not in template["containers"][0]["resources"]["limits"]
    assert "podAntiAffinity" in template["affinity"]
    priority = apiserver.get("scheduling.k8s.io/v1", "PriorityClass", "headroom-warm-placeholder")
    assert priority["value"] < 0 and priority["preemptionPolicy"] == "Never"
    for obj in (pool, placeholder, priority):
        validate_object(obj)


def test_set_size_down_to_zero_and_back_is_absolute(apiserver: ApiServer,
                                                    clock: VirtualClock) -> None:
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    backend = leading(apiserver, clock)
    for nodes in (2, 0, 2):
        assert backend.node_pools.set_size("l4", nodes).ok
        pool = backend.reader.snapshot().pool("l4")
        assert pool is not None and pool.target_nodes == nodes
    limits = apiserver.get("karpenter.sh/v1", "NodePool", "l4")["spec"]["limits"]
    assert limits == {"nodes": "2"}


def test_set_size_drops_the_gpu_limit_an_earlier_headroom_wrote_and_keeps_the_operators_limits(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    # a GPU limit counts time-sliced replicas (4 L4s shared 3 ways: 12 per node) and no MIG
    # GPU: the node limit replaces it, and server-side apply removes the field Headroom's
    # manager applied before and applies no more
    apiserver.seed(nodepool("l4", gpu_name="l4", limits={"cpu": "1000"}))
    backend = leading(apiserver, clock)
    backend.api.apply({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",  # an older Headroom
                       "metadata": {"name": "l4",
                                    "annotations": {"headroom.dev/target-nodes": "2"}},
                       "spec": {"limits": {"nvidia.com/gpu": "8"}}})
    assert apiserver.get("karpenter.sh/v1", "NodePool", "l4")["spec"]["limits"] == {
        "cpu": "1000", "nvidia.com/gpu": "8"}
    assert backend.node_pools.set_size("l4", 3).ok
    assert apiserver.get("karpenter.sh/v1", "NodePool", "l4")["spec"]["limits"] == {
        "cpu": "1000", "nodes": "3"}
    pool = backend.reader.snapshot().pool("l4")
    assert pool is not None and pool.target_nodes == 3 and pool.target_intact


def test_unknown_pools_and_missing_nodepools_fail_without_retry(apiserver: ApiServer,
                                                                clock: VirtualClock) -> None:
    backend = leading(apiserver, clock)
    unknown = backend.node_pools.set_size("tpu", 1)
    assert not unknown.ok and not unknown.retryable
    missing = backend.node_pools.set_size("a100-80gb", 1)
    assert not missing.ok and not missing.retryable and "NodePool a100-80gb not found" in (
        missing.message)
    assert backend.node_pools.set_size("a100-80gb", -1).ok is False


def plugin_config_label(server: ApiServer, node: str) -> str | None:
    labels: dict[str, str] = server.get("v1", "Node", node)["metadata"]["labels"]
    return labels.get("nvidia.com/device-plugin.config")


def test_switching_a_node_to_mps_writes_the_config_and_labels_the_node_once_it_propagated(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    backend = leading(apiserver, clock)
    mps4 = SharingLayout(SharingMode.MPS, 4)
    outcome = backend.sharing.apply_sharing("l4-1", mps4)
    data = apiserver.get("v1", "ConfigMap", "headroom-device-plugin-config", GPU_OPERATOR_NS)[
        "data"]
    assert yaml.safe_load(data["headroom-mps-4"])["sharing"]["mps"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 4}]
    # the device plugin's mounted file does not hold it yet: no label, and not done
    assert not outcome.ok and outcome.retryable
    assert outcome.message == (
        "config_propagating: headroom-mps-4 written to headroom-device-plugin-config at "
        "09:00:00; node l4-1 is labelled nvidia.com/device-plugin.config=headroom-mps-4 after "
        "09:02:00, once the device plugin's mounted file holds it")
    assert plugin_config_label(apiserver, "l4-1") is None
    clock.advance(60)
    assert backend.elector.try_acquire_or_renew(clock.now())
    early = backend.sharing.apply_sharing("l4-1", mps4)
    assert early.message.startswith("config_propagating: headroom-mps-4 written to "
                                    "headroom-device-plugin-config at 09:00:00;")
    assert plugin_config_label(apiserver, "l4-1") is None
    clock.advance(60)
    assert backend.elector.try_acquire_or_renew(clock.now())
    outcome = backend.sharing.apply_sharing("l4-1", mps4)
    assert outcome.ok, outcome.message
    assert plugin_config_label(apiserver, "l4-1") == "headroom-mps-4"
    slicing = SharingLayout(SharingMode.TIME_SLICING, 8)
    assert not backend.sharing.apply_sharing("l4-1", slicing).ok
    clock.advance(120)
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert backend.sharing.apply_sharing("l4-1", slicing).ok
    assert plugin_config_label(apiserver, "l4-1") == "headroom-time-slicing-8"
    data = apiserver.get("v1", "ConfigMap", "headroom-device-plugin-config", GPU_OPERATOR_NS)[
        "data"]
    assert set(data) == {"headroom-mps-4", "headroom-time-slicing-8"}  # earlier configs kept
    for name, text in data.items():  # what the device plugin would make of each entry
        assert device_plugin_config_problems(text) == [], name


def test_a_sharing_config_someone_else_wrote_without_a_write_time_selects_the_node_at_once(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    apiserver.seed(config_map("headroom-device-plugin-config", GPU_OPERATOR_NS, {
        "headroom-mps-4": device_plugin_entry(SharingLayout(SharingMode.MPS, 4), "mixed")}))
    outcome = leading(apiserver, clock).sharing.apply_sharing(
        "l4-1", SharingLayout(SharingMode.MPS, 4))
    assert outcome.ok, outcome.message
    assert plugin_config_label(apiserver, "l4-1") == "headroom-mps-4"


def test_mps_is_refused_on_a_mig_node(apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(gpu_node("a100-1", mig_config="all-1g.10gb"))
    outcome = leading(apiserver, clock).sharing.apply_sharing(
        "a100-1", SharingLayout(SharingMode.MPS, 4))
    assert not outcome.ok and not outcome.retryable and "mps_not_on_mig" in outcome.message
    assert "nvidia.com/device-plugin.config" not in apiserver.get("v1", "Node", "a100-1")[
        "metadata"]["labels"]


def test_mps_is_refused_where_the_device_plugin_refuses_mps_and_nothing_is_written(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    # k8s.device_plugin_mps false, the default: under the GPU Operator's mixed MIG strategy the
    # plugin refuses an MPS config, and a node labelled with one would lose its GPUs
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    backend = make_backend(apiserver, clock, device_plugin_mps=False)
    assert backend.elector.try_acquire_or_renew(clock.now())
    outcome = backend.sharing.apply_sharing("l4-1", SharingLayout(SharingMode.MPS, 4))
    assert not outcome.ok and not outcome.retryable
    assert "reason mps_unavailable" in outcome.message
    assert "k8s.device_plugin_mps is false" in outcome.message
    assert plugin_config_label(apiserver, "l4-1") is None
    with pytest.raises(Exception, match="not found"):  # no MPS config was written
        apiserver.get("v1", "ConfigMap", "headroom-device-plugin-config", GPU_OPERATOR_NS)
    slicing = backend.sharing.apply_sharing("l4-1", SharingLayout(SharingMode.TIME_SLICING, 4))
    assert not slicing.ok and slicing.retryable  # time-slicing is written: propagating


def test_dry_run_records_every_write_and_sends_none(apiserver: ApiServer,
                                                    clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(model_deployment("m"))
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    backend = make_backend(apiserver, clock, dry_run=True)
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert backend.node_pools.set_size("a100-80gb", 2).ok
    assert backend.replicas.set_replicas("m", 5).ok
    assert backend.sharing.apply_sharing("l4-1", SharingLayout(SharingMode.MPS, 2)).ok
    assert apiserver.writes() == []
    planned = [w.render() for w in backend.planned_writes()]
    assert any(p.startswith("apply NodePool a100-80gb") and '"nodes": "2"' in p
               for p in planned)
    assert any(p.startswith("scale Deployment models/m") for p in planned)
    assert any(p.startswith("merge_patch Node l4-1") for p in planned)


def test_followers_do_not_write(apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(model_deployment("m"))
    leader = leading(apiserver, clock)
    follower = make_backend(apiserver, clock, identity="headroom-1")
    assert not follower.elector.try_acquire_or_renew(clock.now())
    outcome = follower.replicas.set_replicas("m", 9)
    assert not outcome.ok and outcome.retryable and outcome.message.startswith("not_leader")
    assert apiserver.get("apps/v1", "Deployment", "m", MODELS_NS)["spec"]["replicas"] == 1
    assert leader.replicas.set_replicas("m", 2).ok


def test_a_concurrent_configmap_change_is_a_retryable_conflict(apiserver: ApiServer,
                                                               clock: VirtualClock) -> None:
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    backend = leading(apiserver, clock)
    written = backend.sharing.apply_sharing("l4-1", SharingLayout(SharingMode.MPS, 2))
    assert written.message.startswith("config_propagating: headroom-mps-2")
    config = apiserver.get("v1", "ConfigMap", "headroom-device-plugin-config", GPU_OPERATOR_NS)
    stale = config["metadata"]["resourceVersion"]
    apiserver.update("v1", "ConfigMap", "headroom-device-plugin-config",
                     {"data": {"default": "version: v1\n"}}, GPU_OPERATOR_NS, manager="helm")
    conflicted = apply_with_version(backend, stale)
    assert not conflicted.ok and conflicted.retryable and "conflict" in conflicted.message
    retried = backend.sharing.apply_sharing("l4-1", SharingLayout(SharingMode.MPS, 3))
    # re-read on the next tick: the other writer's key survives
    assert retried.message.startswith("config_propagating: headroom-mps-3")
    data = apiserver.get("v1", "ConfigMap", "headroom-device-plugin-config", GPU_OPERATOR_NS)[
        "data"]
    assert set(data) == {"default", "headroom-mps-2", "headroom-mps-3"}


def apply_with_version(backend: K8sBackend, version: str) -> ActionOutcome:
    """An apply that read the ConfigMap before someone else changed it."""
    stale = config_map("headroom-device-plugin-config", GPU_OPERATOR_NS,
                       {"headroom-mps-2": "x"}, version)
    return outcome_of("l4-1", lambda: str(backend.api.apply(stale)))
