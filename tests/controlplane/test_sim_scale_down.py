"""SimCluster scales down as a real fleet does: a shrinking pool's ready node leaves make-before-
break (as Karpenter consolidates), and a shrinking model stops its starting replicas before its
ready ones, and of those the ones on the emptiest nodes first (as a ReplicaSet picks its pods
by the pod-deletion-cost the Kubernetes backend annotates them with)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from controlplane.domain.desired import PoolSpec
from controlplane.settings import SimSettings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.cluster import SimCluster

T0 = datetime(2026, 1, 5, tzinfo=UTC)
POOLS = (PoolSpec("l4", "L4", 4, 0, 8, 0.8),)
BERT = next(s for s in DEMO_MODELS if s.name == "bert-embed")  # one whole L4 per replica
OTHER = replace(BERT, name="other")
SIM = SimSettings(node_provision_s=(60, 60), image_pull_s=(30, 30), weight_load_s=(10, 10),
                  warmup_s=(10, 10), warm_node_start_s=8)


def _serving(replicas: int, nodes: int = 2) -> tuple[SimCluster, datetime]:
    """``nodes`` ready L4 nodes and ``replicas`` of bert-embed serving on them (the first node
    filled first), at the returned time."""
    cluster = SimCluster(POOLS, (BERT,), lambda _m, _at: 100.0, SIM, T0)
    cluster.set_size("l4", nodes)
    cluster.step(T0 + timedelta(seconds=60))
    cluster.set_replicas("bert-embed", replicas)
    now = T0 + timedelta(seconds=110)
    cluster.step(now)
    assert cluster.snapshot().model("bert-embed").replicas_ready == replicas  # type: ignore[union-attr]
    return cluster, now


def _ready(cluster: SimCluster) -> int:
    return cluster.snapshot().model("bert-embed").replicas_ready  # type: ignore[union-attr]


def test_a_leaving_nodes_replica_serves_until_its_successor_elsewhere_is_ready() -> None:
    cluster = SimCluster(POOLS, (BERT, OTHER), lambda _m, _at: 100.0, SIM, T0)
    cluster.set_size("l4", 2)
    cluster.step(T0 + timedelta(seconds=60))
    cluster.set_replicas("other", 1)  # a GPU of the first node
    cluster.set_replicas("bert-embed", 4)  # 3 beside it, 1 on the second node
    now = T0 + timedelta(seconds=110)
    cluster.step(now)
    assert _ready(cluster) == 4
    cluster.set_replicas("other", 0)  # room for a successor on the first node
    assert cluster.set_size("l4", 1).ok  # the second node, with the fewest replicas, leaves

    observed = cluster.snapshot()
    # still a node of the pool, as the Kubernetes reader counts it, until deleted: cordoned,
    # and billed
    assert observed.pool("l4").nodes_ready == 2  # type: ignore[union-attr]
    assert [n.cordoned for n in observed.nodes] == [False, True]
    assert _ready(cluster) == 4  # nothing stopped serving
    cluster.step(now + timedelta(seconds=7))  # the successor starts warm in 8 s
    assert len(cluster.snapshot().nodes) == 2 and _ready(cluster) == 4
    cluster.step(now + timedelta(seconds=8))
    assert [n.cordoned for n in cluster.snapshot().nodes] == [False]
    assert cluster.snapshot().pool("l4").nodes_ready == 1  # type: ignore[union-attr]
    assert _ready(cluster) == 4
    # both nodes were billed until the second was deleted, 118 s in
    assert cluster.gpu_hours * 3600 == pytest.approx(8 * 118)


def test_a_leaving_node_whose_replica_has_no_room_elsewhere_stays_and_keeps_serving() -> None:
    cluster, now = _serving(5)  # the first node is full
    cluster.set_size("l4", 1)
    cluster.step(now + timedelta(hours=1))
    observed = cluster.snapshot()
    assert _ready(cluster) == 5
    assert [n.cordoned for n in observed.nodes] == [False, True]
    # the pool reports what it bills, the leaving node too (status and the cost pages read it):
    # two nodes of 4 GPUs
    assert observed.pool("l4").gpus_billed == 8  # type: ignore[union-attr]
    assert cluster.gpu_hours * 3600 == pytest.approx(8 * 110 + 8 * 3600)  # still billed

    cluster.set_replicas("bert-embed", 4)  # the replica on the leaving node stops first
    cluster.step(now + timedelta(hours=1, seconds=10))
    assert len(cluster.snapshot().nodes) == 1 and _ready(cluster) == 4


def test_a_provisioning_node_is_removed_at_once() -> None:
    cluster = SimCluster(POOLS, (BERT,), lambda _m, _at: 100.0, SIM, T0)
    cluster.set_size("l4", 2)
    cluster.step(T0 + timedelta(seconds=30))
    cluster.set_size("l4", 1)
    assert len(cluster.snapshot().nodes) == 1
    assert cluster.snapshot().pool("l4").nodes_pending == 1  # type: ignore[union-attr]


def test_a_shrinking_model_stops_a_starting_replica_before_a_ready_one() -> None:
    cluster, now = _serving(1, nodes=1)
    cluster.set_replicas("bert-embed", 2)  # the second starts warm: ready 8 s later
    cluster.step(now + timedelta(seconds=4))
    cluster.set_replicas("bert-embed", 1)
    model = cluster.snapshot().model("bert-embed")
    assert model is not None and (model.replicas_ready, model.replicas_pending) == (1, 0)



def test_a_shrinking_model_stops_the_older_replica_alone_on_its_node_so_the_node_leaves_empty(
        ) -> None:
    cluster = SimCluster(POOLS, (BERT, OTHER), lambda _m, _at: 100.0, SIM, T0)
    cluster.set_size("l4", 2)
    cluster.step(T0 + timedelta(seconds=60))
    cluster.set_replicas("bert-embed", 1)  # the oldest replica
    cluster.step(T0 + timedelta(seconds=110))
    alone = _nodes_of(cluster, "bert-embed")
    cluster.set_replicas("other", 3)  # fills the rest of its node
    cluster.set_replicas("bert-embed", 5)  # 4 newer ones on the other node
    now = T0 + timedelta(seconds=200)
    cluster.step(now)
    cluster.set_replicas("other", 0)
    assert _ready(cluster) == 5 and len(alone) == 1
    assert _nodes_of(cluster, "bert-embed").count(alone[0]) == 1
    cluster.set_replicas("bert-embed", 4)  # not the newest: the one alone on its node
    assert alone[0] not in _nodes_of(cluster, "bert-embed")
    assert cluster.set_size("l4", 1).ok
    assert [n.cordoned for n in cluster.snapshot().nodes] == [False]  # it left empty at once
    cluster.step(now + timedelta(seconds=10))
    assert _ready(cluster) == 4


def _nodes_of(cluster: SimCluster, model: str) -> list[str]:
    return sorted(str(r.node) for r in cluster._replicas[model])
