"""The pod-deletion-cost ranking that makes a scale-down empty the emptiest nodes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controlplane.domain.deletion_cost import (
    LEAVING_NODE_COST,
    ReplicaPod,
    changed_costs,
    deletion_costs,
)


def test_a_replica_alone_on_its_node_goes_before_one_beside_other_pods() -> None:
    replicas = [ReplicaPod("m-a", "alone", None), ReplicaPod("m-b", "crowded", None)]
    costs = deletion_costs(replicas, {"alone": 1, "crowded": 3}, leaving=())
    assert costs == {"m-a": 2, "m-b": 2002}  # 1 + others x 1000 + replicas of the model


def test_of_nodes_only_the_model_keeps_busy_the_one_with_fewer_of_its_replicas_goes_first(
        ) -> None:
    replicas = [ReplicaPod("m-0", "two", None), ReplicaPod("m-1", "two", None),
                ReplicaPod("m-2", "one", None)]
    costs = deletion_costs(replicas, {"two": 2, "one": 1}, leaving=())
    assert costs["m-2"] < costs["m-0"] == costs["m-1"]


def test_a_replica_on_a_cordoned_or_no_node_goes_first_whatever_else_runs_there() -> None:
    replicas = [ReplicaPod("m-0", "cordoned", None), ReplicaPod("m-1", "alone", None),
                ReplicaPod("m-2", "", None)]
    costs = deletion_costs(replicas, {"cordoned": 9, "alone": 1}, leaving={"cordoned"})
    assert costs == {"m-0": LEAVING_NODE_COST, "m-1": 2, "m-2": LEAVING_NODE_COST}


def test_only_costs_that_differ_from_the_annotations_are_written() -> None:
    replicas = [ReplicaPod("m-a", "alone", "2"), ReplicaPod("m-b", "crowded", "7")]
    assert changed_costs(replicas, {"alone": 1, "crowded": 3}, leaving=()) == {"m-b": 2002}


nodes = st.sampled_from(["n0", "n1", "n2", "n3"])


@given(placed=st.lists(nodes, min_size=1, max_size=12),
       others=st.fixed_dictionaries({n: st.integers(0, 5000) for n in ("n0", "n1", "n2", "n3")}))
def test_costs_rank_nodes_by_other_pods_then_replicas_and_fit_an_int32(
        placed: list[str], others: dict[str, int]) -> None:
    replicas = [ReplicaPod(f"m-{i}", node, None) for i, node in enumerate(placed)]
    mine = {node: placed.count(node) for node in placed}
    movable = {node: others[node] + mine[node] for node in mine}
    costs = deletion_costs(replicas, movable, leaving=())
    assert all(0 < cost < 2**31 for cost in costs.values())
    for a in replicas:
        for b in replicas:
            key_a = (min(others[a.node], 999), mine[a.node])
            key_b = (min(others[b.node], 999), mine[b.node])
            if key_a < key_b:
                assert costs[a.name] < costs[b.name]
