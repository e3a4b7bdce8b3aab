"""A model's own workload checked against the slices the plan places its replicas on: the GPU
resource its pods ask for (as the reader parses the workload), per planned mode and MIG
strategy, over schema-valid objects."""

from __future__ import annotations

from typing import Any

import pytest
from apiserver import validate_object
from k8s_builders import model_deployment

from controlplane.adapters.k8s.gpu_requests import pod_gpu_requests
from controlplane.adapters.k8s.inventory import parse_workload
from controlplane.domain.observed import ServingWorkload
from controlplane.domain.placement import FleetPlacement, PlacedSegment, PlannedSlice
from controlplane.domain.workload_slices import (
    SLICE_MISMATCH,
    model_slice_findings,
    planned_request,
    slice_finding,
)

A100 = "A100-80GB"
ON_1G = PlannedSlice(A100, "mig", "1g.10gb", 3)
WHOLE = PlannedSlice(A100, "exclusive", "", 2)
MPS = PlannedSlice("L4", "mps", "", 4)
SLICED = PlannedSlice("L4", "time_sliced", "", 4)


def slice_drift(model: str, kind: str, obj: dict[str, Any], planned: list[PlannedSlice],
                strategy: str) -> list[str]:
    """What the loop finds for ``obj`` as the reader reads it (``parse_workload``)."""
    read = parse_workload(obj, kind, "app.kubernetes.io/name")
    found = slice_finding(model, f"{read.kind} {read.namespace}/{read.name}",
                          dict(read.gpu_requests), planned, strategy)
    return [found] if found is not None else []


def test_a_placement_names_the_slices_of_each_model_with_how_many_replicas_on_each() -> None:
    segments = (
        *(PlacedSegment("m", f"A100-80GB-{i}", A100, "mig", "1g.10gb", i, 1, 20)
          for i in range(3)),
        PlacedSegment("m", "A100-80GB-3", A100, "exclusive", "", 0, 0, 90),
        PlacedSegment("other", "L4-0", "L4", "mps", "", 0, 0, 30, mps_processes=4))
    placement = FleetPlacement(1, segments, (), (), 0.0, ())
    assert placement.slices_for("m") == (PlannedSlice(A100, "exclusive", "", 1),
                                         PlannedSlice(A100, "mig", "1g.10gb", 3))
    assert placement.slices_for("gone") == ()


def _tensor_parallel(model: str, first_gpu: int, gpus: int, throughput_rps: float
                     ) -> tuple[PlacedSegment, ...]:
    """One replica of ``gpus`` whole A100s as PlanFleet places it: a segment on each of GPUs
    listed one after another, each with its share of the replica's throughput."""
    return tuple(PlacedSegment(model, f"A100-80GB-{first_gpu + i}", A100, "exclusive", "", 0, 0,
                               throughput_rps / gpus, gpus=gpus, gpu_index=i)
                 for i in range(gpus))


TP_4 = PlannedSlice(A100, "exclusive", "", 2, gpus=4)


def test_a_replica_of_four_gpus_counts_once_on_a_slice_of_its_own_beside_single_gpu_ones() -> None:
    segments = (*_tensor_parallel("m", 0, 4, 80.0), *_tensor_parallel("m", 4, 4, 80.0),
                PlacedSegment("m", "A100-80GB-8", A100, "exclusive", "", 0, 0, 15))
    placement = FleetPlacement(1, segments, (), (), 0.0, ())
    assert placement.slices_for("m") == (PlannedSlice(A100, "exclusive", "", 1), TP_4)
    assert placement.replicas_for("m") == 3


def test_a_replica_of_four_gpus_asks_for_four_nvidia_gpus_in_one_pod() -> None:
    assert planned_request(TP_4, "mixed") == planned_request(TP_4, "single") == {
        "nvidia.com/gpu": 4}
    assert slice_drift("chat", "Deployment", asks({"nvidia.com/gpu": "4"}), [TP_4],
                       "mixed") == []


