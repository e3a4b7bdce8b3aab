"""SimCluster and replicas of several GPUs (tensor parallel): a replica of N GPUs runs on N GPUs
of ONE node that no other replica touches, frees them when it stops, and the node reports them
as whole GPUs in use; with MIG binding (the demo) never on a MIG or device-plugin-shared node."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controlplane.adapters.placement import inventory_request
from controlplane.domain.desired import PoolSpec
from controlplane.domain.mig_layout import uniform
from controlplane.domain.models import ModelSpec, ProfilePoint, SharingMode
from controlplane.domain.observed import ObservedModel, ObservedNode
from controlplane.domain.sharing_config import SharingLayout
from controlplane.settings import SimSettings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.cluster import SimCluster

T0 = datetime(2026, 1, 5, tzinfo=UTC)
A100 = "A100-80GB"
NODES_OF_4 = (PoolSpec("a100", A100, 4, 0, 8, 5.0),)
SIM = SimSettings(node_provision_s=(60, 60), image_pull_s=(30, 30), weight_load_s=(10, 10),
                  warmup_s=(10, 10), warm_node_start_s=8, mig_relayout_s=(90, 90))
_LLAMA = next(s for s in DEMO_MODELS if s.name == "llama-3-70b")
#: a bf16 70B replica on 3 whole A100s
TRIPLE = replace(_LLAMA, name="llama-tp3", profile=(
    ProfilePoint(A100, 0, 8, 1, 36.0, 600.0, 60_000, gpus=3),))
#: two MPS processes on a whole A100: half a GPU a replica
HALF = replace(_LLAMA, name="chat-mps", profile=(
    ProfilePoint(A100, 0, 8, 2, 60.0, 300.0, 30_000),))


def _cluster(*specs: ModelSpec, nodes: int = 1, mig_binding: bool = False) -> SimCluster:
    cluster = SimCluster(NODES_OF_4, specs, lambda _m, _at: 10.0, SIM, T0, mig_binding)
    cluster.set_size("a100", nodes)
    cluster.step(T0 + timedelta(seconds=60))
    return cluster


def _nodes(cluster: SimCluster) -> dict[str, ObservedNode]:
    return {n.name: n for n in cluster.snapshot().nodes}


def _model(cluster: SimCluster, name: str = TRIPLE.name) -> ObservedModel:
    model = cluster.snapshot().model(name)
    assert model is not None
    return model


def test_replicas_of_three_gpus_take_a_node_of_four_each_never_the_gpus_left_on_two_nodes(
        ) -> None:
    cluster = _cluster(TRIPLE, nodes=2)
    cluster.set_replicas(TRIPLE.name, 3)
    cluster.step(T0 + timedelta(seconds=120))
    # 2 GPUs are free, one on each node: the third replica waits rather than span them
    assert [(n.gpu_pods, n.whole_gpus_in_use) for n in _nodes(cluster).values()] == [
        (1, 3), (1, 3)]
    model = _model(cluster)
    assert (model.replicas_ready, model.replicas_pending) == (2, 1)
    assert model.capacity_rps == 2 * 36.0


def test_a_node_reports_the_gpus_of_a_replica_of_three_to_placement_as_whole_gpus_in_use(
        ) -> None:
    cluster = _cluster(TRIPLE)
    cluster.set_replicas(TRIPLE.name, 1)
    (node,) = inventory_request(cluster.snapshot()).nodes
    assert [g.whole_in_use for g in node.gpus] == [True, True, True, False]


def test_a_stopped_replica_of_three_gpus_frees_them_for_the_next() -> None:
    cluster = _cluster(TRIPLE, HALF)
    cluster.set_replicas(TRIPLE.name, 1)
    cluster.set_replicas(HALF.name, 4)  # 2 GPUs of halves: only 1 GPU was left for them
    assert _model(cluster, HALF.name).replicas_target == 4
    assert _nodes(cluster)["a100-0001"].whole_gpus_in_use == 4
    assert _nodes(cluster)["a100-0001"].gpu_pods == 3  # the replica and 2 halves
    cluster.set_replicas(TRIPLE.name, 0)
    cluster.step(T0 + timedelta(seconds=61))
    assert _nodes(cluster)["a100-0001"].gpu_pods == 4  # the pending halves took its GPUs
    assert _nodes(cluster)["a100-0001"].whole_gpus_in_use == 2


def test_a_replica_of_three_gpus_needs_gpus_no_shared_replica_touches() -> None:
    # 3 halves hold 2 GPUs (1.5 of them): 2 left, not 3
    cluster = _cluster(TRIPLE, HALF)
    cluster.set_replicas(HALF.name, 3)
    cluster.set_replicas(TRIPLE.name, 1)
    assert _model(cluster).replicas_pending == 1
    assert _nodes(cluster)["a100-0001"].gpu_pods == 3
    # 2 halves hold 1 GPU: 3 left, and the replica binds
    cluster.set_replicas(HALF.name, 2)
    cluster.step(T0 + timedelta(seconds=61))
    assert _nodes(cluster)["a100-0001"].gpu_pods == 3
    assert _nodes(cluster)["a100-0001"].whole_gpus_in_use == 4


def test_with_mig_binding_a_replica_of_three_gpus_binds_on_no_mig_node() -> None:
    cluster = _cluster(TRIPLE, mig_binding=True)
    cluster.lay_out_now("a100-0001", uniform(A100, ("1g.10gb",)))
    cluster.set_replicas(TRIPLE.name, 1)
    assert _nodes(cluster)["a100-0001"].gpu_pods == 0
    assert _model(cluster).replicas_pending == 1


def test_with_mig_binding_a_replica_of_three_gpus_binds_on_no_node_whose_gpus_are_shared(
        ) -> None:
    # the device plugin fails a pod asking for more than one shared GPU
    cluster = _cluster(TRIPLE, mig_binding=True)
    assert cluster.apply_sharing("a100-0001", SharingLayout(SharingMode.MPS, 2)).ok
    cluster.set_replicas(TRIPLE.name, 1)
    assert _nodes(cluster)["a100-0001"].gpu_pods == 0
    assert cluster.apply_sharing("a100-0001", SharingLayout(SharingMode.EXCLUSIVE)).ok
    cluster.step(T0 + timedelta(seconds=61))
    assert _nodes(cluster)["a100-0001"].gpu_pods == 1
    assert _nodes(cluster)["a100-0001"].whole_gpus_in_use == 3
