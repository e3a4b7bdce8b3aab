"""Stranded replicas: pods of a replica of several GPUs that no node of the pool has room for
although the pool has the GPUs free, spread over its nodes, raise the pool's target by the nodes
they fill, so a node limit (Karpenter's) does not hold them Pending for good."""

from __future__ import annotations

from datetime import UTC, datetime

from controlplane.domain.desired import DesiredState, DesiredTarget, PoolSpec, ReplicaFootprint
from controlplane.domain.observed import (
    ObservedGpu,
    ObservedModel,
    ObservedNode,
    ObservedPool,
    ObservedState,
)
from controlplane.domain.stranded import (
    free_whole_gpus,
    relieve_stranded,
    stranded_notes,
    stranded_replicas,
)

T0 = datetime(2026, 1, 5, tzinfo=UTC)
A100 = "A100-80GB"
POOL = PoolSpec("a100", A100, 4, 0, 10, 5.0)


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


def test_a_replica_of_two_gpus_with_one_free_gpu_on_each_node_is_stranded() -> None:
    # 4 nodes of 4 GPUs, 3 in use on each: 4 GPUs free, but no node has 2 of them
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)))
    (found,) = stranded_replicas(observed, _desired(4))
    assert (found.model, found.pool, found.gpus, found.replicas) == ("llama-70b", "a100", 2, 1)
    assert (found.most_free_gpus, found.free_gpus) == (1, 4)


def test_the_pool_of_stranded_replicas_grows_by_the_nodes_they_fill() -> None:
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)), unscheduled=3)
    relieved = relieve_stranded(_desired(4), observed, (POOL,))
    # three replicas of 2 GPUs: a node of 4 holds two of them, so two nodes more
    assert relieved.pools[0].value == 6
    assert relieved.pools[0].reason == "stranded:llama-70b 3x2 GPUs"
    assert relieved.pools[0].max_value == 10
    # replicas, footprints and the rest of the target are left as they were
    assert relieved.replicas == _desired(4).replicas
    assert (relieved.pools[0].gpus, relieved.pools[0].groups) == (14, (2,) * 6)


def test_a_node_with_room_for_the_replica_strands_nothing() -> None:
    # the scheduler binds the pod on n3 (2 GPUs free) this tick or the next
    observed = _observed(_node("n0", 3), _node("n1", 3), _node("n2", 3), _node("n3", 2))
    assert stranded_replicas(observed, _desired(4)) == ()
    assert relieve_stranded(_desired(4), observed, (POOL,)) == _desired(4)


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
    assert relieve_stranded(_desired(4), observed, (POOL,)) == _desired(4)


def test_a_target_that_already_holds_the_stranded_replicas_is_left_alone() -> None:
    # the plan is growing the pool anyway: 4 ready, target 6 (2 nodes on the way) >= 4 + 1
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)))
    assert relieve_stranded(_desired(6), observed, (POOL,)) == _desired(6)


def test_unscheduled_pods_of_single_gpu_replicas_or_pods_not_read_strand_nothing() -> None:
    full = tuple(_node(f"n{i}", 4) for i in range(4))
    assert stranded_replicas(_observed(*full), _desired(4, gpus=1)) == ()
    assert stranded_replicas(_observed(*full, unscheduled=None), _desired(4)) == ()
    assert stranded_replicas(_observed(*full, unscheduled=0), _desired(4)) == ()


def test_the_raise_stops_at_the_pools_max_nodes() -> None:
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)), unscheduled=5)
    capped = relieve_stranded(_desired(4), observed, (PoolSpec("a100", A100, 4, 0, 5, 5.0),))
    assert (capped.pools[0].value, capped.pools[0].reason) == (5, "stranded:llama-70b 5x2 GPUs")


def test_under_a_cluster_gpu_budget_the_raise_takes_only_the_gpus_left_over() -> None:
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)), unscheduled=5)
    # the budget's target: the pool may not grow past its target for kept replicas
    desired = _desired(4, max_value=4)
    # 16 GPUs in the targets, a budget of 24: room for two more nodes of 4, not three
    raised = relieve_stranded(desired, observed, (POOL,), cluster_gpu_budget=24)
    assert (raised.pools[0].value, raised.pools[0].max_value) == (6, 6)
    # a budget the targets already fill leaves them stranded, the target as it was
    assert relieve_stranded(desired, observed, (POOL,), cluster_gpu_budget=16) == desired


def test_the_note_says_what_waits_why_and_what_the_pool_does_for_it() -> None:
    observed = _observed(*(_node(f"n{i}", 3) for i in range(4)), unscheduled=5)
    raised = relieve_stranded(_desired(4), observed, (POOL,))
    (note,) = stranded_notes(observed, raised, (POOL,))
    assert note == ("model llama-70b: 5 replica(s) of 2 GPUs unscheduled: no ready node of pool "
                    "a100 has 2 whole GPUs free (4 free in all, at most 1 on one node); pool "
                    "a100's target raised to 7 node(s) for them; a scheduler that scores nodes "
                    "MostAllocated on nvidia.com/gpu packs replicas whole")
    held = relieve_stranded(_desired(4, max_value=4), observed, (POOL,), cluster_gpu_budget=16)
    (note,) = stranded_notes(observed, held, (POOL,))
    assert "pool a100's target stays at 4 node(s) (placement_14_gpus_warm_0), under the 7 they " \
           "need: its max_nodes or the cluster GPU budget leaves no room for more" in note
    # two nodes on the way already hold them: 4 ready + 1 node for one replica of 2 <= 6
    one = _observed(*(_node(f"n{i}", 3) for i in range(4)))
    (note,) = stranded_notes(one, relieve_stranded(_desired(6), one, (POOL,)), (POOL,))
    assert "(4 free in all, at most 1 on one node); pool a100's target of 6 node(s) has room " \
           "for them;" in note
    assert stranded_notes(_observed(_node("n0", 2)), _desired(1), (POOL,)) == ()