def test_one_gpu_per_pod_where_the_plan_has_replicas_of_four_gpus_is_a_mismatch_naming_four(
        ) -> None:
    found = slice_drift("chat", "Deployment", asks({"nvidia.com/gpu": "1"}), [TP_4], "mixed")
    assert found == [
        "model chat: Deployment models/chat asks for nvidia.com/gpu: 1 per pod, but the plan "
        "places its 2 replicas on 4 whole A100-80GB GPUs of one node per replica "
        "(nvidia.com/gpu: 4 each): they stay Pending or run on other GPUs than the plan counts. "
        "Headroom does not change the workload: give its pods the planned slice's GPU resource; "
        f"reason {SLICE_MISMATCH}"]
    # and a pod of 4 GPUs where the plan has single-GPU replicas is one too
    assert "(nvidia.com/gpu: 1 each)" in slice_drift(
        "chat", "Deployment", asks({"nvidia.com/gpu": "4"}), [WHOLE], "mixed")[0]


def workload(*containers: dict[str, Any], kind: str = "Deployment",
             init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """The model's workload (as the API server holds it) with ``containers`` as its pods'."""
    obj = model_deployment("chat", kind=kind)
    pod = obj["spec"]["template"]["spec"]
    pod["containers"] = list(containers)
    if init:
        pod["initContainers"] = list(init)
    validate_object(obj)
    return obj


def container(name: str = "triton", *, limits: dict[str, str] | None = None,
              requests: dict[str, str] | None = None,
              restart_policy: str | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    made: dict[str, Any] = {"name": name, "image": f"example.com/{name}:1",
                            "resources": resources}
    if restart_policy is not None:
        made["restartPolicy"] = restart_policy
    return made


def asks(resources: dict[str, str], kind: str = "Deployment") -> dict[str, Any]:
    return workload(container(limits=resources), kind=kind)


@pytest.mark.parametrize(("planned", "strategy", "resource"), [
    (ON_1G, "mixed", "nvidia.com/mig-1g.10gb"),
    (PlannedSlice(A100, "mig", "3g.40gb"), "mixed", "nvidia.com/mig-3g.40gb"),
    (ON_1G, "single", "nvidia.com/gpu"),  # single strategy: MIG devices are nvidia.com/gpu
    (WHOLE, "mixed", "nvidia.com/gpu"),
    # Headroom's sharing configs do not rename: a share is one nvidia.com/gpu
    (MPS, "mixed", "nvidia.com/gpu"),
    (SLICED, "mixed", "nvidia.com/gpu"),
    # an MPS replica on a MIG instance runs on the instance, not on a device-plugin share
    (PlannedSlice(A100, "mps", "2g.20gb"), "mixed", "nvidia.com/mig-2g.20gb"),
])
def test_each_planned_slice_asks_for_one_of_the_resource_the_device_plugin_advertises_it_as(
        planned: PlannedSlice, strategy: str, resource: str) -> None:
    assert planned_request(planned, strategy) == {resource: 1}
    assert slice_drift("chat", "Deployment", asks({resource: "1"}), [planned], strategy) == []


def test_a_slice_that_names_no_layout_is_not_checked() -> None:
    sized = PlannedSlice(A100, "sized", "", 5)  # the simulator's sizing placeholder
    assert planned_request(sized, "mixed") is None
    assert slice_drift("chat", "Deployment", asks({"nvidia.com/gpu": "1"}), [sized],
                       "mixed") == []


def test_a_whole_gpu_where_the_plan_has_a_mig_slice_is_named_with_both_resources() -> None:
    found = slice_drift("chat", "Deployment", asks({"nvidia.com/gpu": "1"}), [ON_1G], "mixed")
    assert found == [
        "model chat: Deployment models/chat asks for nvidia.com/gpu: 1 per pod, but the plan "
        "places its 3 replicas on MIG 1g.10gb instances of A100-80GB (nvidia.com/mig-1g.10gb: 1 "
        "each): they stay Pending or run on other GPUs than the plan counts. Headroom does not "
        "change the workload: give its pods the planned slice's GPU resource; reason "
        f"{SLICE_MISMATCH}"]


def test_another_mig_profile_than_the_planned_one_is_a_mismatch() -> None:
    found = slice_drift("chat", "StatefulSet", asks({"nvidia.com/mig-1g.10gb": "1"},
                                                    kind="StatefulSet"),
                        [PlannedSlice(A100, "mig", "3g.40gb", 1)], "mixed")
    assert len(found) == 1
    assert found[0].startswith("model chat: StatefulSet models/chat asks for "
                               "nvidia.com/mig-1g.10gb: 1 per pod, but the plan places its 1 "
                               "replica on MIG 3g.40gb instances of A100-80GB "
                               "(nvidia.com/mig-3g.40gb: 1 each)")


def test_under_the_single_strategy_a_mig_resource_is_a_mismatch() -> None:
    found = slice_drift("chat", "Deployment", asks({"nvidia.com/mig-1g.10gb": "1"}), [ON_1G],
                        "single")
    assert "(nvidia.com/gpu: 1 each)" in found[0]


@pytest.mark.parametrize("planned", [WHOLE, MPS, SLICED])
def test_a_renamed_shared_resource_is_not_what_headrooms_configs_advertise(
        planned: PlannedSlice) -> None:
    found = slice_drift("chat", "Deployment", asks({"nvidia.com/gpu.shared": "1"}), [planned],
                        "mixed")
    assert len(found) == 1 and "asks for nvidia.com/gpu.shared: 1 per pod" in found[0]
    assert "(nvidia.com/gpu: 1 each)" in found[0]


@pytest.mark.parametrize("planned", [WHOLE, MPS, SLICED])
def test_a_mig_instance_where_the_plan_has_a_whole_or_shared_gpu_is_a_mismatch(
        planned: PlannedSlice) -> None:
    found = slice_drift("chat", "Deployment", asks({"nvidia.com/mig-1g.10gb": "1"}), [planned],
                        "mixed")
    assert len(found) == 1 and "(nvidia.com/gpu: 1 each)" in found[0]


def test_two_gpus_per_pod_where_the_plan_counts_one_per_replica_is_a_mismatch() -> None:
    found = slice_drift("chat", "Deployment", asks({"nvidia.com/gpu": "2"}), [WHOLE], "mixed")
    assert "asks for nvidia.com/gpu: 2 per pod" in found[0]


def test_a_workload_asking_for_no_gpu_is_named_as_such() -> None:
    cpu_only = workload(container(limits={"cpu": "4", "memory": "16Gi"}))
    found = slice_drift("chat", "Deployment", cpu_only, [ON_1G], "mixed")
    assert "asks for no GPU per pod" in found[0]


def test_requests_and_limits_of_one_container_count_once_and_limits_alone_count() -> None:
    both = workload(container(requests={"nvidia.com/mig-1g.10gb": "1", "cpu": "2"},
                              limits={"nvidia.com/mig-1g.10gb": "1"}))
    alone = asks({"nvidia.com/mig-1g.10gb": "1"})
    assert pod_gpu_requests(both) == pod_gpu_requests(alone) == {"nvidia.com/mig-1g.10gb": 1}
    assert slice_drift("chat", "Deployment", both, [ON_1G], "mixed") == []


def test_the_containers_of_a_pod_are_summed() -> None:
    sidecar = container("metrics", limits={"cpu": "100m"})
    one = workload(container(limits={"nvidia.com/gpu": "1"}), sidecar)
    assert slice_drift("chat", "Deployment", one, [WHOLE], "mixed") == []
    two = workload(container(limits={"nvidia.com/gpu": "1"}),
                   container("vllm", limits={"nvidia.com/gpu": "1"}))
    assert pod_gpu_requests(two) == {"nvidia.com/gpu": 2}
    assert slice_drift("chat", "Deployment", two, [WHOLE], "mixed") != []


def test_init_containers_count_as_the_scheduler_counts_them() -> None:
    # an ordinary init container runs alone before the others: the larger of the two counts
    warmup = container("warmup", limits={"nvidia.com/gpu": "1"})
    main = container(limits={"nvidia.com/mig-1g.10gb": "1"})
    assert pod_gpu_requests(workload(main, init=(warmup,))) == {
        "nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 1}
    # a sidecar (an init container that keeps running) adds to the containers
    sidecar = container("proxy", limits={"nvidia.com/mig-1g.10gb": "1"}, restart_policy="Always")
    assert pod_gpu_requests(workload(main, init=(sidecar,))) == {"nvidia.com/mig-1g.10gb": 2}
    assert pod_gpu_requests(workload(main, init=(container("fetch", limits={"cpu": "1"}),))) == {
        "nvidia.com/mig-1g.10gb": 1}


def test_only_the_planned_slices_the_workload_does_not_fit_are_named() -> None:
    split = [PlannedSlice(A100, "mig", "1g.10gb", 2), PlannedSlice(A100, "exclusive", "", 1)]
    found = slice_drift("chat", "Deployment", asks({"nvidia.com/mig-1g.10gb": "1"}), split,
                        "mixed")
    assert len(found) == 1
    assert ("but the plan places 1 of its 3 replicas on whole A100-80GB GPUs (nvidia.com/gpu: 1 "
            "each)") in found[0]
    both = slice_drift("chat", "Deployment", asks({"nvidia.com/gpu.shared": "1"}), split,
                       "mixed")
    assert ("places its 3 replicas as 2 on MIG 1g.10gb instances of A100-80GB "
            "(nvidia.com/mig-1g.10gb: 1 each) and 1 on whole A100-80GB GPUs (nvidia.com/gpu: 1 "
            "each)") in both[0]


def test_an_unparsable_quantity_never_fits() -> None:
    odd = workload(container(limits={"nvidia.com/mig-1g.10gb": "1"}))
    odd["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/mig-1g.10gb"] = "one"  # read back as stored, not as the schema allows
    found = slice_drift("chat", "Deployment", odd, [ON_1G], "mixed")
    assert "asks for nvidia.com/mig-1g.10gb: (unparsable) per pod" in found[0]


def test_of_several_workloads_each_that_fits_no_planned_slice_is_named_alone() -> None:
    split = (PlannedSlice(A100, "mig", "1g.10gb", 2), PlannedSlice(A100, "exclusive", "", 1))
    fits = ServingWorkload("Deployment models/chat-mig", (("nvidia.com/mig-1g.10gb", 1),))
    whole = ServingWorkload("Deployment models/chat-whole", (("nvidia.com/gpu", 1),))
    shared = ServingWorkload("StatefulSet models/chat-old", (("nvidia.com/gpu.shared", 1),))
    assert model_slice_findings("chat", (fits, whole), split, "mixed") == ()
    (found,) = model_slice_findings("chat", (fits, shared, whole), split, "mixed")
    assert found == (
        "model chat: StatefulSet models/chat-old asks for nvidia.com/gpu.shared: 1 per pod, but "
        "the plan places none of the model's replicas on that slice: it places its 3 replicas as "
        "2 on MIG 1g.10gb instances of A100-80GB (nvidia.com/mig-1g.10gb: 1 each) and 1 on whole "
        "A100-80GB GPUs (nvidia.com/gpu: 1 each), so its pods stay Pending or run on other GPUs "
        "than the plan counts. Headroom does not change the workload: give its pods a planned "
        f"slice's GPU resource; reason {SLICE_MISMATCH}")


def test_a_planned_slice_none_of_a_models_several_workloads_asks_for_is_named_with_them() -> None:
    split = (PlannedSlice(A100, "mig", "1g.10gb", 2), PlannedSlice(A100, "exclusive", "", 1))
    mig = tuple(ServingWorkload(f"Deployment models/chat-{i}", (("nvidia.com/mig-1g.10gb", 1),))
                for i in (1, 2))
    (found,) = model_slice_findings("chat", mig, split, "mixed")
    assert found == (
        "model chat: the plan places 1 of its 3 replicas on whole A100-80GB GPUs (nvidia.com/gpu: "
        "1 each), but none of its workloads (Deployment models/chat-1, Deployment models/chat-2) "
        "asks for that: those replicas stay Pending or run on other GPUs than the plan counts. "
        "Headroom does not change the workloads: give one's pods the planned slice's GPU "
        f"resource; reason {SLICE_MISMATCH}")


def test_one_workload_of_a_model_is_checked_as_before() -> None:
    one = (ServingWorkload("Deployment models/chat", (("nvidia.com/gpu", 1),)),)
    assert model_slice_findings("chat", one, (ON_1G,), "mixed") == (
        slice_finding("chat", "Deployment models/chat", {"nvidia.com/gpu": 1}, [ON_1G], "mixed"),)
    assert model_slice_findings("chat", (), (ON_1G,), "mixed") == ()
