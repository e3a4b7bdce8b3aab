"""Cordoned and not-ready nodes: the inventory sends them ``unschedulable``; their bindings stay
(their pods may still run, and come back with them), nothing new is placed there, and PlanFleet
keeps none of their layouts."""

from __future__ import annotations

import pytest

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import Infeasible
from scheduler.domain.fleet_prior import prior_from_inventory
from scheduler.domain.model import GpuSpec, HeldInstance, Isolation, NodeSpec, WorkloadSpec
from scheduler.domain.placer import OnlinePlacer
from scheduler.engine import PlacementEngine


def _node(name: str, unschedulable: bool = False) -> pb.Node:
    return pb.Node(name=name, cpu_milli=64_000, memory_mib=512_000, pool="a100",
                   unschedulable=unschedulable,
                   gpus=[pb.Gpu(index=i, product="A100-80GB", memory_mib=81_920)
                         for i in range(2)])


def _sync(engine: PlacementEngine, *nodes: pb.Node) -> None:
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=list(nodes)))


def _place(engine: PlacementEngine, workload_id: str, gpus: int = 2) -> pb.Binding:
    return engine.place(pb.PlaceRequest(workload_id=workload_id, model="m", cpu_milli=1000,
                                        memory_mib=1024, num_gpu=gpus, gpu_milli=1000)).binding


def test_a_cordoned_node_keeps_its_bindings_and_takes_nothing_new_until_it_is_back() -> None:
    engine = PlacementEngine()
    _sync(engine, _node("a"))
    assert _place(engine, "on-a", gpus=1).node == "a"  # a keeps one idle GPU
    _sync(engine, _node("a", unschedulable=True), _node("b"))  # a cordoned for maintenance
    assert engine.counts()[0] == 1  # the binding on a stays
    assert _place(engine, "new", gpus=2).node == "b"
    with pytest.raises(Infeasible) as refused:
        _place(engine, "more", gpus=1)  # a's idle GPU is not offered while a is cordoned
    assert refused.value.reason == "no_idle_gpus"
    _sync(engine, _node("a"), _node("b"))  # uncordoned: on-a still holds its GPU
    with pytest.raises(Infeasible):
        _place(engine, "both-of-a", gpus=2)
    assert _place(engine, "more", gpus=1).node == "a"


def test_with_every_node_unschedulable_place_says_so() -> None:
    engine = PlacementEngine()
    _sync(engine, _node("a", unschedulable=True), _node("b", unschedulable=True))
    with pytest.raises(Infeasible) as refused:
        _place(engine, "w", gpus=1)
    assert refused.value.reason == "no_schedulable_node"


def test_cpu_only_work_and_mig_shares_avoid_an_unschedulable_node() -> None:
    roomy = NodeSpec("roomy", 104_000, 524_288,
                     (GpuSpec(0, "A100-80GB", 81_920, True),), unschedulable=True)
    open_ = NodeSpec("open", 16_000, 65_536, (GpuSpec(0, "A100-80GB", 81_920, True),))
    placer = OnlinePlacer([roomy, open_])
    cpu_only = placer.place(WorkloadSpec("cpu", "m", "t", 8000, 1024, 0, 0, 0, frozenset(),
                                         Isolation.UNSPECIFIED))
    mig = placer.place(WorkloadSpec("strict", "m", "t", 1000, 1024, 1, 250, 0, frozenset(),
                                    Isolation.STRICT))
    assert (cpu_only.node, mig.node) == ("open", "open")


def test_planfleet_keeps_no_layout_of_an_unschedulable_node() -> None:
    held = (HeldInstance("3g.40gb", 4), HeldInstance("4g.40gb", 0))
    nodes = [NodeSpec(name, 64_000, 512_000, (GpuSpec(0, "A100-80GB", 81_920, True, held),),
                      unschedulable=name == "draining")
             for name in ("draining", "serving")]
    plan = prior_from_inventory(nodes)
    assert [g.gpu_id for g in plan.gpus] == ["serving/0"]
