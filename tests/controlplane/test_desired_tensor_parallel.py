"""Desired nodes for replicas of several GPUs (tensor parallel): each replica on N whole GPUs of
ONE node, so a pool's node target counts nodes that hold whole replicas, not GPUs alone, and the
replicas the guards keep over their targets only fill room a whole replica fits in."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from controlplane.domain.actions import ScaleNodePool
from controlplane.domain.demand import Demand
from controlplane.domain.desired import (
    DesiredState,
    DesiredTarget,
    PoolSpec,
    ReplicaFootprint,
    desired_state,
)
from controlplane.domain.guards import GuardLimits, GuardMemory
from controlplane.domain.observed import ObservedModel, ObservedPool, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment, WarmGpus
from controlplane.domain.plan import KeptReplicas, Plan
from controlplane.domain.planner import REPLICAS_KEPT_NEED_ROOM, plan

T0 = datetime(2026, 1, 5, tzinfo=UTC)
A100 = "A100-80GB"
NODES_OF_4 = (PoolSpec("a100", A100, 4, 0, 20, 5.0),)


def _replica(model: str, first_gpu: int, gpus: int) -> tuple[PlacedSegment, ...]:
    """One replica of ``gpus`` whole A100s as PlanFleet places it: a segment on each GPU, one
    after another, each with 1/``gpus`` of the replica's 60 rps."""
    return tuple(PlacedSegment(model, f"{A100}/{first_gpu + i}", A100, "exclusive", "", 0, 0,
                               60.0 / gpus, gpus=gpus, gpu_index=i) for i in range(gpus))


def _single(model: str, gpu: int, mode: str = "exclusive", mig: str = "") -> PlacedSegment:
    return PlacedSegment(model, f"{A100}/{gpu}", A100, mode, mig, 0, int(mig[:1] or 0), 20.0)


def _placement(*segments: PlacedSegment, warm: int = 0) -> FleetPlacement:
    ids = tuple(dict.fromkeys(s.gpu_id for s in segments))
    return FleetPlacement(1, segments, ((A100, ids),),
                          (WarmGpus(A100, warm, "p90"),) if warm else (), 0.0, ())


def _replicas(count: int, gpus: int, model: str = "llama") -> tuple[PlacedSegment, ...]:
    return tuple(s for r in range(count) for s in _replica(model, r * gpus, gpus))


def _pool(placement: FleetPlacement, pools: tuple[PoolSpec, ...] = NODES_OF_4) -> DesiredTarget:
    return desired_state(placement, pools, ()).pools[0]


def test_four_replicas_of_three_gpus_on_nodes_of_four_need_four_nodes() -> None:
    # 12 GPUs would fill 3 nodes of 4, but a node of 4 holds one replica of 3
    target = _pool(_placement(*_replicas(4, 3)))
    assert (target.value, target.gpus, target.groups) == (4, 12, (3, 3, 3, 3))
    assert target.reason == "placement_12_gpus_warm_0"


def test_three_replicas_of_three_gpus_and_three_single_gpus_on_nodes_of_four_need_three_nodes(
        ) -> None:
    singles = tuple(_single("bert", 9 + i) for i in range(3))
    assert _pool(_placement(*_replicas(3, 3), *singles)).value == 3
    assert _pool(_placement(*_replicas(3, 3), *singles, _single("bert", 12))).value == 4


def test_warm_gpus_take_the_room_replicas_of_several_gpus_leave_on_their_nodes() -> None:
    assert _pool(_placement(*_replicas(3, 3), warm=3)).value == 3
    assert _pool(_placement(*_replicas(3, 3), warm=4)).value == 4


def test_two_replicas_of_two_gpus_share_a_node_of_four() -> None:
    assert _pool(_placement(*_replicas(2, 2))).value == 1


def test_mig_gpus_beside_replicas_of_several_gpus_need_nodes_of_their_own() -> None:
    # 2 replicas of 3 leave a GPU free on each of their 2 nodes, but a MIG GPU needs a node
    # laid out for MIG: 3 nodes, not 2
    mig = (_single("bert", 6, "mig", "3g.40gb"), _single("bert", 7, "mig", "3g.40gb"))
    target = _pool(_placement(*_replicas(2, 3), *mig))
    assert target.value == 3 and target.gpus is None


def test_a_replica_of_several_gpus_is_one_replica_of_its_model() -> None:
    placement = _placement(*_replicas(2, 4), _single("bert", 8))
    desired = desired_state(placement, NODES_OF_4, (Demand("llama", 100, 90, 90, "p90"),
                                                    Demand("bert", 20, 15, 15, "p90")))
    assert [(t.target, t.value) for t in desired.replicas] == [("llama", 2), ("bert", 1)]
    assert placement.capacity_rps_for("llama") == 120.0
    assert placement.gpus_for(A100) == 9


