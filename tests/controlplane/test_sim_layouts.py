"""SimCluster node layouts: MIG re-layouts drain after a surge node, sharing applies at once, and
with MIG binding a replica needs an instance of its size."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controlplane.domain.desired import PoolSpec
from controlplane.domain.mig_layout import NodeMigLayout, builtin_layout, config_name, uniform
from controlplane.domain.mig_relayout import RelayoutPhase
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import SharingLayout
from controlplane.ports import RelayoutStore
from controlplane.settings import SimSettings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.cluster import SimCluster
from controlplane.sim.nodes import instance_free_for
from controlplane.store.relayout import MemoryRelayoutStore

T0 = datetime(2026, 1, 5, tzinfo=UTC)
A100 = "A100-80GB"
POOLS = (PoolSpec("a100", A100, 2, 0, 8, 5.0),)
RESNET = next(s for s in DEMO_MODELS if s.name == "resnet50-vision")  # a 1g slice
SIM = SimSettings(node_provision_s=(60, 60), image_pull_s=(30, 30), weight_load_s=(10, 10),
                  warmup_s=(10, 10), warm_node_start_s=8, mig_relayout_s=(90, 90))
ONE_G = uniform(A100, ("1g.10gb",))  # one 1g instance per GPU: 2 on a node


def _cluster(mig_binding: bool = True, relayouts: RelayoutStore | None = None) -> SimCluster:
    cluster = SimCluster(POOLS, (RESNET,), lambda _m, _at: 10.0, SIM, T0, mig_binding,
                         relayouts)
    cluster.set_size("a100", 1)
    cluster.step(T0 + timedelta(seconds=60))
    return cluster


def _node(cluster: SimCluster, name: str = "a100-0001"):  # type: ignore[no-untyped-def]
    return next(n for n in cluster.snapshot().nodes if n.name == name)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_mig_replica_waits_for_a_node_with_an_instance_of_its_size() -> None:
    cluster = _cluster()
    cluster.set_replicas(RESNET.name, 1)
    assert _node(cluster).gpu_pods == 0  # MIG is off: nothing for a 1g replica
    assert cluster.start_relayout("a100-0001", ONE_G, "test").ok
    assert _node(cluster).cordoned and cluster.in_flight() == {"a100-0001": ONE_G}
    cluster.step(_at(149))
    assert _node(cluster).cordoned
    cluster.step(_at(150))  # 90 s after the empty node was cordoned
    node = _node(cluster)
    assert not node.cordoned and node.gpu_pods == 1 and cluster.in_flight() == {}
    assert [g.mig_layout for g in node.gpus] == [("1g.10gb",), ("1g.10gb",)]
    assert [g.sharing for g in node.gpus] == ["mig", "mig"]


def test_a_node_holds_no_more_mig_replicas_than_it_has_instances() -> None:
    cluster = _cluster()
    cluster.lay_out_now("a100-0001", ONE_G)
    cluster.set_replicas(RESNET.name, 3)
    model = cluster.snapshot().model(RESNET.name)
    assert _node(cluster).gpu_pods == 2 and model is not None and model.replicas_pending == 3


def test_without_mig_binding_replicas_bind_by_gpu_share_whatever_the_layout() -> None:
    cluster = _cluster(mig_binding=False)
    cluster.set_replicas(RESNET.name, 3)
    assert _node(cluster).gpu_pods == 3


def _busy_node_to_relayout() -> tuple[SimCluster, MemoryRelayoutStore, NodeMigLayout]:
    """A cluster whose a100-0001 (one 1g.10gb instance) serves 2 resnet replicas at 200 s, its
    re-layout store, and the all-1g.10gb layout to re-lay it out to."""
    relayouts = MemoryRelayoutStore()
    cluster = _cluster(relayouts=relayouts)
    cluster.lay_out_now("a100-0001", ONE_G)
    cluster.set_replicas(RESNET.name, 2)
    cluster.step(_at(200))
    seven = builtin_layout(A100, "all-1g.10gb")
    assert seven is not None
    return cluster, relayouts, seven


def test_a_busy_node_serves_until_its_replicas_are_ready_on_the_surge_node_then_lays_out(
) -> None:
    cluster, relayouts, seven = _busy_node_to_relayout()
    assert cluster.start_relayout("a100-0001", seven, "test").ok
    pool = cluster.snapshot().pool("a100")
    assert pool is not None and pool.target_nodes == 2 and pool.nodes_pending == 1
    assert not _node(cluster).cordoned
    assert cluster.set_size("a100", 1).message == (  # the surge floor holds the pool
        "pool a100 target 2 nodes (held at the relayout surge floor 2)")
    assert cluster.snapshot().pool("a100").target_nodes == 2  # type: ignore[union-attr]
    cluster.step(_at(260))  # the surge node (laid out as the target) is ready: cordon, move
    assert _node(cluster).cordoned and _node(cluster).gpu_pods == 2
    assert _node(cluster, "a100-0002").gpu_pods == 2  # the successors start there
    for seconds in range(260, 320, 10):  # their cold start: 50 s
        cluster.step(_at(seconds))
        model = cluster.snapshot().model(RESNET.name)
        assert model is not None and model.replicas_ready == 2, seconds  # no capacity gap
    assert _node(cluster).gpu_pods == 0 and _node(cluster, "a100-0002").gpu_pods == 2
    assert _node(cluster).cordoned  # laid out 90 s after the drain ended (at 310)
    cluster.step(_at(400))
    assert not _node(cluster).cordoned
    assert _node(cluster).gpus[0].mig_layout == ("1g.10gb",) * 7
    assert cluster.set_size("a100", 1).ok  # the floor is gone with the re-layout
    assert cluster.snapshot().pool("a100").target_nodes == 1  # type: ignore[union-attr]
    stored = relayouts.relayouts_of("a100-0001")
    assert [(r.phase, r.surge_nodes) for r in stored] == [(RelayoutPhase.DONE, 2)]


def test_a_re_layout_is_saved_to_the_relayout_store_at_each_step_as_on_kubernetes() -> None:
    cluster, relayouts, seven = _busy_node_to_relayout()
    assert cluster.start_relayout("a100-0001", seven, "plan_needs_mig_instances").ok
    phases = []
    for seconds in (200, 260, 310, 400):
        cluster.step(_at(seconds))
        active = relayouts.active_relayouts()
        phases.append(active[0].phase.value if active else "")
        assert cluster.advance() == active and cluster.surge_floors() == (
            {"a100": 2} if active else {})
    assert phases == ["surge", "drain", "await_mig", ""]
    (done,) = relayouts.relayouts_of("a100-0001")
    assert (done.phase, done.pool, done.reason, done.to_config) == (
        RelayoutPhase.DONE, "a100", "plan_needs_mig_instances", config_name(seven))


def test_re_laying_out_to_the_same_target_is_a_no_op_and_to_another_waits() -> None:
    cluster = _cluster()
    assert cluster.start_relayout("a100-0001", ONE_G, "test").ok
    assert cluster.start_relayout("a100-0001", ONE_G, "again").ok
    other = cluster.start_relayout("a100-0001", uniform(A100, ("7g.80gb",)), "other")
    assert not other.ok and other.retryable
    cluster.step(_at(150))
    done = cluster.start_relayout("a100-0001", ONE_G, "done")
    assert done.ok and cluster.in_flight() == {}


def test_a_layout_the_product_cannot_hold_or_an_unknown_node_is_refused() -> None:
    cluster = _cluster()
    bad = cluster.start_relayout("a100-0001", uniform(A100, ("7g.80gb", "1g.10gb")), "test")
    assert not bad.ok and "geometry" in bad.message
    assert not cluster.start_relayout("nope", ONE_G, "test").ok
    assert cluster.in_flight() == {}


def test_sharing_applies_at_once_but_mps_is_refused_on_a_mig_node() -> None:
    cluster = _cluster()
    mps = SharingLayout(SharingMode.MPS, 4)
    assert cluster.apply_sharing("a100-0001", mps).ok
    gpu = _node(cluster).gpus[0]
    assert (gpu.sharing, gpu.sharing_replicas) == ("mps", 4)
    cluster.lay_out_now("a100-0001", ONE_G)
    refused = cluster.apply_sharing("a100-0001", mps)
    assert not refused.ok and "MIG" in refused.message


def test_an_empty_node_re_laying_out_asks_no_surge_and_holds_no_pool_floor() -> None:
    # as the Kubernetes relayout: only a surge (a busy node's) holds the pool's size
    cluster = _cluster()
    cluster.set_size("a100", 2)
    cluster.step(_at(200))
    assert cluster.start_relayout("a100-0002", ONE_G, "test").ok
    pool = cluster.snapshot().pool("a100")
    assert pool is not None and pool.target_nodes == 2 and pool.nodes_pending == 0
    assert cluster.set_size("a100", 1).ok
    assert cluster.snapshot().pool("a100").target_nodes == 1  # type: ignore[union-attr]


def test_a_pool_re_lays_out_one_node_at_a_time_as_the_kubernetes_relayout_does() -> None:
    cluster = _cluster()
    cluster.set_size("a100", 2)
    cluster.step(_at(200))
    assert cluster.start_relayout("a100-0001", ONE_G, "test").ok
    second = cluster.start_relayout("a100-0002", ONE_G, "test")
    assert (second.ok, second.retryable) == (False, True)
    assert second.message == ("pool_relayout_in_progress: one node of a100 at a time "
                              "(a100-0001 is re-laying out)")
    assert cluster.in_flight() == {"a100-0001": ONE_G}
    cluster.step(_at(290))  # 90 s later the first is laid out: the pool is free again
    assert cluster.in_flight() == {}
    assert cluster.start_relayout("a100-0002", ONE_G, "test").ok


def test_a_layout_laid_out_at_once_unbinds_the_replicas_it_cannot_hold() -> None:
    # two whole-GPU replicas run on a node with MIG off; a fleet taken over had MIG there
    llama70 = next(s for s in DEMO_MODELS if s.name == "llama-3-70b")
    h100 = "H100-80GB"
    cluster = SimCluster((PoolSpec("h100", h100, 2, 0, 8, 6.9),), (llama70,),
                         lambda _m, _at: 10.0, SIM, T0, True)
    cluster.set_size("h100", 1)
    cluster.step(_at(60))
    cluster.set_replicas(llama70.name, 1)
    node = _node(cluster, "h100-0001")
    assert (node.gpu_pods, node.whole_gpus_in_use) == (1, 1)  # one of the node's two GPUs
    cluster.set_replicas(llama70.name, 2)
    node = _node(cluster, "h100-0001")
    assert (node.gpu_pods, node.whole_gpus_in_use) == (2, 2)
    cluster.lay_out_now("h100-0001", uniform(h100, ("7g.80gb",)))
    model = cluster.snapshot().model(llama70.name)
    node = _node(cluster, "h100-0001")
    assert (node.gpu_pods, node.whole_gpus_in_use) == (0, 0)
    assert model is not None and model.replicas_ready == 0 and model.replicas_pending == 2
    mig_off = builtin_layout(h100, "all-disabled")
    assert mig_off is not None
    cluster.lay_out_now("h100-0001", mig_off)  # MIG off again: they bind again
    assert _node(cluster, "h100-0001").gpu_pods == 2


def test_a_layout_laid_out_at_once_keeps_the_replicas_it_still_holds() -> None:
    cluster = _cluster()
    cluster.lay_out_now("a100-0001", ONE_G)
    cluster.set_replicas(RESNET.name, 2)
    cluster.step(_at(200))
    cluster.lay_out_now("a100-0001", uniform(A100, ("1g.10gb", "3g.40gb")))
    model = cluster.snapshot().model(RESNET.name)
    assert model is not None and model.replicas_ready == 2 and _node(cluster).gpu_pods == 2
    assert _node(cluster).whole_gpus_in_use == 0  # its replicas run on MIG slices


def test_a_mig_replica_needs_an_instance_with_room_for_its_memory_not_only_its_size() -> None:
    point = replace(RESNET.best_point(), memory_mib=15_000)  # more than a 1g.10gb holds
    big = replace(RESNET, profile=(point,))
    cluster = SimCluster(POOLS, (big,), lambda _m, _at: 10.0, SIM, T0, True)
    cluster.set_size("a100", 1)
    cluster.step(_at(60))
    cluster.lay_out_now("a100-0001", ONE_G)
    cluster.set_replicas(big.name, 1)
    assert _node(cluster).gpu_pods == 0
    cluster.lay_out_now("a100-0001", uniform(A100, ("1g.20gb",)))
    cluster.step(_at(61))
    assert _node(cluster).gpu_pods == 1


def test_replicas_needing_more_memory_take_the_larger_instances_first() -> None:
    small, large = (replace(RESNET.best_point(), memory_mib=m) for m in (8_000, 15_000))
    held = ("1g.10gb", "1g.20gb")
    # whichever came first, a 1g.10gb replica and a 1g.20gb replica share the two instances
    assert instance_free_for(A100, held, [small], large)
    assert instance_free_for(A100, held, [large], small)
    assert not instance_free_for(A100, held, [large], large)
    assert not instance_free_for(A100, ("2g.20gb",), [], small)  # another compute size


def test_a_resumed_fleet_ends_the_re_layouts_its_stopped_run_left_active_aborted() -> None:
    relayouts = MemoryRelayoutStore()
    stopped = _cluster(relayouts=relayouts)
    stopped.lay_out_now("a100-0001", ONE_G)
    stopped.set_replicas(RESNET.name, 2)
    seven = builtin_layout(A100, "all-1g.10gb")
    assert seven is not None and stopped.start_relayout("a100-0001", seven, "test").ok
    observed = stopped.snapshot()
    resumed = SimCluster(POOLS, (RESNET,), lambda _m, _at: 10.0, SIM, _at(600), True, relayouts)
    resumed.restore(observed)
    assert relayouts.active_relayouts() == () and resumed.in_flight() == {}
    (ended,) = relayouts.relayouts_of("a100-0001")
    assert ended.phase is RelayoutPhase.ABORTED and ended.alert.startswith("node_gone: ")
