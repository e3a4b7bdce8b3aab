"""The placement journal in the store (SQLite and PostgreSQL): a new engine on the same store
restores the bindings (re-adopted at the first inventory where their node still exists) and the
plan with its revision; engines on one store answer as one, also placing at once from threads;
an engine behind the pruned releases reads a full snapshot; a store that fails a write leaves
the engine as it was; migration 0008 adds and drops the tables."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest
from sqlalchemy import event, inspect, text
from tick_builders import T0

from controlplane.placement_api import JournalFollower
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.placement_journal import SqlJournalChange, SqlPlacementJournal
from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import AlreadyExists, Infeasible, Unavailable
from scheduler.domain.model import Binding
from scheduler.engine import PlacementEngine

A100 = "A100-80GB"


def _engine(store: Store, holder: str) -> PlacementEngine:
    return PlacementEngine(journal=SqlPlacementJournal(store.engine, holder, VirtualClock(T0)))


def _inventory(*names: str) -> pb.SyncInventoryRequest:
    """Nodes of two A100-80GB GPUs each."""
    return pb.SyncInventoryRequest(nodes=[pb.Node(
        name=n, cpu_milli=32_000, memory_mib=131_072, pool=A100,
        gpus=[pb.Gpu(index=i, product=A100, memory_mib=81_920, mig_capable=True)
              for i in range(2)]) for n in names])


def make_place(workload_id: str, num_gpu: int = 1, gpu_milli: int = 1000,
               cpu_milli: int = 1000, memory_mib: int = 1024,
               products: tuple[str, ...] = ()) -> pb.PlaceRequest:
    return pb.PlaceRequest(workload_id=workload_id, model="m", tenant="t", cpu_milli=cpu_milli,
                           memory_mib=memory_mib, num_gpu=num_gpu, gpu_milli=gpu_milli,
                           gpu_products=list(products))


def _plan_request() -> pb.PlanFleetRequest:
    points = [pb.ProfilePoint(product=A100, compute_slices=g, batch_size=8, mps_processes=1,
                              throughput_rps=100.0 * g, latency_ms=10.0) for g in (1, 2, 3, 7)]
    return pb.PlanFleetRequest(
        models=[pb.ModelDemand(model="a", tenant="t", isolation=pb.TRUSTED, rate_rps=250.0,
                               latency_slo_ms=100.0, profile=points)],
        pools=[pb.GpuPool(product=A100, max_gpus=10, price_per_gpu_hour=4.0)])


def test_a_new_engine_on_the_store_restores_bindings_where_they_were_and_the_plan_revision(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    first = _engine(store, "first")
    first.sync_inventory(_inventory("n0", "n1"))
    whole = first.place(make_place("whole", num_gpu=2, cpu_milli=4000, memory_mib=8192)).binding
    shared = first.place(make_place("shared", gpu_milli=300)).binding
    first.place(make_place("gone", gpu_milli=500))
    first.release(pb.ReleaseRequest(workload_id="gone"))
    first.plan_fleet(_plan_request())
    plan = first.plan_fleet(_plan_request())
    assert plan.revision == 2

    second = _engine(store, "second")
    assert second.counts() == (2, 0, 2)  # both bindings wait for the inventory
    assert second.get_plan() == plan
    assert second.binding("whole") == whole and second.binding("gone") is None
    with pytest.raises(AlreadyExists):
        second.place(make_place("shared"))
    second.sync_inventory(_inventory("n0", "n1"))
    assert (second.binding("whole"), second.binding("shared")) == (whole, shared)
    # the restored bindings hold their GPUs: only the GPU left by neither can be had whole
    free = {("n0", 0), ("n0", 1), ("n1", 0), ("n1", 1)} - {
        (b.node, i) for b in (whole, shared) for i in b.gpu_indices}
    assert len(free) == 1
    got = second.place(make_place("new")).binding
    assert {(got.node, i) for i in got.gpu_indices} == free
    with pytest.raises(Infeasible):
        second.place(make_place("one-too-many"))
    assert second.plan_fleet(_plan_request()).revision == 3


def test_a_restored_binding_whose_node_is_gone_is_dropped_from_the_store_too(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    first = _engine(store, "first")
    first.sync_inventory(_inventory("n0", "n1"))
    kept = first.place(make_place("kept", products=(A100,))).binding
    lost_node = "n1" if kept.node == "n0" else "n0"
    first.sync_inventory(_inventory(kept.node, lost_node))
    other = first.place(make_place("on-the-other", num_gpu=2)).binding
    assert other.node == lost_node

    second = _engine(store, "second")
    second.sync_inventory(_inventory(kept.node))  # lost_node was scaled away meanwhile
    assert second.counts()[0] == 1 and second.binding("on-the-other") is None
    third = _engine(store, "third")
    assert third.counts() == (1, 0, 0)
    assert third.binding("kept") == kept


def test_two_engines_on_one_store_answer_as_one(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    left, right = _engine(store, "left"), _engine(store, "right")
    for engine in (left, right):
        engine.sync_inventory(_inventory("n0"))
    first = left.place(make_place("first")).binding
    second = right.place(make_place("second")).binding  # right learns of first, then binds
    assert set(first.gpu_indices).isdisjoint(second.gpu_indices)
    with pytest.raises(Infeasible):
        left.place(make_place("third"))
    with pytest.raises(AlreadyExists):
        right.place(make_place("first"))
    right.release(pb.ReleaseRequest(workload_id="first"))  # bound through the other engine
    assert set(left.place(make_place("third")).binding.gpu_indices) == set(first.gpu_indices)

    assert left.plan_fleet(_plan_request()).revision == 1
    assert right.plan_fleet(_plan_request()).revision == 2  # one sequence of revisions
    assert left.plan_revision == 1
    left.refresh()  # what WatchPlan and GetPlan of the other server see
    assert left.get_plan() == right.get_plan() and left.plan_revision == 2
    assert left.counts() == right.counts() == (2, 2, 2)


def test_an_engine_ranks_replicas_another_engine_on_the_store_placed(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    left, right = _engine(store, "left"), _engine(store, "right")
    for engine in (left, right):
        engine.sync_inventory(_inventory("n0"))
    left.place(make_place("placed-left"))
    answer = right.rank_replicas(pb.RankReplicasRequest(replicas=[
        pb.ReplicaLoad(workload_id="placed-left"), pb.ReplicaLoad(workload_id="nowhere")]))
    assert [(r.workload_id, r.node) for r in answer.ranked] == [("placed-left", "n0")]
    assert list(answer.unknown) == ["nowhere"]



def test_a_restarted_engine_ranks_replicas_as_before_once_it_has_an_inventory(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    first = _engine(store, "first")
    first.sync_inventory(_inventory("n0", "n1"))
    first.place(make_place("a-busy"))
    for workload_id in ("b-shared", "c-shared"):
        placed = first.place(pb.PlaceRequest(
            workload_id=workload_id, model="m", tenant="t", num_gpu=1, gpu_milli=300,
            gpu_memory_mib=20_480, isolation=pb.TRUSTED)).binding
        assert placed.mode == pb.MPS
    request = pb.RankReplicasRequest(replicas=[
        pb.ReplicaLoad(workload_id="a-busy", queue_depth=4),
        pb.ReplicaLoad(workload_id="b-shared", queue_depth=1),
        pb.ReplicaLoad(workload_id="c-shared", gpu_memory_used_mib=10_240)])
    before = first.rank_replicas(request)
    assert [r.memory_headroom for r in before.ranked if r.workload_id == "b-shared"] == [
        pytest.approx(1 - 20_480 / 80_384)]  # its neighbour's charge, not its own, of the
    # 80,384 MiB CUDA can use of an A100-80GB (scheduler/domain/usable_memory.py)

    second = _engine(store, "second")
    waiting = second.rank_replicas(request)  # no inventory yet: no node takes work
    assert all(r.score == 0.0 for r in waiting.ranked)
    assert all(r.reason.startswith(f"node_unavailable: {r.node} is not in the inventory (no "
                                   "SyncInventory since this server started)")
               for r in waiting.ranked)
    # what each would score: its charge is in the journal, so its reported memory counts
    assert {r.workload_id: (r.memory_headroom, r.memory_mib) for r in waiting.ranked} == {
        "a-busy": (1.0, 0), "b-shared": (1.0, 20_480), "c-shared": (0.5, 20_480)}
    assert [r.workload_id for r in waiting.ranked] == ["b-shared", "c-shared", "a-busy"]
    second.sync_inventory(_inventory("n0", "n1"))
    assert second.rank_replicas(request) == before

def test_engines_placing_at_once_from_threads_never_bind_a_gpu_twice(store_url: str) -> None:
    engines = [_engine(Store.open(store_url, migrate=True), f"engine-{i}") for i in range(2)]
    for engine in engines:
        engine.sync_inventory(_inventory("n0", "n1", "n2", "n3"))  # 8 GPUs
    placed: list[pb.Binding] = []
    refused: list[str] = []

    def place_all(engine: PlacementEngine, prefix: str) -> None:
        for i in range(8):
            try:
                placed.append(engine.place(make_place(f"{prefix}-{i}")).binding)
            except Infeasible:
                refused.append(f"{prefix}-{i}")

    threads = [threading.Thread(target=place_all, args=(e, f"t{k}"))
               for k, e in enumerate(engines)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(placed) == 8 and len(refused) == 8
    assert len({(b.node, b.gpu_indices[0]) for b in placed}) == 8


def test_an_engine_behind_the_pruned_releases_reads_a_full_snapshot(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    busy = PlacementEngine(journal=SqlPlacementJournal(store.engine, "busy", VirtualClock(T0),
                                                       keep_releases=2, prune_every=2))
    idle = _engine(store, "idle")
    for engine in (busy, idle):
        engine.sync_inventory(_inventory("n0", "n1"))
    idle.place(make_place("idle-0"))
    for i in range(4):  # 8 more versions; the releases of the first ones are pruned
        busy.place(make_place(f"busy-{i}", gpu_milli=100))
        busy.release(pb.ReleaseRequest(workload_id=f"busy-{i}"))
    busy.place(make_place("busy-last", gpu_milli=100))
    idle.refresh()
    assert idle.counts()[0] == 2
    assert idle.binding("busy-last") is not None and idle.binding("busy-0") is None
    with store.engine.connect() as connection:
        tombstones = connection.execute(text(
            "SELECT count(*) FROM placement_bindings WHERE released_version IS NOT NULL"
        )).scalar_one()
    assert tombstones <= 2


def test_a_reader_overtaken_by_a_prune_between_its_statements_reads_a_full_snapshot(
        store_url: str) -> None:
    """Another server's change commits, pruning the tombstone the reader needs, right after
    the reader's first statement (the journal's head, which still said it was kept)."""
    store = Store.open(store_url, migrate=True)
    writer = SqlPlacementJournal(store.engine, "writer", VirtualClock(T0), keep_releases=2,
                                 prune_every=5)
    reader_store = Store.open(store_url)
    reader = SqlPlacementJournal(reader_store.engine, "reader", VirtualClock(T0))

    def bound(workload_id: str) -> Callable[[SqlJournalChange], None]:
        return lambda change: change.bound(Binding(workload_id, "n0", (0,), None, "", 1000, "t"))

    def write(step: Callable[[SqlJournalChange], None]) -> None:
        with writer.change(0) as change:
            step(change)

    write(bound("w1"))  # v1
    seen = reader.read(0)
    write(lambda change: change.released(["w1"]))  # v2: w1's tombstone
    write(bound("w2"))  # v3
    write(bound("w4"))  # v4
    pruned: list[int] = []

    @event.listens_for(reader_store.engine, "after_cursor_execute")
    def prune_after_the_head(*_: object) -> None:
        if not pruned:
            pruned.append(1)
            write(bound("w5"))  # v5: a pruning change, tombstones at or below v3 go

    try:
        changes = reader.read(seen.version)
    finally:
        reader_store.engine.dispose()
    assert pruned == [1]
    assert changes.full
    assert sorted(b.workload_id for b in changes.bound) == ["w2", "w4", "w5"]  # w1 not bound


def test_a_store_that_fails_a_write_leaves_the_engine_as_it_was(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    engine = _engine(store, "holder")
    engine.sync_inventory(_inventory("n0"))
    engine.place(make_place("first"))
    downgrade(store.engine, "0007")  # the journal's tables are gone under the running server
    with pytest.raises(Unavailable, match="cannot record the change"):
        engine.place(make_place("second"))
    assert engine.binding("second") is None and engine.counts()[0] == 1
    # the GPU it would have taken is still free: the same request fits once the store is back
    upgrade(store.engine)
    restarted = _engine(store, "holder")
    restarted.sync_inventory(_inventory("n0"))
    assert restarted.place(make_place("second")).binding.node == "n0"


def test_migration_0008_adds_the_tables_and_its_downgrade_drops_them(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    tables = {"placement_journal", "placement_bindings"}
    assert tables <= set(inspect(store.engine).get_table_names())
    downgrade(store.engine, "0007")
    assert not tables & set(inspect(store.engine).get_table_names())
    upgrade(store.engine)
    assert _engine(store, "holder").counts() == (0, 0, 0)


def test_calls_that_change_nothing_leave_the_journal_version_as_it_was(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    engine = _engine(store, "holder")
    engine.sync_inventory(_inventory("n0"))
    engine.place(make_place("bound"))

    def version() -> int:
        with store.engine.connect() as connection:
            return int(connection.execute(text(
                "SELECT version FROM placement_journal")).scalar_one())

    before = version()
    engine.sync_inventory(_inventory("n0"))  # nothing dropped
    engine.release(pb.ReleaseRequest(workload_id="never-bound"))
    with pytest.raises(Infeasible):
        engine.place(make_place("too-big", num_gpu=3))
    assert version() == before == 1


def test_a_follower_logs_an_unreadable_journal_once_and_its_recovery_once(
        store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    store = Store.open(store_url, migrate=True)
    follow = JournalFollower(_engine(store, "holder"))
    downgrade(store.engine, "0007")  # the journal's tables are gone under the running server
    with caplog.at_level(logging.INFO, logger="headroom.placement"):
        for _ in range(5):
            follow()
        upgrade(store.engine)
        for _ in range(3):
            follow()
    events = [(r.levelname, r.getMessage()) for r in caplog.records
              if r.name == "headroom.placement"]
    assert events == [("WARNING", "placement.journal_unreadable"),
                      ("INFO", "placement.journal_readable")]


def test_a_binding_a_resync_leaves_without_gpu_memory_is_dropped_from_the_store_too(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    first = _engine(store, "first")
    first.sync_inventory(_inventory("n0"))
    first.place(pb.PlaceRequest(workload_id="big", model="m", tenant="t", num_gpu=1,
                                gpu_milli=300, gpu_memory_mib=60_000, isolation=pb.TRUSTED,
                                gpu_products=[A100]))
    smaller = _inventory("n0")
    for gpu in smaller.nodes[0].gpus:
        gpu.memory_mib = 40_960
    first.sync_inventory(smaller)
    assert first.counts()[0] == 0
    assert _engine(store, "second").counts()[0] == 0


def _now_l4(request: pb.SyncInventoryRequest) -> pb.SyncInventoryRequest:
    for node in request.nodes:
        for gpu in node.gpus:
            gpu.product, gpu.memory_mib, gpu.mig_capable = "L4", 24_576, False
    return request


def test_a_restarted_engine_releases_a_restored_binding_whose_gpu_no_longer_meets_its_request(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    first = _engine(store, "first")
    first.sync_inventory(_inventory("n0"))
    first.place(make_place("a100-only", products=(A100,)))
    first.place(pb.PlaceRequest(workload_id="needs-60g", model="m", tenant="t", num_gpu=1,
                                gpu_milli=1000, gpu_memory_mib=60_000))
    restarted = _engine(store, "restarted")  # the request came back with the binding
    resp = restarted.sync_inventory(_now_l4(_inventory("n0")))
    assert [(r.workload_id, r.reason) for r in resp.released] == [
        ("a100-only", "gpu_product_not_allowed"), ("needs-60g", "insufficient_gpu_memory")]
    assert _engine(store, "third").counts()[0] == 0  # released in the store too


def test_a_resync_that_overcommits_a_node_keeps_its_bindings_in_the_store_and_on_every_engine(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    left, right = _engine(store, "left"), _engine(store, "right")
    left.sync_inventory(_inventory("n0"))
    for workload_id in ("x1", "x2"):
        left.place(make_place(workload_id, cpu_milli=12_000))
    shrunk = _inventory("n0")
    shrunk.nodes[0].cpu_milli = 16_000
    resp = right.sync_inventory(shrunk)
    assert (list(resp.released), list(resp.overcommitted_nodes)) == ([], ["n0"])
    with pytest.raises(Infeasible):  # right took on both: GPU 0 and 1 are not handed out
        right.place(make_place("y", cpu_milli=0, memory_mib=0))
    assert _engine(store, "third").counts()[0] == 2


def test_migration_0021_adds_the_request_columns_and_a_row_journaled_before_is_kept_anywhere(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    first = _engine(store, "first")
    first.sync_inventory(_inventory("n0"))
    first.place(make_place("old", products=(A100,)))

    def columns() -> set[str]:
        return {c["name"] for c in inspect(store.engine).get_columns("placement_bindings")}

    request_columns = {"gpu_products", "gpu_memory_request_mib"}
    assert columns() >= request_columns
    downgrade(store.engine, "0020")
    assert not request_columns & columns()
    upgrade(store.engine)
    resp = _engine(store, "restarted").sync_inventory(_now_l4(_inventory("n0")))
    assert list(resp.released) == []  # what it asked is not known: any product, as before
