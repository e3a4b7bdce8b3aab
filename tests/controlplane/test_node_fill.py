"""Nodes for GPUs of which some come in groups on one node (replicas of several GPUs): every
group on one node, never fewer nodes than the GPUs fill, single GPUs in the room left."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.domain.node_fill import NodeFill, fill_nodes, nodes_to_hold


def test_four_replicas_of_three_gpus_on_nodes_of_four_need_four_nodes_not_three() -> None:
    assert nodes_to_hold([3, 3, 3, 3], 0, 4) == 4 > math.ceil(12 / 4)


def test_three_replicas_of_five_gpus_on_nodes_of_eight_need_three_nodes() -> None:
    assert fill_nodes([5, 5, 5], 0, 8) == (NodeFill((5,), 0),) * 3


def test_single_gpus_fill_the_room_replicas_of_several_gpus_leave_before_a_new_node() -> None:
    # 3 replicas of 3 on nodes of 4 leave a GPU free on each: 3 singles take those, a fourth a
    # node of its own
    assert nodes_to_hold([3, 3, 3], 3, 4) == 3
    assert fill_nodes([3, 3, 3], 4, 4) == (NodeFill((3,), 1),) * 3 + (NodeFill((), 1),)


def test_two_replicas_of_two_share_a_node_of_four_and_the_largest_groups_go_first() -> None:
    assert fill_nodes([2, 3, 2, 1], 0, 4) == (NodeFill((3, 1), 0), NodeFill((2, 2), 0))


def test_without_groups_the_nodes_are_the_gpus_rounded_up_to_whole_nodes() -> None:
    assert nodes_to_hold([], 9, 4) == 3
    assert nodes_to_hold([], 0, 4) == 0
    assert fill_nodes([], 9, 4) == (NodeFill((), 4), NodeFill((), 4), NodeFill((), 1))


def test_a_replica_of_more_gpus_than_a_node_has_is_counted_by_the_nodes_its_gpus_fill() -> None:
    # PlanFleet leaves such a replica unplaced; a placement that has one anyway still counts
    # every GPU of it rather than failing
    assert nodes_to_hold([6], 0, 4) == 2
    assert fill_nodes([6], 1, 4) == (NodeFill((4,), 0), NodeFill((2,), 1))


groups_and_nodes = st.integers(1, 16).flatmap(lambda per_node: st.tuples(
    st.lists(st.integers(1, per_node), max_size=30), st.integers(0, 60), st.just(per_node)))


@settings(max_examples=300, deadline=None)
@given(groups_and_nodes)
def test_every_group_is_on_one_node_and_no_node_holds_more_than_its_gpus(
        case: tuple[list[int], int, int]) -> None:
    groups, singles, per_node = case
    filled = fill_nodes(groups, singles, per_node)
    assert sorted(g for node in filled for g in node.groups) == sorted(groups)
    assert sum(node.single_gpus for node in filled) == singles
    assert all(node.gpus <= per_node for node in filled)
    assert all(node.gpus > 0 for node in filled)  # no empty node is asked for


@settings(max_examples=300, deadline=None)
@given(groups_and_nodes)
def test_never_fewer_nodes_than_the_gpus_fill_nor_than_groups_too_big_to_share_a_node(
        case: tuple[list[int], int, int]) -> None:
    groups, singles, per_node = case
    nodes = nodes_to_hold(groups, singles, per_node)
    assert nodes == len(fill_nodes(groups, singles, per_node))
    assert nodes >= math.ceil((sum(groups) + singles) / per_node)
    # no two groups of more than half a node fit one node
    assert nodes >= sum(1 for g in groups if 2 * g > per_node)


@settings(max_examples=200, deadline=None)
@given(groups_and_nodes)
def test_first_fit_decreasing_opens_a_node_only_when_no_open_node_has_room(
        case: tuple[list[int], int, int]) -> None:
    groups, singles, per_node = case
    filled = fill_nodes(groups, singles, per_node)
    # every node but the last could not have taken the smallest group of any later node
    for i, node in enumerate(filled):
        for later in filled[i + 1:]:
            if later.groups:
                assert per_node - sum(node.groups) < min(later.groups)
