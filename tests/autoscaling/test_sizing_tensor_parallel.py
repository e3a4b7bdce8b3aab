"""Sizing without PlanFleet (``headroom simulate``) for replicas of several GPUs: placed as
PlanFleet places them (a segment on each of their GPUs, counted once), held on one node each by
the pool targets, and a cluster GPU budget's cut leaving no room named on the nodes it cut."""

from __future__ import annotations

from dataclasses import replace

from controlplane.autoscaling.live import replica_shape
from controlplane.autoscaling.nodepools import (
    clamp_nodes_to_budget,
    node_pool_targets,
    replica_footprints,
)
from controlplane.autoscaling.sizing import ModelRequest, ReplicaShape, fleet_placement
from controlplane.domain.desired import PoolSpec, ReplicaFootprint
from controlplane.domain.models import ProfilePoint
from controlplane.sim.catalog import DEMO_MODELS

TRIPLE = ReplicaShape("llama", "acme", "A100-80GB", 3.0, 30.0)
SINGLE = ReplicaShape("bert", "acme", "A100-80GB", 1.0, 10.0)
SHAPES = {s.model: s for s in (TRIPLE, SINGLE)}
NODES_OF_4 = (PoolSpec("a100", "A100-80GB", 4, 0, 20, 5.0),)


def test_a_sized_replica_of_three_gpus_is_a_segment_on_each_of_its_gpus_counted_once() -> None:
    placement = fleet_placement([ModelRequest("llama", 2), ModelRequest("bert", 1)], SHAPES)
    llama = [(s.gpu_id, s.gpus, s.gpu_index) for s in placement.segments if s.model == "llama"]
    assert llama == [("A100-80GB-0", 3, 0), ("A100-80GB-1", 3, 1), ("A100-80GB-2", 3, 2),
                     ("A100-80GB-3", 3, 0), ("A100-80GB-4", 3, 1), ("A100-80GB-5", 3, 2)]
    assert placement.replicas_for("llama") == 2
    assert placement.capacity_rps_for("llama") == 60.0
    assert placement.gpus_for("A100-80GB") == 7


def test_sized_replicas_of_three_gpus_on_nodes_of_four_take_a_node_each() -> None:
    placement = fleet_placement([ModelRequest("llama", 4)], SHAPES)
    desired = node_pool_targets(placement, NODES_OF_4, ())
    assert [(t.value, t.gpus, t.groups) for t in desired.pools] == [(4, 12, (3, 3, 3, 3))]


def test_a_pool_cut_by_the_cluster_budget_names_no_replica_room_on_its_nodes() -> None:
    desired = node_pool_targets(fleet_placement([ModelRequest("llama", 4)], SHAPES),
                                NODES_OF_4, ())
    clamped = clamp_nodes_to_budget(desired, NODES_OF_4, 12)
    assert [(t.value, t.gpus, t.groups) for t in clamped.pools] == [(3, 12, ())]


def test_the_live_loops_footprint_of_a_replica_of_four_gpus_is_four_whole_gpus_in_its_pool(
        ) -> None:
    llama = replace(next(m for m in DEMO_MODELS if m.name == "llama-3-70b"), profile=(
        ProfilePoint("A100-80GB", 0, 8, 1, 40.0, 600.0, 60_000, gpus=4),))
    (footprint,) = replica_footprints((replica_shape(llama, NODES_OF_4),), NODES_OF_4)
    assert footprint == ReplicaFootprint("llama-3-70b", "a100", 1, 4, "A100-80GB", 4.0)
    assert footprint.gpus_for(2) == 8