def test_a_replica_of_more_gpus_than_a_node_has_does_not_break_the_desired_state() -> None:
    # PlanFleet leaves such a model unplaced; a placement that has one still counts its GPUs
    target = _pool(_placement(*_replicas(1, 8)))
    assert (target.value, target.gpus) == (2, 8)


def test_a_pool_held_at_its_max_nodes_names_no_replica_on_its_full_nodes() -> None:
    capped = (PoolSpec("a100", A100, 4, 0, 3, 5.0),)
    target = _pool(_placement(*_replicas(4, 3)), capped)
    assert (target.value, target.gpus, target.groups) == (3, 12, ())


# -- the planner: replicas the guards keep over their targets -------------------------------
TP_3 = ReplicaFootprint("llama", "a100", 1, 3, A100, 3.0)
BERT = ReplicaFootprint("bert", "a100", 1, 1, A100, 1.0)
KEEPS_ONE = GuardLimits(max_step=100, stabilization_s=0, tolerance=0.25)  # 4 -> 3 within it
POOL_LIMITS = GuardLimits(max_step=100, stabilization_s=0)


def _three_of_three(model: str, footprint: ReplicaFootprint) -> DesiredState:
    """3 replicas of 3 GPUs wanted on nodes of 4 (3 nodes, a GPU free on each), and
    ``model``, which runs at ``footprint``, wanted at 3 replicas."""
    wanted = desired_state(_placement(*_replicas(3, 3)), NODES_OF_4,
                           (Demand("llama", 180, 170, 170, "p90"),))
    return replace(wanted, replicas=(DesiredTarget(model, 3, "p90"),), footprints=(footprint,))


def _fleet(nodes: int, model: str, replicas: int) -> ObservedState:
    return ObservedState(T0, (ObservedPool("a100", A100, 4, nodes, 0, nodes),), (),
                         (ObservedModel(model, replicas, 0, replicas, 1.0, 1.0),))


def _plan(nodes: int, model: str, footprint: ReplicaFootprint) -> Plan:
    made, _ = plan(_fleet(nodes, model, 4), _three_of_three(model, footprint), GuardMemory(),
                   POOL_LIMITS, KEEPS_ONE, T0)
    return made


def test_a_kept_replica_of_three_gpus_keeps_a_node_of_its_own_where_its_gpus_would_fit_the_room(
        ) -> None:
    # the 3 free GPUs are on 3 nodes: the fourth replica, kept within tolerance, needs the
    # fourth node, and showback bills it its 3 GPUs
    made = _plan(4, "llama", TP_3)
    assert made.actions == ()
    assert "skip a100 wanted 3, kept 4 (replicas_scaling_down)" in made.render()
    assert made.kept == (KeptReplicas("llama", 1, A100, 3.0),)
    assert made.kept[0].gpus == 3.0


def test_a_kept_single_gpu_replica_takes_the_room_replicas_of_several_gpus_leave() -> None:
    made = _plan(4, "bert", BERT)
    assert ScaleNodePool("a100", 4, 3, "placement_9_gpus_warm_0") in made.actions


def test_a_pool_grows_for_a_kept_replica_of_three_gpus_that_no_node_has_room_for() -> None:
    made = _plan(3, "llama", TP_3)
    assert made.actions == (ScaleNodePool("a100", 3, 4, REPLICAS_KEPT_NEED_ROOM),)


def test_replicas_of_more_gpus_than_a_node_has_held_while_unplaced_keep_their_gpus_nodes(
        ) -> None:
    # PlanFleet leaves a model of 8 GPUs unplaced on nodes of 4; the 2 replicas it serves
    # with (held) still hold the nodes their 16 GPUs fill, and nothing fails
    wide = ReplicaFootprint("llama", "a100", 1, 8, A100, 8.0)
    desired = DesiredState((DesiredTarget("a100", 0, "placement_0_gpus_warm_0", gpus=0,
                                          max_value=20),),
                           (DesiredTarget("llama", 2, "unplaced_held:no_pool_for_profile"),),
                           footprints=(wide,), held_unplaced=("llama",))
    made, _ = plan(_fleet(4, "llama", 2), desired, GuardMemory(), POOL_LIMITS, KEEPS_ONE, T0)
    assert made.actions == ()
    assert made.kept == (KeptReplicas("llama", 2, A100, 8.0),)
