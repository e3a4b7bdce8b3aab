"""The simulated cluster's binding: ``sim.binding`` pack (the default) binds a replica to the first
ready node with room, as kube-scheduler scoring MostAllocated packs pods; spread binds it to the
node with the most capacity free, as its default LeastAllocated does. Spread single-GPU replicas
can leave every node a GPU short of a replica of two: the snapshot reports its pod unscheduled,
and the loop's check finds it stranded."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controlplane.domain.desired import DesiredState, DesiredTarget, PoolSpec, ReplicaFootprint
from controlplane.domain.models import ProfilePoint
from controlplane.domain.stranded import stranded_replicas
from controlplane.settings import SimSettings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.cluster import SimCluster

T0 = datetime(2026, 1, 5, tzinfo=UTC)
A100 = "A100-80GB"
NODES_OF_4 = (PoolSpec("a100", A100, 4, 0, 8, 5.0),)
_LLAMA = next(s for s in DEMO_MODELS if s.name == "llama-3-70b")
ONE = replace(_LLAMA, name="chat", profile=(ProfilePoint(A100, 0, 8, 1, 10.0, 300.0, 30_000),))
TWO = replace(_LLAMA, name="llama-tp2", profile=(
    ProfilePoint(A100, 0, 8, 1, 20.0, 600.0, 60_000, gpus=2),))


def _cluster(binding: str) -> SimCluster:
    sim = SimSettings(node_provision_s=(60, 60), image_pull_s=(30, 30), weight_load_s=(10, 10),
                      warmup_s=(10, 10), binding=binding)
    cluster = SimCluster(NODES_OF_4, (ONE, TWO), lambda _m, _at: 10.0, sim, T0)
    cluster.set_size("a100", 2)
    cluster.step(T0 + timedelta(seconds=60))
    cluster.set_replicas(ONE.name, 6)
    cluster.step(T0 + timedelta(seconds=120))
    return cluster


def _in_use(cluster: SimCluster) -> list[int]:
    return [n.whole_gpus_in_use for n in cluster.snapshot().nodes]


def test_pack_fills_the_first_node_and_spread_evens_the_nodes_out() -> None:
    assert _in_use(_cluster("pack")) == [4, 2]
    assert _in_use(_cluster("spread")) == [3, 3]


def test_a_replica_of_two_gpus_after_spread_single_gpu_replicas_is_stranded() -> None:
    desired = DesiredState((DesiredTarget("a100", 2, "placement_8_gpus_warm_0"),), (),
                           footprints=(ReplicaFootprint(TWO.name, "a100", 1, 2, A100, 2.0),))
    packed = _cluster("pack")
    packed.set_replicas(TWO.name, 1)
    packed.step(T0 + timedelta(seconds=180))
    model = packed.snapshot().model(TWO.name)
    assert model is not None and model.replicas_unscheduled == 0  # on the second node's 2
    assert stranded_replicas(packed.snapshot(), desired) == ()

    spread = _cluster("spread")
    spread.set_replicas(TWO.name, 1)
    spread.step(T0 + timedelta(seconds=180))
    snapshot = spread.snapshot()
    model = snapshot.model(TWO.name)
    assert model is not None and (model.replicas_pending, model.replicas_unscheduled) == (1, 1)
    (found,) = stranded_replicas(snapshot, desired)
    assert (found.model, found.replicas, found.most_free_gpus, found.free_gpus) == (
        TWO.name, 1, 1, 2)
