"""The placement engine's journal in the store (SQLite and PostgreSQL): a new engine on the same
store restores the bindings (re-adopted at the first inventory where their node still exists)
and the plan with its revision; a server whose journal another took over, or whose store fails,
refuses the change and keeps its state as it was; migration 0008 adds and drops the tables."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect
from tick_builders import T0

from controlplane.sim.clock import VirtualClock
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.placement_journal import SqlPlacementJournal
from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import AlreadyExists, Infeasible, Unavailable
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


def test_an_engine_whose_journal_was_taken_over_refuses_changes_and_keeps_its_state(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    old = _engine(store, "old-holder")
    old.sync_inventory(_inventory("n0"))
    old.place(make_place("before"))
    old.plan_fleet(_plan_request())
    _engine(store, "new-holder")

    with pytest.raises(Unavailable, match="new-holder took it over at 2026-03-02T12:00:00Z"):
        old.place(make_place("after"))
    assert old.binding("after") is None and old.counts() == (1, 2, 1)
    with pytest.raises(Unavailable, match="new-holder"):
        old.release(pb.ReleaseRequest(workload_id="before"))
    assert old.binding("before") is not None
    with pytest.raises(Unavailable, match="new-holder"):
        old.plan_fleet(_plan_request())
    assert old.plan_revision == 1
    # the one change that needs no write still works: an unknown id is released as before
    old.release(pb.ReleaseRequest(workload_id="never-bound"))
    assert _engine(store, "third").counts() == (1, 0, 1)


def test_a_store_that_fails_a_write_leaves_the_engine_as_it_was(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    engine = _engine(store, "holder")
    engine.sync_inventory(_inventory("n0"))
    engine.place(make_place("first"))
    downgrade(store.engine, "0007")  # the journal's tables are gone under the running server
    with pytest.raises(Unavailable, match="cannot record the binding of 'second'"):
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
