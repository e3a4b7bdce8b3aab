"""A model's own Deployment asking for another GPU resource than the slices the plan places its
replicas on, through the API test server: the replica change still goes through, the workload
is left as it is, and the mismatch is named in the outcome, the log and the tick's notes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from apiserver import ApiServer
from k8s_builders import MODELS_NS, gpu_node, k8s_settings, model_deployment, nodepool
from k8s_harness import FixedLoads, assert_schema_valid, make_backend

from controlplane.actuation import Actuators, apply_actions
from controlplane.adapters.k8s.backend import K8sBackend
from controlplane.adapters.placement import LocalPlacementClient
from controlplane.domain.actions import SetReplicas
from controlplane.domain.observed import ModelLoad
from controlplane.domain.placement import PlannedSlice
from controlplane.reconcile import ReconcileDeps, reconcile_once
from controlplane.runtime import reconcile_config
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.ledger import SqlForecastLedger
from controlplane.store.status_reader import read_fleet_status
from scheduler.engine import PlacementEngine

ON_1G = (PlannedSlice("A100-80GB", "mig", "1g.10gb", 4),)


def asking(model: str, resources: dict[str, str], replicas: int = 1) -> dict[str, Any]:
    deployment = model_deployment(model, replicas=replicas)
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": resources}
    return deployment


def leading(server: ApiServer, clock: VirtualClock) -> K8sBackend:
    backend = make_backend(server, clock)
    assert backend.elector.try_acquire_or_renew(clock.now())
    return backend


def scale(backend: K8sBackend, model: str, replicas: int,
          slices: tuple[PlannedSlice, ...]) -> tuple[bool, str, tuple[str, ...]]:
    action = SetReplicas(model, 1, replicas, "forecast_p90_above_capacity", slices=slices)
    [outcome] = apply_actions([action], Actuators(backend.node_pools, backend.replicas))
    return outcome.ok, outcome.message, outcome.notes


def test_a_deployment_asking_for_a_whole_gpu_where_the_plan_has_a_mig_slice_is_reported(
        apiserver: ApiServer, clock: VirtualClock, caplog: pytest.LogCaptureFixture) -> None:
    apiserver.seed(asking("chat", {"nvidia.com/gpu": "1"}))
    template = apiserver.get("apps/v1", "Deployment", "chat", MODELS_NS)["spec"]["template"]
    with caplog.at_level(logging.WARNING, logger="headroom.k8s.replicas"):
        ok, message, notes = scale(leading(apiserver, clock), "chat", 4, ON_1G)
    finding = (
        "model chat: Deployment models/chat asks for nvidia.com/gpu: 1 per pod, but the plan "
        "places its 4 replicas on MIG 1g.10gb instances of A100-80GB (nvidia.com/mig-1g.10gb: 1 "
        "each): they stay Pending or run on other GPUs than the plan counts. Headroom does not "
        "change the workload: give its pods the planned slice's GPU resource; reason "
        "workload_slice_mismatch")
    assert ok and notes == (finding,)
    assert message == f"model chat target 4 replicas (Deployment models/chat); {finding}"
    [record] = [r for r in caplog.records if r.getMessage() == "replicas.slice_mismatch"]
    assert record.__dict__["workload"] == "Deployment models/chat"
    assert record.__dict__["finding"] == finding
    stored = apiserver.get("apps/v1", "Deployment", "chat", MODELS_NS)
    assert stored["spec"]["replicas"] == 4  # scaled all the same
    assert stored["spec"]["template"] == template  # the user's workload is not rewritten
    assert {w.path.rsplit("/", 1)[-1] for w in apiserver.writes()
            if "/deployments/" in w.path} == {"scale"}
    assert assert_schema_valid(apiserver) >= 1


def test_a_deployment_asking_for_the_planned_slice_is_not_reported(
        apiserver: ApiServer, clock: VirtualClock, caplog: pytest.LogCaptureFixture) -> None:
    apiserver.seed(asking("chat", {"nvidia.com/mig-1g.10gb": "1"}))
    with caplog.at_level(logging.WARNING, logger="headroom.k8s.replicas"):
        ok, message, notes = scale(leading(apiserver, clock), "chat", 4, ON_1G)
    assert ok and notes == ()
    assert message == "model chat target 4 replicas (Deployment models/chat)"
    assert not [r for r in caplog.records if r.getMessage() == "replicas.slice_mismatch"]


def test_a_shared_gpu_the_device_plugin_would_rename_is_not_the_planned_mps_share(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(asking("embed", {"nvidia.com/gpu.shared": "1"}))
    ok, _, notes = scale(leading(apiserver, clock), "embed", 2,
                         (PlannedSlice("L4", "mps", "", 2),))
    assert ok and len(notes) == 1
    assert ("asks for nvidia.com/gpu.shared: 1 per pod, but the plan places its 2 replicas on "
            "MPS shares of L4 GPUs (nvidia.com/gpu: 1 each)") in notes[0]


def test_a_mismatch_is_reported_even_when_an_hpa_keeps_headroom_from_scaling(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(asking("chat", {"nvidia.com/gpu": "1"}))
    apiserver.seed({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": "keda-hpa-chat", "namespace": MODELS_NS},
                    "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                                "name": "chat"},
                             "minReplicas": 1, "maxReplicas": 10}})
    ok, message, notes = scale(leading(apiserver, clock), "chat", 4, ON_1G)
    assert not ok and message.endswith("reason hpa_owns_workload")
    assert len(notes) == 1 and "reason workload_slice_mismatch" in notes[0]


LLAMA, RESNET = "llama-3-8b-chat", "resnet50-vision"
SPECS = tuple(s for s in DEMO_MODELS if s.name in (LLAMA, RESNET))


def test_a_reconcile_tick_notes_the_workload_whose_pods_ask_for_another_slice(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    """The plan's slices reach the actuator from the tick's placement, and what it finds is in
    the tick's notes, as stored for ``headroom status``."""
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(gpu_node("a100-1"))
    apiserver.seed(asking(LLAMA, {"nvidia.com/gpu.shared": "1"}))  # no slice of Headroom's
    apiserver.seed(asking(RESNET, {"nvidia.com/mig-1g.10gb": "1"}))
    loads = FixedLoads({LLAMA: ModelLoad(200.0, 40.0), RESNET: ModelLoad(900.0, 250.0)})
    backend = make_backend(apiserver, clock, load=loads)
    assert backend.elector.try_acquire_or_renew(clock.now())
    store = Store.open(sqlite_url, migrate=True)
    store.upsert_models(SPECS)
    deps = ReconcileDeps(clock=clock, reader=backend.reader, node_pools=backend.node_pools,
                         replicas=backend.replicas,
                         placement=LocalPlacementClient(PlacementEngine()), forecasts=store,
                         decisions=store, history=store, ledger=SqlForecastLedger(store.engine))
    settings = k8s_settings().model_copy(update={
        "autoscaling": k8s_settings().autoscaling.model_copy(update={"policy": "reactive"})})
    report = reconcile_once(deps, reconcile_config(settings, SPECS))
    assert report.status.value == "applied", report.reason
    assert report.plan is not None and report.placement is not None
    scaled = {a.target for a in report.plan.actions if isinstance(a, SetReplicas)}
    assert scaled == {LLAMA, RESNET}
    found = [n for n in report.observed.notes if "workload_slice_mismatch" in n]
    assert len(found) == 1 and found[0].startswith(
        f"model {LLAMA}: Deployment models/{LLAMA} asks for nvidia.com/gpu.shared: 1 per pod")
    shown = read_fleet_status(store.engine, sqlite_url, "headroom-leader").last_tick
    assert shown is not None and found[0] in shown.notes  # what headroom status shows
