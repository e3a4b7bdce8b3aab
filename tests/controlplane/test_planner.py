"""Planner and desired state: ordered absolute targets, idempotent once the world matches."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controlplane.domain.actions import ActionOutcome, ScaleNodePool, SetReplicas
from controlplane.domain.demand import Demand
from controlplane.domain.desired import (
    DesiredState,
    DesiredTarget,
    PoolSpec,
    ReplicaFootprint,
    desired_state,
)
from controlplane.domain.guards import COOLDOWN, GuardLimits, GuardMemory
from controlplane.domain.observed import ObservedModel, ObservedPool, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment, WarmGpus
from controlplane.domain.plan import KeptReplicas, Plan
from controlplane.domain.planner import (
    POOL_OBJECTS_CHANGED,
    RELAYOUT_SURGE,
    REPLICAS_KEPT_NEED_ROOM,
    held_for_surges,
    plan,
)
from controlplane.domain.planner import made as changes_made

T0 = datetime(2026, 1, 5, tzinfo=UTC)
LIMITS = GuardLimits(max_step=4, stabilization_s=300)
POOLS = (PoolSpec("a100", "A100-80GB", 8, 0, 4, 5.0), PoolSpec("l4", "L4", 4, 1, 8, 0.8))


def _observed(a100_nodes: int, l4_nodes: int, replicas: int) -> ObservedState:
    return ObservedState(T0, (ObservedPool("a100", "A100-80GB", 8, a100_nodes, 0, a100_nodes),
                              ObservedPool("l4", "L4", 4, l4_nodes, 0, l4_nodes)), (),
                         (ObservedModel("m", replicas, 0, replicas, 10.0, 10.0),))


def test_desired_state_rounds_placed_and_warm_gpus_up_to_whole_nodes() -> None:
    segments = tuple(PlacedSegment("m", f"A100-80GB-{i}", "A100-80GB", "mig", "3g.40gb", 4, 3, 40)
                     for i in range(9))
    placement = FleetPlacement(1, segments, (("A100-80GB", tuple(s.gpu_id for s in segments)),),
                               (WarmGpus("A100-80GB", 2, "p90"),), 46.0, ())
    desired = desired_state(placement, POOLS, (Demand("m", 300, 200, 250, "forecast_p90"),))
    assert desired.pools[0] == DesiredTarget("a100", 2, "placement_9_gpus_warm_2", gpus=11,
                                             max_value=4)
    assert desired.pools[1].value == 1  # min_nodes holds an empty pool
    assert desired.replicas[0] == DesiredTarget("m", 9, "forecast_p90")


def test_mig_and_whole_gpus_of_one_pool_need_nodes_of_their_own() -> None:
    whole = tuple(PlacedSegment("big", f"A100-80GB/{i}", "A100-80GB", "exclusive", "", 0, 0, 9)
                  for i in range(3))
    sliced = tuple(PlacedSegment("m", f"A100-80GB/{i}", "A100-80GB", "mig", "3g.40gb", 4, 3, 40)
                   for i in (3, 4))
    ids = tuple(s.gpu_id for s in (*whole, *sliced))
    placement = FleetPlacement(1, (*whole, *sliced), (("A100-80GB", ids),), (), 0.0, ())
    demands = (Demand("big", 27, 20, 20, "p90"), Demand("m", 80, 60, 60, "p90"))
    desired = desired_state(placement, POOLS, demands)
    # 5 GPUs would fit one 8-GPU node, but a node is either MIG or whole GPUs
    assert desired.pools[0].value == 2
    # the free GPUs are split between nodes of two kinds: no room is known for kept replicas
    assert desired.pools[0].gpus is None


def test_plan_orders_pool_scale_up_before_replicas() -> None:
    desired = DesiredState((DesiredTarget("a100", 2, "r"), DesiredTarget("l4", 1, "r")),
                           (DesiredTarget("m", 6, "r"),))
    made, _ = plan(_observed(0, 1, 2), desired, GuardMemory(), LIMITS, LIMITS, T0)
    assert made.actions == (ScaleNodePool("a100", 0, 2, "r"), SetReplicas("m", 2, 6, "r"))


def test_plan_is_a_noop_once_the_world_matches_the_desired_state() -> None:
    desired = DesiredState((DesiredTarget("a100", 2, "r"), DesiredTarget("l4", 1, "r")),
                           (DesiredTarget("m", 6, "r"),))
    first, memory = plan(_observed(0, 1, 2), desired, GuardMemory(), LIMITS, LIMITS, T0)
    assert not first.is_noop
    second, _ = plan(_observed(2, 1, 6), desired, memory, LIMITS, LIMITS, T0)
    assert second.is_noop and second.render() == "no changes"


def test_scale_down_of_a_pool_is_held_and_reported_as_skipped() -> None:
    desired = DesiredState((DesiredTarget("a100", 1, "r"), DesiredTarget("l4", 1, "r")), ())
    _, memory = plan(_observed(3, 1, 0), DesiredState((DesiredTarget("a100", 3, "r"),), ()),
                     GuardMemory(), LIMITS, LIMITS, T0)
    made, _ = plan(_observed(3, 1, 0), desired, memory, LIMITS, LIMITS, T0)
    assert made.is_noop
    assert [s.reason for s in made.skipped] == ["scale_down_stabilization"]
    assert "skip a100 wanted 1, kept 3" in made.render()


def test_a_pool_whose_target_is_no_longer_held_is_written_again_at_the_same_size() -> None:
    observed = _observed(2, 1, 6)
    changed = ObservedPool("a100", "A100-80GB", 8, 2, 0, 2, target_intact=False)
    observed = ObservedState(T0, (changed, observed.pools[1]), (), observed.models)
    desired = DesiredState((DesiredTarget("a100", 2, "r"), DesiredTarget("l4", 1, "r")),
                           (DesiredTarget("m", 6, "r"),))
    made, _ = plan(observed, desired, GuardMemory(), LIMITS, LIMITS, T0)
    assert made.actions == (ScaleNodePool("a100", 2, 2, POOL_OBJECTS_CHANGED),)


def test_a_model_whose_name_holds_a_colon_is_still_marked_unplaced() -> None:
    placement = FleetPlacement(1, (), (), (), 0.0,
                               ("llama3:8b: pool_max_gpus (not enough GPUs)",))
    desired = desired_state(placement, POOLS, (Demand("llama3:8b", 9, 9, 9, "forecast_p90"),
                                               Demand("llama3", 9, 9, 9, "forecast_p90")))
    assert [(t.target, t.reason) for t in desired.replicas] == [
        ("llama3:8b", "unplaced:pool_max_gpus"), ("llama3", "forecast_p90")]


def test_a_pool_does_not_shrink_while_replicas_still_wait_to_scale_down() -> None:
    # 40 whole-GPU replicas on 5 nodes of 8 GPUs, all wanted down to 6 replicas on 1 node
    limits = GuardLimits(max_step=8, stabilization_s=0)
    desired = DesiredState((DesiredTarget("a100", 1, "r"),), (DesiredTarget("m", 6, "r"),))
    replicas, nodes, memory = 40, 5, GuardMemory()
    for tick in range(8):
        made, memory = plan(_observed(nodes, 1, replicas), desired, memory, limits, limits,
                            T0 + timedelta(seconds=30 * tick))
        for action in made.actions:
            if isinstance(action, ScaleNodePool):
                nodes = action.to_nodes
            elif isinstance(action, SetReplicas):
                replicas = action.to_replicas
        assert nodes * 8 >= replicas
        if replicas > 6:
            assert "skip a100 wanted 1, kept 5 (replicas_scaling_down)" in made.render()
    assert (nodes, replicas) == (1, 6)


def _l4_fleet(nodes: int, replicas: dict[str, int]) -> ObservedState:
    return ObservedState(T0, (ObservedPool("l4", "L4", 4, nodes, 0, nodes),), (),
                         tuple(ObservedModel(m, n, 0, n, 1.0, 1.0) for m, n in replicas.items()))


def _nodes_after(planned: Plan, pool: str, current: int) -> int:
    return next((a.to_nodes for a in planned.actions
                 if isinstance(a, ScaleNodePool) and a.pool == pool), current)


WHOLE_GPU_ON_L4 = (ReplicaFootprint("m", "l4"),)


def test_the_replicas_of_a_model_held_while_unplaced_keep_the_nodes_they_run_on() -> None:
    # 8 whole-GPU replicas on 2 nodes; the placement counts none of them (unplaced, held)
    desired = DesiredState((DesiredTarget("l4", 0, "placement_0_gpus_warm_0", gpus=0,
                                          max_value=8),),
                           (DesiredTarget("m", 8, "unplaced_held:pool_max_gpus"),),
                           footprints=WHOLE_GPU_ON_L4, held_unplaced=("m",))
    pools = GuardLimits(max_step=100, stabilization_s=0)  # not held by the window: by them
    made, _ = plan(_l4_fleet(2, {"m": 8}), desired, GuardMemory(), pools, LIMITS, T0)
    assert made.actions == ()
    assert [(s.target, s.kept, s.reason) for s in made.skipped] == [
        ("l4", 2, "replicas_scaling_down")]


def test_replicas_kept_within_tolerance_keep_the_nodes_they_run_on() -> None:
    # 40 whole-GPU replicas on 10 nodes of 4 GPUs; 36 are wanted (9 nodes), within 10 %
    replicas = GuardLimits(max_step=100, stabilization_s=0, tolerance=0.1)
    pools = GuardLimits(max_step=100, stabilization_s=0)
    desired = DesiredState((DesiredTarget("l4", 9, "r"),), (DesiredTarget("m", 36, "r"),),
                           footprints=WHOLE_GPU_ON_L4)
    made, _ = plan(_l4_fleet(10, {"m": 40}), desired, GuardMemory(), pools, replicas, T0)
    assert made.is_noop  # the 40 replicas stay, and so do the 10 nodes they need
    assert "skip l4 wanted 9, kept 10 (replicas_scaling_down)" in made.render()


def test_replicas_kept_by_the_stabilization_window_keep_the_nodes_they_run_on() -> None:
    replicas = GuardLimits(max_step=100, stabilization_s=300)
    pools = GuardLimits(max_step=100, stabilization_s=0)
    before = DesiredState((DesiredTarget("l4", 10, "r"),), (DesiredTarget("m", 40, "r"),),
                          footprints=WHOLE_GPU_ON_L4)
    after = replace(before, pools=(DesiredTarget("l4", 9, "r"),),
                    replicas=(DesiredTarget("m", 36, "r"),))
    _, memory = plan(_l4_fleet(10, {"m": 40}), before, GuardMemory(), pools, replicas, T0)
    made, memory = plan(_l4_fleet(10, {"m": 40}), after, memory, pools, replicas,
                        T0 + timedelta(seconds=60))
    assert made.is_noop
    assert [s.reason for s in made.skipped] == ["replicas_scaling_down",
                                                "scale_down_stabilization"]
    # once the window lets the replicas go, the pool follows them in the same plan
    made, _ = plan(_l4_fleet(10, {"m": 40}), after, memory, pools, replicas,
                   T0 + timedelta(seconds=360))
    assert made.actions == (SetReplicas("m", 40, 36, "r"), ScaleNodePool("l4", 10, 9, "r"))


def test_the_plan_records_the_replicas_a_guard_keeps_so_showback_can_bill_them() -> None:
    replicas = GuardLimits(max_step=1, stabilization_s=300)
    pools = GuardLimits(max_step=100, stabilization_s=0)
    before = DesiredState((DesiredTarget("l4", 1, "r"),), (DesiredTarget("m", 3, "r"),),
                          footprints=(ReplicaFootprint("m", "l4", product="L4", gpu_share=1.0),))
    after = replace(before, replicas=(DesiredTarget("m", 1, "r"),))
    _, memory = plan(_l4_fleet(1, {"m": 3}), before, GuardMemory(), pools, replicas, T0)
    held, memory = plan(_l4_fleet(1, {"m": 3}), after, memory, pools, replicas,
                        T0 + timedelta(seconds=60))  # the window holds all 3
    assert held.kept == (KeptReplicas("m", 2, "L4", 1.0),)
    stepped, _ = plan(_l4_fleet(1, {"m": 3}), after, memory, pools, replicas,
                      T0 + timedelta(seconds=360))  # max_step: 3 -> 2, one kept over 1
    assert stepped.kept == (KeptReplicas("m", 1, "L4", 1.0),)
    assert held.kept[0].gpus == 2.0


def test_the_plan_records_every_replica_of_a_model_held_while_unplaced() -> None:
    desired = DesiredState((DesiredTarget("l4", 0, "placement_0_gpus_warm_0", gpus=0,
                                          max_value=8),),
                           (DesiredTarget("m", 8, "unplaced_held:pool_max_gpus"),),
                           footprints=(ReplicaFootprint("m", "l4", 2, product="L4",
                                                        gpu_share=0.5),),
                           held_unplaced=("m",))
    made, _ = plan(_l4_fleet(2, {"m": 8}), desired, GuardMemory(), LIMITS, LIMITS, T0)
    assert made.kept == (KeptReplicas("m", 8, "L4", 0.5),)


def test_a_pool_sheds_the_nodes_its_kept_replicas_do_not_need() -> None:
    # m is kept at 40 (36 wanted), n goes from 8 replicas to none: 12 nodes -> 9 wanted; the
    # 4 replicas m keeps need one node more, n's two nodes go
    replicas = GuardLimits(max_step=100, stabilization_s=0, tolerance=0.1)
    pools = GuardLimits(max_step=100, stabilization_s=0)
    desired = DesiredState((DesiredTarget("l4", 9, "r"),),
                           (DesiredTarget("m", 36, "r"), DesiredTarget("n", 0, "r")),
                           footprints=(*WHOLE_GPU_ON_L4, ReplicaFootprint("n", "l4")))
    made, _ = plan(_l4_fleet(12, {"m": 40, "n": 8}), desired, GuardMemory(), pools, replicas, T0)
    assert _nodes_after(made, "l4", 12) == 10
    assert "skip l4 wanted 9, kept 10 (replicas_scaling_down)" in made.render()


def test_only_the_pool_of_the_kept_replicas_is_held() -> None:
    replicas = GuardLimits(max_step=100, stabilization_s=0, tolerance=0.1)
    pools = GuardLimits(max_step=100, stabilization_s=0)
    observed = ObservedState(T0, (ObservedPool("a100", "A100-80GB", 8, 3, 0, 3),
                                  ObservedPool("l4", "L4", 4, 10, 0, 10)), (),
                             (ObservedModel("m", 40, 0, 40, 1.0, 1.0),))
    desired = DesiredState((DesiredTarget("a100", 1, "r"), DesiredTarget("l4", 9, "r")),
                           (DesiredTarget("m", 36, "r"),), footprints=WHOLE_GPU_ON_L4)
    made, _ = plan(observed, desired, GuardMemory(), pools, replicas, T0)
    assert made.actions == (ScaleNodePool("a100", 3, 1, "r"),)


def test_shared_gpus_count_whole_gpus_for_the_kept_replicas() -> None:
    assert ReplicaFootprint("m", "l4", per_gpu=2).gpus_for(3) == 2
    assert ReplicaFootprint("m", "l4", whole_gpus=2).gpus_for(3) == 6


def _cooling(scale_up_ok: bool) -> Plan:
    """A replica scale-up 2 -> 4 applied with that outcome, then, a minute on, a fall to 1."""
    limits = GuardLimits(max_step=4, stabilization_s=0, cooldown_s=600)
    up, memory = plan(_observed(1, 1, 2), DesiredState((), (DesiredTarget("m", 4, "r"),)),
                      GuardMemory(), LIMITS, limits, T0)
    assert up.actions == (SetReplicas("m", 2, 4, "r"),)
    memory = changes_made(memory, up, (ActionOutcome("m", scale_up_ok, "HTTP 409: conflict"),))
    down, _ = plan(_observed(1, 1, 2), DesiredState((), (DesiredTarget("m", 1, "r"),)),
                   memory, LIMITS, limits, T0 + timedelta(seconds=60))
    return down


def test_a_scale_up_that_failed_starts_no_cooldown() -> None:
    assert _cooling(scale_up_ok=False).actions == (SetReplicas("m", 2, 1, "r"),)


def test_a_scale_up_made_holds_the_scale_down_for_the_cooldown() -> None:
    held = _cooling(scale_up_ok=True)
    assert held.actions == () and [s.reason for s in held.skipped] == [COOLDOWN]


def test_a_plan_not_applied_leaves_its_recommendations_but_no_changes() -> None:
    planned, memory = plan(_observed(1, 1, 2), DesiredState((), (DesiredTarget("m", 4, "r"),)),
                           GuardMemory(), LIMITS, LIMITS, T0)
    kept = changes_made(memory, planned, ())
    assert memory.changes_for("model/m") and kept.changes == ()
    assert kept.history == memory.history


def test_replicas_kept_within_tolerance_fit_the_free_room_on_the_targets_last_node() -> None:
    # 33 GPUs wanted -> 9 nodes of 4 with 3 GPUs free; the 35 replicas kept (within 10 %) fit
    # on those 9 nodes, so the tenth goes
    replicas = GuardLimits(max_step=100, stabilization_s=0, tolerance=0.1)
    pools = GuardLimits(max_step=100, stabilization_s=0)
    desired = DesiredState((DesiredTarget("l4", 9, "r", gpus=33),),
                           (DesiredTarget("m", 33, "r"),), footprints=WHOLE_GPU_ON_L4)
    made, _ = plan(_l4_fleet(10, {"m": 35}), desired, GuardMemory(), pools, replicas, T0)
    assert made.actions == (ScaleNodePool("l4", 10, 9, "r"),)
    assert [s.reason for s in made.skipped] == ["within_tolerance"]  # the replicas only
    # 36 kept replicas still fit; 37 (34 wanted, 34 GPUs on 9 nodes) need the tenth node
    made, _ = plan(_l4_fleet(10, {"m": 36}), desired, GuardMemory(), pools, replicas, T0)
    assert _nodes_after(made, "l4", 10) == 9
    wanting_34 = replace(desired, pools=(DesiredTarget("l4", 9, "r", gpus=34),),
                         replicas=(DesiredTarget("m", 34, "r"),))
    made, _ = plan(_l4_fleet(10, {"m": 37}), wanting_34, GuardMemory(), pools, replicas, T0)
    assert "skip l4 wanted 9, kept 10 (replicas_scaling_down)" in made.render()


def test_without_the_targets_gpus_kept_replicas_hold_whole_nodes_over_the_target() -> None:
    replicas = GuardLimits(max_step=100, stabilization_s=0, tolerance=0.1)
    pools = GuardLimits(max_step=100, stabilization_s=0)
    desired = DesiredState((DesiredTarget("l4", 9, "r"),), (DesiredTarget("m", 33, "r"),),
                           footprints=WHOLE_GPU_ON_L4)
    made, _ = plan(_l4_fleet(10, {"m": 35}), desired, GuardMemory(), pools, replicas, T0)
    assert made.is_noop
    assert "skip l4 wanted 9, kept 10 (replicas_scaling_down)" in made.render()


def test_a_pool_grows_for_a_rising_model_while_another_models_replicas_are_kept() -> None:
    # m is kept at 40 replicas (36 wanted, within 10 %) on 10 nodes of 4 GPUs; n rises from 0 to
    # 8: the target holds 36 + 8 GPUs (11 nodes), but the 4 kept replicas need a twelfth node,
    # else 4 of n's replicas wait for a GPU until m's replicas go
    replicas = GuardLimits(max_step=100, stabilization_s=0, tolerance=0.1)
    pools = GuardLimits(max_step=100, stabilization_s=0)
    desired = DesiredState((DesiredTarget("l4", 11, "r", gpus=44, max_value=20),),
                           (DesiredTarget("m", 36, "r"), DesiredTarget("n", 8, "r")),
                           footprints=(*WHOLE_GPU_ON_L4, ReplicaFootprint("n", "l4")))
    made, _ = plan(_l4_fleet(10, {"m": 40, "n": 0}), desired, GuardMemory(), pools, replicas, T0)
    assert made.actions[0] == ScaleNodePool("l4", 10, 12, REPLICAS_KEPT_NEED_ROOM)
    assert SetReplicas("n", 0, 8, "r") in made.actions


def test_a_pool_grows_for_kept_replicas_no_further_than_its_ceiling_and_its_step() -> None:
    replicas = GuardLimits(max_step=100, stabilization_s=0, tolerance=0.1)
    desired = DesiredState((DesiredTarget("l4", 11, "r", gpus=44, max_value=11),),
                           (DesiredTarget("m", 36, "r"), DesiredTarget("n", 8, "r")),
                           footprints=(*WHOLE_GPU_ON_L4, ReplicaFootprint("n", "l4")))
    fleet = _l4_fleet(10, {"m": 40, "n": 0})
    made, _ = plan(fleet, desired, GuardMemory(), GuardLimits(100, 0), replicas, T0)
    assert made.actions[0] == ScaleNodePool("l4", 10, 11, "r")  # at its ceiling: the target
    made, _ = plan(fleet, replace(desired, pools=(replace(desired.pools[0], value=10, gpus=40,
                                                          max_value=20),)),
                   GuardMemory(), GuardLimits(1, 0), replicas, T0)
    assert made.actions[0] == ScaleNodePool("l4", 10, 11, REPLICAS_KEPT_NEED_ROOM)  # one step


def test_a_pool_target_without_a_ceiling_is_never_raised_for_kept_replicas() -> None:
    replicas = GuardLimits(max_step=100, stabilization_s=0, tolerance=0.1)
    desired = DesiredState((DesiredTarget("l4", 11, "r", gpus=44),),
                           (DesiredTarget("m", 36, "r"), DesiredTarget("n", 8, "r")),
                           footprints=(*WHOLE_GPU_ON_L4, ReplicaFootprint("n", "l4")))
    made, _ = plan(_l4_fleet(10, {"m": 40, "n": 0}), desired, GuardMemory(),
                   GuardLimits(100, 0), replicas, T0)
    assert made.actions[0] == ScaleNodePool("l4", 10, 11, "r")


def test_desired_pools_may_grow_to_their_max_nodes() -> None:
    placement = FleetPlacement(1, (), (), (WarmGpus("A100-80GB", 9, "p90"),), 0.0, ())
    desired = desired_state(placement, POOLS, ())
    assert [(t.target, t.value, t.max_value) for t in desired.pools] == [("a100", 2, 4),
                                                                         ("l4", 1, 8)]


def test_a_pool_scale_down_below_a_relayout_surge_is_held_at_it_and_skipped_with_its_reason(
        ) -> None:
    stable = GuardLimits(max_step=4, stabilization_s=0)
    desired = DesiredState((DesiredTarget("a100", 1, "r"), DesiredTarget("l4", 1, "r")), ())
    planned, memory = plan(_observed(3, 1, 0), desired, GuardMemory(), stable, stable, T0)
    assert planned.actions == (ScaleNodePool("a100", 3, 1, "r"),)
    held, held_memory = held_for_surges(planned, memory, {"a100": 2, "l4": 4})
    assert held.actions == (ScaleNodePool("a100", 3, 2, "r"),)
    assert [(s.target, s.wanted, s.kept, s.reason) for s in held.skipped] == [
        ("a100", 1, 2, RELAYOUT_SURGE)]
    assert [c.delta for c in held_memory.changes_for("pool/a100")] == [-1]  # made, not -2
    whole, whole_memory = held_for_surges(planned, memory, {"a100": 3})
    assert whole.is_noop and [s.kept for s in whole.skipped] == [3]
    assert whole_memory.changes_for("pool/a100") == ()
    assert held_for_surges(planned, memory, {}) == (planned, memory)
