"""The control plane's PlanFleet request: pools as large as an operator configures them stay
within what the placement API accepts; its inventory says what each GPU holds now; the plan's
segments become replicas (one per MPS process of an MPS-shared whole GPU)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from controlplane.adapters.placement import LocalPlacementClient, inventory_request, plan_request
from controlplane.domain.demand import Demand
from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import (
    ColdStart,
    Engine,
    Isolation,
    ModelSpec,
    ProfilePoint,
    SharingMode,
)
from controlplane.domain.node_configs import GpuConfig, planned_configs
from controlplane.domain.observed import ObservedGpu, ObservedNode, ObservedState
from controlplane.domain.placement import PlannedSlice
from controlplane.domain.sharing_config import SharingLayout, device_plugin_config
from controlplane.domain.workload_slices import planned_request
from scheduler.convert import fleet_request_from_pb, nodes_from_pb
from scheduler.domain.model import HeldInstance
from scheduler.domain.validate import MAX_POOL_GPUS, validate_fleet_request, validate_nodes
from scheduler.engine import PlacementEngine
from scheduler.highs import HighsSolver


def test_a_pool_larger_than_the_api_accepts_is_offered_at_the_api_limit() -> None:
    pools = (PoolSpec("big", "A100-80GB", 8, 0, 50_000, 4.0),
             PoolSpec("small", "L4", 4, 0, 8, 0.8))
    request = plan_request((), (), pools)
    assert [p.max_gpus for p in request.pools] == [MAX_POOL_GPUS, 32]
    validate_fleet_request(fleet_request_from_pb(request))  # raises on a malformed request


def test_the_inventory_carries_each_gpus_mig_instances_and_whole_gpus_in_use() -> None:
    a100 = ObservedNode("a100-1", "a100", "A100-80GB", True, 64_000, 512_000, (
        ObservedGpu(0, "A100-80GB", 81920, True, ("3g.40gb", "4g.40gb"), "mig"),
        ObservedGpu(1, "A100-80GB", 81920, True, mig_enabled=True),  # on, no instances
    ), gpu_pods=3)
    l4_busy = ObservedNode("l4-1", "l4", "L4", True, 16_000, 64_000,
                           (ObservedGpu(0, "L4", 23034, False, sharing="mps",
                                        sharing_replicas=2),
                            ObservedGpu(1, "L4", 23034, False, sharing="mps",
                                        sharing_replicas=2)), gpu_pods=1, whole_gpus_in_use=1)
    l4_idle = ObservedNode("l4-2", "l4", "L4", True, 16_000, 64_000,
                           (ObservedGpu(0, "L4", 23034, False),))
    cordoned = replace(l4_idle, name="l4-3", cordoned=True, gpu_pods=1, whole_gpus_in_use=1)
    booting = replace(l4_idle, name="l4-4", ready=False)
    observed = ObservedState(datetime(2026, 1, 5, tzinfo=UTC), (),
                             (a100, l4_busy, l4_idle, cordoned, booting), ())
    nodes = nodes_from_pb(inventory_request(observed))
    validate_nodes(nodes)  # raises on a malformed inventory
    # every node is synced (a node left out would lose its bindings); the cordoned and the
    # not-ready one take nothing new
    assert {n.name: n.unschedulable for n in nodes} == {
        "a100-1": False, "l4-1": False, "l4-2": False, "l4-3": True, "l4-4": True}
    held = {(n.name, g.index): (g.mig_instances, g.whole_in_use) for n in nodes for g in n.gpus}
    assert held == {
        ("a100-1", 0): ((HeldInstance("3g.40gb", None), HeldInstance("4g.40gb", None)), False),
        ("a100-1", 1): ((), False),  # MIG on without instances serves nothing: not whole
        ("l4-1", 0): ((), True),
        ("l4-1", 1): ((), False),  # its one pod holds one GPU: the other is free to re-plan
        ("l4-2", 0): ((), False),  # its node runs no GPU pods
        ("l4-3", 0): ((), True),
        ("l4-4", 0): ((), False),
    }


def _trusted(name: str, point: ProfilePoint) -> ModelSpec:
    return ModelSpec(name, "t", Isolation.TRUSTED, Engine.TRITON, 1000.0, (point,),
                     ColdStart(10.0, 20.0))


def test_a_whole_gpu_segment_of_four_mps_processes_runs_four_replicas_serving_it_together(
) -> None:
    # throughput_rps 100 is the segment's (all 4 processes), as PlanFleet counts it
    spec = _trusted("m", ProfilePoint("L4", 0, 8, 4, 100.0, 100.0, 4000))
    placement = LocalPlacementClient(PlacementEngine()).plan_fleet(
        (Demand("m", 300.0, 300.0, 300.0, "forecast_p90"),), (spec,),
        (PoolSpec("l4", "L4", 8, 0, 4, 0.8),))
    assert [(s.mode, s.mps_processes, s.replicas) for s in placement.segments] == \
        [("mps", 4, 4)] * 3
    assert placement.gpus_for("L4") == 3
    assert placement.capacity_rps_for("m") == 300.0
    # one pod per MPS process, each asking for one of the GPU's 4 device-plugin shares
    assert placement.replicas_for("m") == 12
    assert placement.slices_for("m") == (PlannedSlice("L4", "mps", "", 12),)


def test_a_mig_instance_shared_by_mps_runs_one_replica_serving_its_whole_throughput() -> None:
    # a MIG instance's MPS processes run in its one pod under its own daemon
    spec = _trusted("m", ProfilePoint("A100-80GB", 1, 8, 2, 50.0, 100.0, 4000))
    placement = LocalPlacementClient(PlacementEngine()).plan_fleet(
        (Demand("m", 100.0, 100.0, 100.0, "forecast_p90"),), (spec,),
        (PoolSpec("a100", "A100-80GB", 8, 0, 4, 4.0),))
    assert [(s.mode, s.mig_profile, s.mps_processes, s.replicas) for s in placement.segments] \
        == [("mps", "1g.10gb", 2, 1)] * 2
    assert placement.replicas_for("m") == 2
    assert placement.capacity_rps_for("m") == 100.0


def test_none_models_each_needing_a_fraction_of_a_gpu_are_time_sliced_onto_one_node_config(
) -> None:
    # three dev models of 4,000 MiB, 40 rps on a whole L4 at 20 ms: a 3-way slice serves 12
    specs = tuple(ModelSpec(f"dev-{i}", "t", Isolation.NONE, Engine.TRITON, 500.0,
                            (ProfilePoint("L4", 0, 4, 1, 40.0, 20.0, 4000),),
                            ColdStart(10.0, 20.0)) for i in range(3))
    placement = LocalPlacementClient(PlacementEngine(solver=HighsSolver())).plan_fleet(
        tuple(Demand(s.name, 10.0, 10.0, 10.0, "forecast_p90") for s in specs), specs,
        (PoolSpec("l4", "L4", 8, 0, 4, 0.8),))
    assert placement.gpus_for("L4") == 1
    assert [(s.model, s.mode, s.replicas) for s in placement.segments] == [
        (f"dev-{i}", "time_sliced", 1) for i in range(3)]
    assert placement.capacity_rps_for("dev-0") == pytest.approx(40.0 * 0.9 / 3)
    assert placement.slices_for("dev-0") == (PlannedSlice("L4", "time_sliced", "", 1),)
    # the node's device-plugin config time-slices each GPU three ways, one pod per slice
    layout = SharingLayout(SharingMode.TIME_SLICING, 3)
    assert planned_configs(placement) == {"L4": [GpuConfig((), layout)]}
    assert device_plugin_config(layout, "mixed")["sharing"] == {"timeSlicing": {
        "renameByDefault": False, "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}}
    assert planned_request(placement.slices_for("dev-0")[0], "mixed") == {"nvidia.com/gpu": 1}
