"""Nodes a pool needs for its GPUs when some come in groups that must share one node (pure).

A replica of N GPUs (tensor parallel) runs on N whole GPUs of ONE node, so a node of G GPUs
holds floor(G / N) of them and counting GPUs alone undercounts: four replicas of 3 GPUs take 12
GPUs, ceil(12 / 4) = 3 nodes of 4, yet each node holds one replica, so they need 4. The GPUs a
group leaves free on its node still take single GPUs (single-GPU replicas, MIG or shared GPUs of
the node's kind, warm GPUs).

The groups are packed first-fit decreasing: largest first, each on the first node (in the order
they were opened) with room for all of it, else on a new node; then the single GPUs fill the
room left, first node first, then new nodes. First-fit decreasing may use a node more than the
fewest possible on odd mixes, never fewer than ``ceil(total GPUs / G)``; a target a node too
many is safe, one too few leaves a replica Pending.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeFill:
    """What one node holds: the GPUs of each group on it and its single GPUs."""

    groups: tuple[int, ...]
    single_gpus: int

    @property
    def gpus(self) -> int:
        return sum(self.groups) + self.single_gpus


def _pieces(groups: Sequence[int], gpus_per_node: int) -> list[int]:
    """The groups as they can be placed: a group of more GPUs than a node has fits no node (the
    scheduler leaves such a replica unplaced; a placement that has one anyway is not refused),
    so it is cut into whole nodes and the rest, and its GPUs are still counted."""
    pieces = []
    for size in groups:
        if size <= 0:
            continue
        full, rest = divmod(size, gpus_per_node)
        pieces.extend([gpus_per_node] * full)
        if rest:
            pieces.append(rest)
    return pieces


def _pack_groups(groups: Sequence[int], gpus_per_node: int) -> list[list[int]]:
    """The groups of each node, first-fit decreasing. The nodes with each amount of free room
    are kept in a heap by the order they were opened, so the first node with room for a group
    is the first of the heads of the rooms at least its size: O(groups x G log nodes), not
    O(groups x nodes), for pools of thousands of nodes."""
    nodes: list[list[int]] = []
    by_room: list[list[int]] = [[] for _ in range(gpus_per_node + 1)]  # room -> node indices
    for size in sorted(_pieces(groups, gpus_per_node), reverse=True):
        heads = [(by_room[room][0], room) for room in range(size, gpus_per_node + 1)
                 if by_room[room]]
        if heads:
            node, room = min(heads)
            heapq.heappop(by_room[room])
        else:
            node, room = len(nodes), gpus_per_node
            nodes.append([])
        nodes[node].append(size)
        heapq.heappush(by_room[room - size], node)
    return nodes


def fill_nodes(groups: Sequence[int], single_gpus: int, gpus_per_node: int
               ) -> tuple[NodeFill, ...]:
    """The nodes that hold ``groups`` (the GPUs of each replica of several GPUs, each group on
    one node) and ``single_gpus`` more GPUs, each node of ``gpus_per_node`` GPUs, and what each
    holds."""
    per_node = max(1, gpus_per_node)
    left = max(0, single_gpus)
    filled = []
    for node in _pack_groups(groups, per_node):
        taken = min(left, per_node - sum(node))
        left -= taken
        filled.append(NodeFill(tuple(node), taken))
    while left > 0:
        taken = min(left, per_node)
        left -= taken
        filled.append(NodeFill((), taken))
    return tuple(filled)


def nodes_to_hold(groups: Sequence[int], single_gpus: int, gpus_per_node: int) -> int:
    """How many nodes ``fill_nodes`` fills, counted without listing the nodes of single GPUs
    (a pool of thousands of GPUs in no group costs one division)."""
    per_node = max(1, gpus_per_node)
    packed = _pack_groups(groups, per_node)
    free = len(packed) * per_node - sum(sum(node) for node in packed)
    return len(packed) + math.ceil(max(0, single_gpus - free) / per_node)
