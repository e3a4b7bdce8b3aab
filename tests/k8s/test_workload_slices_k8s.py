"""A model's own Deployment asking for another GPU resource than the slices the plan places its
replicas on, through the API test server: every tick (a dry run too, and ticks that change
nothing) notes it for ``headroom status`` until the workload is fixed, and the workload is left
as it is."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from apiserver import ApiServer
from k8s_builders import MODELS_NS, gpu_node, k8s_settings, model_deployment, nodepool
from k8s_builders import TP2_LLAMA as TP2  # 2 whole A100s a replica
from k8s_harness import START_AT, FixedLoads, assert_schema_valid, make_backend

from controlplane.adapters.placement import LocalPlacementClient
from controlplane.domain.actions import ScaleNodePool, SetReplicas
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ModelLoad, ObservedModel, ObservedState, ServingWorkload
from controlplane.domain.tick import TickReport
from controlplane.reconcile import ReconcileDeps, reconcile_once
from controlplane.reconcile_config import reconcile_config
from controlplane.settings import Settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.codec import observed_from_json, observed_to_json
from controlplane.store.ledger import SqlForecastLedger
from controlplane.store.status_reader import read_fleet_status
from scheduler.engine import PlacementEngine

LLAMA, RESNET = "llama-3-8b-chat", "resnet50-vision"
SPECS = tuple(s for s in DEMO_MODELS if s.name in (LLAMA, RESNET))
LLAMA_SLICE = "nvidia.com/mig-3g.40gb"  # the plan's slice for llama on this test's fleet
LOADS = {LLAMA: ModelLoad(200.0, 40.0), RESNET: ModelLoad(900.0, 250.0)}


def asking(model: str, resources: dict[str, str], replicas: int = 1,
           name: str | None = None) -> dict[str, Any]:
    return model_deployment(model, replicas=replicas, name=name, limits=resources)


def _settings(dry_run: bool = False) -> Settings:
    base = k8s_settings()
    return base.model_copy(update={
        "autoscaling": base.autoscaling.model_copy(update={"policy": "reactive"}),
        "safety": base.safety.model_copy(update={"dry_run": dry_run})})


def _ticks(apiserver: ApiServer, clock: VirtualClock, store: Store, settings: Settings,
           count: int, specs: tuple[ModelSpec, ...] = SPECS,
           loads: dict[str, ModelLoad] = LOADS) -> list[TickReport]:
    backend = make_backend(apiserver, clock, load=FixedLoads(loads))
    assert backend.elector.try_acquire_or_renew(clock.now())
    store.upsert_models(specs)
    deps = ReconcileDeps(clock=clock, reader=backend.reader, node_pools=backend.node_pools,
                         replicas=backend.replicas,
                         placement=LocalPlacementClient(PlacementEngine()), forecasts=store,
                         decisions=store, history=store, ledger=SqlForecastLedger(store.engine))
    reports = []
    for _ in range(count):
        reports.append(reconcile_once(deps, reconcile_config(settings, specs)))
        clock.advance(30)
    return reports


def _fleet(apiserver: ApiServer, llama_asks: dict[str, str]) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(gpu_node("a100-1"))
    apiserver.seed(asking(LLAMA, llama_asks))
    apiserver.seed(asking(RESNET, {"nvidia.com/mig-1g.10gb": "1"}))


def _found(report: TickReport) -> list[str]:
    return [n for n in report.observed.notes if "workload_slice_mismatch" in n]


def test_every_tick_notes_the_workload_whose_pods_ask_for_another_slice_until_it_is_fixed(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str,
        caplog: pytest.LogCaptureFixture) -> None:
    _fleet(apiserver, {"nvidia.com/gpu.shared": "1"})  # no slice of Headroom's configs
    template = apiserver.get("apps/v1", "Deployment", LLAMA, MODELS_NS)["spec"]["template"]
    store = Store.open(sqlite_url, migrate=True)
    with caplog.at_level(logging.WARNING, logger="headroom.reconcile"):
        first, second = _ticks(apiserver, clock, store, _settings(), 2)
    assert first.status.value == second.status.value == "applied", first.reason
    assert first.plan is not None and second.plan is not None
    assert {a.target for a in first.plan.actions if isinstance(a, SetReplicas)} == {LLAMA, RESNET}
    assert not [a for a in second.plan.actions if isinstance(a, SetReplicas)]  # nothing to change
    for report in (first, second):  # noted on the tick that scaled and on the one that did not
        (finding,) = _found(report)
        assert finding.startswith(f"model {LLAMA}: Deployment {MODELS_NS}/{LLAMA} asks for "
                                  "nvidia.com/gpu.shared: 1 per pod, but the plan places its")
        assert finding.endswith("reason workload_slice_mismatch")
    assert len([r for r in caplog.records if r.getMessage() == "replicas.slice_mismatch"]) == 2
    shown = read_fleet_status(store.engine, sqlite_url, "headroom-leader").last_tick
    assert shown is not None and _found(second)[0] in shown.notes  # what headroom status shows
    stored = apiserver.get("apps/v1", "Deployment", LLAMA, MODELS_NS)
    assert stored["spec"]["template"] == template  # the user's workload is not rewritten
    assert assert_schema_valid(apiserver) >= 1

    # fixed by its owner (the plan has its replicas on 3g.40gb instances): no note from then on
    apiserver.update("apps/v1", "Deployment", LLAMA, {"spec": {"template": {"spec": {
        "containers": [{**template["spec"]["containers"][0], "resources": {
            "limits": {LLAMA_SLICE: "1"}}}]}}}}, MODELS_NS)
    (third,) = _ticks(apiserver, clock, store, _settings(), 1)
    assert _found(third) == []


def test_a_dry_run_notes_the_mismatch_too(apiserver: ApiServer, clock: VirtualClock,
                                         sqlite_url: str) -> None:
    _fleet(apiserver, {"nvidia.com/gpu": "2"})
    (report,) = _ticks(apiserver, clock, Store.open(sqlite_url, migrate=True),
                       _settings(dry_run=True), 1)
    assert report.status.value == "dry_run"
    (finding,) = _found(report)
    assert "asks for nvidia.com/gpu: 2 per pod" in finding


def test_workloads_asking_for_their_planned_slices_are_not_noted(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    _fleet(apiserver, {LLAMA_SLICE: "1"})
    (report,) = _ticks(apiserver, clock, Store.open(sqlite_url, migrate=True), _settings(), 1)
    assert report.placement is not None
    assert {(s.model, s.mig_profile) for s in report.placement.segments} == {
        (LLAMA, "3g.40gb"), (RESNET, "1g.10gb")}  # where this fleet's plan puts them
    assert _found(report) == []
    models = {m.name: m for m in report.observed.models}
    assert models[RESNET].workloads == (ServingWorkload(
        f"Deployment {MODELS_NS}/{RESNET}", (("nvidia.com/mig-1g.10gb", 1),), 30.0, False),)


def test_each_of_a_models_several_workloads_is_checked_and_the_one_that_mismatches_named(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(gpu_node("a100-1"))
    for name, slice_resource in (("llama-a", LLAMA_SLICE), ("llama-b", "nvidia.com/mig-1g.10gb")):
        apiserver.seed(asking(LLAMA, {slice_resource: "1"}, name=name))
    apiserver.seed(asking(RESNET, {"nvidia.com/mig-1g.10gb": "1"}))
    (report,) = _ticks(apiserver, clock, Store.open(sqlite_url, migrate=True), _settings(), 1)
    assert report.placement is not None
    assert {(s.model, s.mig_profile) for s in report.placement.segments} >= {(LLAMA, "3g.40gb")}
    (finding,) = _found(report)
    assert finding.startswith(f"model {LLAMA}: Deployment {MODELS_NS}/llama-b asks for "
                              "nvidia.com/mig-1g.10gb: 1 per pod, but the plan places none of "
                              "the model's replicas on that slice: it places its")
    assert "llama-a" not in finding and finding.endswith("reason workload_slice_mismatch")
    models = {m.name: m for m in report.observed.models}
    assert [(w.name, w.gpu_requests) for w in models[LLAMA].workloads] == [
        (f"Deployment {MODELS_NS}/llama-a", ((LLAMA_SLICE, 1),)),
        (f"Deployment {MODELS_NS}/llama-b", (("nvidia.com/mig-1g.10gb", 1),))]

    apiserver.update("apps/v1", "Deployment", "llama-b", {"spec": {"template": {"spec": {
        "containers": [{"name": "triton", "image": "example.com/triton:1",
                        "resources": {"limits": {LLAMA_SLICE: "1"}}}]}}}}, MODELS_NS)
    (fixed,) = _ticks(apiserver, clock, Store.open(sqlite_url, migrate=True), _settings(), 1)
    assert _found(fixed) == []


@pytest.mark.parametrize("asks", ["2", "1"])
def test_a_model_of_two_gpus_a_replica_is_scaled_and_its_pods_must_ask_for_two_gpus(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str, asks: str) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(gpu_node("a100-1"))
    apiserver.seed(asking(TP2.name, {"nvidia.com/gpu": asks}))
    (report,) = _ticks(apiserver, clock, Store.open(sqlite_url, migrate=True), _settings(), 1,
                       (TP2,), {TP2.name: ModelLoad(35.0, 10.0)})
    assert report.status.value == "applied", report.reason
    assert report.placement is not None
    # 35 rps at 10 a replica under the reactive policy's target utilization: 5 replicas
    assert [(s.gpus, s.gpu_index) for s in report.placement.segments] == [(2, 0), (2, 1)] * 5
    stored = apiserver.get("apps/v1", "Deployment", TP2.name, MODELS_NS)
    assert stored["spec"]["replicas"] == report.placement.replicas_for(TP2.name) == 5
    assert report.plan is not None  # 10 GPUs: a second node of 8 beside the one there is
    assert [(a.pool, a.to_value) for a in report.plan.actions if isinstance(a, ScaleNodePool)
            ] == [("a100-80gb", 2)]
    found = _found(report)
    if asks == "2":
        assert found == []
    else:
        (finding,) = found
        assert finding.startswith(f"model {TP2.name}: Deployment {MODELS_NS}/{TP2.name} asks "
                                  "for nvidia.com/gpu: 1 per pod, but the plan places its 5 "
                                  "replicas on 2 whole A100-80GB GPUs of one node per replica "
                                  "(nvidia.com/gpu: 2 each)")
    assert assert_schema_valid(apiserver) >= 1


def test_a_snapshot_stored_before_workloads_were_read_still_loads() -> None:
    now = ObservedState(START_AT, (), (), (ObservedModel(
        "m", 1, 0, 1, 5.0, 10.0, workloads=(
            ServingWorkload("Deployment models/m", (("nvidia.com/gpu", 1),)),
            ServingWorkload("Deployment models/m-canary", ()))),))
    assert observed_from_json(observed_to_json(now)) == now
    raw = json.loads(observed_to_json(now))
    for model in raw["models"]:
        del model["workloads"]
    (old,) = observed_from_json(json.dumps(raw)).models
    assert old.workloads == ()


def test_a_snapshot_stored_with_the_one_workload_of_a_model_loads_it_as_its_workloads() -> None:
    now = ObservedState(START_AT, (), (), (ObservedModel("m", 1, 0, 1, 5.0, 10.0),))
    raw = json.loads(observed_to_json(now))
    del raw["models"][0]["workloads"]
    raw["models"][0].update(workload="Deployment models/m", gpu_requests=[["nvidia.com/gpu", 1]])
    raw["models"].append({**raw["models"][0], "name": "several", "workload": "",
                          "gpu_requests": []})  # several were stored as none
    one, several = observed_from_json(json.dumps(raw)).models
    assert one.workloads == (ServingWorkload("Deployment models/m", (("nvidia.com/gpu", 1),)),)
    assert several.workloads == ()


def _stop_notes(report: TickReport) -> list[str]:
    return [n for n in report.observed.notes if "ungraceful_stop" in n]


def test_a_workload_whose_pods_stop_ungracefully_is_noted_every_tick_until_fixed(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    _fleet(apiserver, {LLAMA_SLICE: "1"})
    store = Store.open(sqlite_url, migrate=True)
    (first,) = _ticks(apiserver, clock, store, _settings(), 1)
    assert [n.split(" has no preStop hook")[0] for n in _stop_notes(first)] == [
        f"model {LLAMA}: Deployment {MODELS_NS}/{LLAMA}",
        f"model {RESNET}: Deployment {MODELS_NS}/{RESNET}"]  # the template sets none
    shown = read_fleet_status(store.engine, sqlite_url, "headroom-leader").last_tick
    assert shown is not None and set(_stop_notes(first)) <= set(shown.notes)
    assert observed_from_json(observed_to_json(first.observed)) == first.observed

    for model, grace_s in ((LLAMA, 60), (RESNET, 1)):  # resnet's 1 s is under 0.05 s + 5 s
        template = apiserver.get("apps/v1", "Deployment", model, MODELS_NS)["spec"]["template"]
        container = {**template["spec"]["containers"][0],
                     "lifecycle": {"preStop": {"sleep": {"seconds": 5}}}}
        apiserver.update("apps/v1", "Deployment", model, {"spec": {"template": {"spec": {
            "terminationGracePeriodSeconds": grace_s, "containers": [container]}}}},
            MODELS_NS)
    (fixed,) = _ticks(apiserver, clock, store, _settings(), 1)
    assert _stop_notes(fixed) == [
        f"model {RESNET}: Deployment {MODELS_NS}/{RESNET} gives a stopping pod 1 s "
        "(terminationGracePeriodSeconds), under the 5.05 s its requests may need (50 ms SLO + "
        "5 s for its endpoints to drop it): a scale-down may drop requests in flight; reason "
        "ungraceful_stop"]
    assert assert_schema_valid(apiserver) >= 1
