"""Stranded replicas: pods of a replica of several GPUs that no node of the pool has room for
although the pool has the GPUs free, spread over its nodes, raise the pool's target by the nodes
they fill, so a node limit (Karpenter's) does not hold them Pending for good."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.domain.desired import DesiredState, DesiredTarget, PoolSpec, ReplicaFootprint
from controlplane.domain.guards import GuardMemory, Recommendation
from controlplane.domain.observed import (
    ObservedGpu,
    ObservedModel,
    ObservedNode,
    ObservedPool,
    ObservedState,
)
from controlplane.domain.stranded import (
    MEMORY_PREFIX,
    Relief,
    free_whole_gpus,
    relieve_stranded,
    stranded_noted,
    stranded_replicas,
)

T0 = datetime(2026, 1, 5, tzinfo=UTC)
A100 = "A100-80GB"
POOL = PoolSpec("a100", A100, 4, 0, 10, 5.0)
GRACE_S = 120.0
#: the guard memory of a tick that has seen pool a100's replicas stranded since the grace began
STRANDED_SINCE_GRACE = GuardMemory(history=(
    (MEMORY_PREFIX + "a100", (Recommendation(T0 - timedelta(seconds=GRACE_S), 1),)),))


def _node(name: str, in_use: int, *, ready: bool = True, cordoned: bool = False,
          sharing: str = "exclusive", mig: tuple[str, ...] = ()) -> ObservedNode:
    gpus = tuple(ObservedGpu(i, A100, 81_920, True, mig if i == 0 else (), sharing)
                 for i in range(4))
    return ObservedNode(name, "a100", A100, ready, 32_000, 256_000, gpus, cordoned=cordoned,
                        gpu_pods=in_use, whole_gpus_in_use=in_use)


def _observed(*nodes: ObservedNode, unscheduled: int | None = 1) -> ObservedState:
    ready = sum(1 for n in nodes if n.ready)
    return ObservedState(T0, (ObservedPool("a100", A100, 4, ready, len(nodes) - ready,
                                           len(nodes)),), nodes,
                         (ObservedModel("llama-70b", 5, 1, 6, 30.0, 30.0,
                                        replicas_unscheduled=unscheduled),
                          ObservedModel("bert", 6, 0, 6, 30.0, 30.0, replicas_unscheduled=0)))


def _desired(nodes: int, *, gpus: int = 2, max_value: int | None = 10) -> DesiredState:
    return DesiredState((DesiredTarget("a100", nodes, "placement_14_gpus_warm_0", 14, max_value,
                                       (gpus,) * 6),),
                        (DesiredTarget("llama-70b", 6, "forecast"),),
                        footprints=(ReplicaFootprint("llama-70b", "a100", 1, gpus, A100, gpus),
                                    ReplicaFootprint("bert", "a100", 1, 1, A100, 1.0)))


def _relieve(desired: DesiredState, observed: ObservedState,
             pools: tuple[PoolSpec, ...] = (POOL,), budget: int | None = None,
             memory: GuardMemory = STRANDED_SINCE_GRACE, at: datetime = T0) -> Relief:
    """The relief at ``at`` of a pool whose replicas (by default) have waited out the grace."""
    return relieve_stranded(desired, observed, pools, memory, at, GRACE_S, budget)


def test_a_replica_of_two_gpus_with_one_free_gpu_on_each_node_is_stranded() -> None:
    # 4 nodes of 4 GPUs, 3 in use on each: 4 GPUs free, but no node has 2 of them
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)))
    (found,) = stranded_replicas(observed, _desired(4))
    assert (found.model, found.pool, found.gpus, found.replicas) == ("llama-70b", "a100", 2, 1)
    assert (found.most_free_gpus, found.free_gpus) == (1, 4)


def test_the_pool_of_stranded_replicas_grows_by_the_nodes_they_fill() -> None:
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)), unscheduled=3)
    relieved = _relieve(_desired(4), observed).desired
    # three replicas of 2 GPUs: a node of 4 holds two of them, so two nodes more
    assert relieved.pools[0].value == 6
    assert relieved.pools[0].reason == "stranded:llama-70b 3x2 GPUs"
    assert relieved.pools[0].max_value == 10
    # replicas, footprints and the rest of the target are left as they were
    assert relieved.replicas == _desired(4).replicas
    assert (relieved.pools[0].gpus, relieved.pools[0].groups) == (14, (2,) * 6)


def test_a_pool_is_raised_only_once_its_replicas_have_waited_out_the_grace() -> None:
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)))
    first = _relieve(_desired(4), observed, memory=GuardMemory())
    # the first tick that sees them remembers since when; the pool waits
    assert first.desired == _desired(4)
    assert first.memory.for_target(MEMORY_PREFIX + "a100") == (Recommendation(T0, 1),)
    (note,) = first.notes
    assert "stranded for 0 s: pool a100's target is raised for them after 120 s " \
           "(autoscaling.stranded_grace_s)" in note
    later = _relieve(_desired(4), observed, memory=first.memory,
                     at=T0 + timedelta(seconds=119))
    assert later.desired == _desired(4) and later.memory == first.memory
    due = _relieve(_desired(4), observed, memory=later.memory, at=T0 + timedelta(seconds=120))
    assert due.desired.pools[0].value == 5
    # once none is stranded the pool's entry goes, and a stranding later starts a new wait
    bound = _relieve(_desired(4), _observed(*(_node(f"n{i}", 3) for i in range(4)),
                                             unscheduled=0), memory=due.memory)
    assert bound.memory.for_target(MEMORY_PREFIX + "a100") == () and bound.notes == ()


def test_a_node_with_room_for_the_replica_strands_nothing() -> None:
    # the scheduler binds the pod on n3 (2 GPUs free) this tick or the next
    observed = _observed(_node("n0", 3), _node("n1", 3), _node("n2", 3), _node("n3", 2))
    assert stranded_replicas(observed, _desired(4)) == ()
    assert _relieve(_desired(4), observed) == Relief(_desired(4), GuardMemory())


def test_gpus_a_node_cannot_give_a_replica_of_several_gpus_do_not_count_as_room() -> None:
    # free GPUs on a node not ready, cordoned, with a GPU in MIG mode or shared by the device
    # plugin (it fails a pod asking for several shared GPUs) are no room for it
    unusable = (_node("n0", 0, ready=False), _node("n1", 0, cordoned=True),
                _node("n2", 0, mig=("3g.40gb",)), _node("n3", 0, sharing="time-slicing"))
    assert [free_whole_gpus(n) for n in unusable] == [0, 0, 0, 0]
    assert free_whole_gpus(_node("n4", 1)) == 3
    observed = _observed(*unusable, _node("n4", 3), _node("n5", 3))
    (found,) = stranded_replicas(observed, _desired(6))
    assert (found.most_free_gpus, found.free_gpus) == (1, 2)


def test_a_replica_waiting_with_fewer_gpus_free_in_all_than_it_takes_waits_for_nodes() -> None:
    # one GPU free in the whole pool: the replica waits for the nodes its scale-up asked for
    observed = _observed(_node("n0", 4), _node("n1", 3), _node("n2", 4))
    assert stranded_replicas(observed, _desired(4)) == ()
    assert _relieve(_desired(4), observed).desired == _desired(4)


def test_a_target_that_already_holds_the_stranded_replicas_is_left_alone() -> None:
    # the plan is growing the pool anyway: 4 ready, target 6 (2 nodes on the way) >= 4 + 1
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)))
    relief = _relieve(_desired(6), observed)
    assert relief.desired == _desired(6)
    (note,) = relief.notes
    assert "(4 free in all, at most 1 on one node); pool a100's target of 6 node(s) has room " \
           "for them;" in note


def test_unscheduled_pods_of_single_gpu_replicas_or_pods_not_read_strand_nothing() -> None:
    full = tuple(_node(f"n{i}", 4) for i in range(4))
    assert stranded_replicas(_observed(*full), _desired(4, gpus=1)) == ()
    assert stranded_replicas(_observed(*full, unscheduled=None), _desired(4)) == ()
    assert stranded_replicas(_observed(*full, unscheduled=0), _desired(4)) == ()


def test_the_raise_stops_at_the_pools_max_nodes() -> None:
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)), unscheduled=5)
    capped = _relieve(_desired(4), observed, (PoolSpec("a100", A100, 4, 0, 5, 5.0),)).desired
    assert (capped.pools[0].value, capped.pools[0].reason) == (5, "stranded:llama-70b 5x2 GPUs")


def test_under_a_cluster_gpu_budget_the_raise_takes_only_the_gpus_left_over() -> None:
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)), unscheduled=5)
    # the budget's target: the pool may not grow past its target for kept replicas
    desired = _desired(4, max_value=4)
    # 16 GPUs in the targets, a budget of 24: room for two more nodes of 4, not three
    raised = _relieve(desired, observed, budget=24).desired
    assert (raised.pools[0].value, raised.pools[0].max_value) == (6, 6)
    # a budget the targets already fill leaves them stranded, the target as it was
    held = _relieve(desired, observed, budget=16)
    assert held.desired == desired
    (note,) = held.notes
    assert "pool a100's target stays at 4 node(s) (placement_14_gpus_warm_0), under the 7 they " \
           "need: its max_nodes or the cluster GPU budget leaves no room for more" in note


def test_the_note_says_what_waits_why_and_what_the_pool_does_for_it() -> None:
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)), unscheduled=5)
    (note,) = _relieve(_desired(4), observed).notes
    assert note == ("model llama-70b: 5 replica(s) of 2 GPUs unscheduled: no ready node of pool "
                    "a100 has 2 whole GPUs free (4 free in all, at most 1 on one node); pool "
                    "a100's target raised to 7 node(s) for them; a scheduler that scores nodes "
                    "MostAllocated on nvidia.com/gpu packs replicas whole")


def test_the_notes_of_stranded_replicas_read_back_by_model_and_no_other_note_does() -> None:
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)), unscheduled=5)
    (note,) = _relieve(_desired(4), observed).notes
    budget = ("model bert: 6 replicas sized for its demand, 4 held: capped by "
              "tenant_gpu_budget:acme (4 GPUs)")
    assert stranded_noted((budget, note, "no load source: demand_rps and capacity_rps are 0")) \
        == {"llama-70b": note}
