"""The model and tenant of each binding on the store's placement journal (SQLite and
PostgreSQL): every engine on the store answers ListBindings of a model with the bindings made
through any of them, a renewal elsewhere keeps them, a restarted engine restores them; migration
0014 adds the columns (a binding journaled before restores with model "") and its downgrade drops
them."""

from __future__ import annotations

from sqlalchemy import inspect
from tick_builders import T0

from controlplane.sim.clock import VirtualClock
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.placement_journal import SqlPlacementJournal, live_bindings
from protos.headroom.v1 import placement_pb2 as pb
from scheduler.engine import PlacementEngine

T0_S = T0.timestamp()
A100 = "A100-80GB"
MODEL_COLUMNS = {"model", "tenant"}


def _engine(store: Store, holder: str) -> PlacementEngine:
    engine = PlacementEngine(journal=SqlPlacementJournal(store.engine, holder, VirtualClock(T0)),
                             now_s=lambda: T0_S)
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[pb.Node(
        name="n0", cpu_milli=32_000, memory_mib=131_072, pool=A100,
        gpus=[pb.Gpu(index=i, product=A100, memory_mib=81_920) for i in range(2)])]))
    return engine


def _place(workload_id: str, model: str, tenant: str = "search",
           lease_s: float = 0.0) -> pb.PlaceRequest:
    return pb.PlaceRequest(workload_id=workload_id, model=model, tenant=tenant, cpu_milli=1000,
                           memory_mib=1024, num_gpu=1, gpu_milli=250, lease_s=lease_s)


def _of_model(engine: PlacementEngine, model: str) -> list[tuple[str, str, str]]:
    return [(b.workload_id, b.model, b.tenant) for b in engine.list_bindings(
        pb.ListBindingsRequest(model=model)).bindings]


def _stored(store: Store) -> list[tuple[str, str, str]]:
    with store.engine.connect() as connection:
        return [(b.workload_id, b.model, b.tenant) for b, _ in live_bindings(connection)]


def test_every_engine_on_the_store_lists_the_bindings_of_a_model_made_through_any(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    left, right = _engine(store, "left"), _engine(store, "right")
    left.place(_place("llama-0", "llama", lease_s=30))
    right.place(_place("bert-0", "bert", tenant="ads"))  # right learns of llama-0 here
    left.place(_place("llama-1", "llama"))
    for engine in (left, right):
        assert _of_model(engine, "llama") == [("llama-0", "llama", "search"),
                                              ("llama-1", "llama", "search")]
        assert _of_model(engine, "bert") == [("bert-0", "bert", "ads")]
    right.renew_leases(pb.RenewLeasesRequest(workload_ids=["llama-0"]))
    left.refresh()
    held = left.binding("llama-0")
    assert held is not None and (held.model, held.tenant) == ("llama", "search")
    assert _stored(store) == [("bert-0", "bert", "ads"), ("llama-0", "llama", "search"),
                              ("llama-1", "llama", "search")]


def test_a_restarted_engine_restores_the_model_and_tenant_of_each_binding(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    before = _engine(store, "before")
    before.place(_place("llama-0", "llama"))
    before.place(_place("bert-0", "bert", tenant="ads"))
    after = PlacementEngine(journal=SqlPlacementJournal(store.engine, "after", VirtualClock(T0)),
                            now_s=lambda: T0_S)
    assert _of_model(after, "bert") == [("bert-0", "bert", "ads")]  # waiting for an inventory
    after.sync_inventory(pb.SyncInventoryRequest(nodes=[pb.Node(
        name="n0", cpu_milli=32_000, memory_mib=131_072, pool=A100,
        gpus=[pb.Gpu(index=i, product=A100, memory_mib=81_920) for i in range(2)])]))
    assert _of_model(after, "llama") == [("llama-0", "llama", "search")]
    assert after.binding("bert-0") == before.binding("bert-0")


def test_migration_0014_adds_the_model_columns_and_its_downgrade_drops_them(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    _engine(store, "x").place(_place("kept", "llama"))

    def columns() -> set[str]:
        return {c["name"] for c in inspect(store.engine).get_columns("placement_bindings")}

    assert columns() >= MODEL_COLUMNS
    downgrade(store.engine, "0013")
    assert not MODEL_COLUMNS & columns()
    upgrade(store.engine)
    assert _stored(store) == [("kept", "", "")]  # journaled without them: not known
    restarted = _engine(store, "restarted")
    held = restarted.binding("kept")
    assert held is not None and (held.model, held.tenant) == ("", "")
    assert _of_model(restarted, "llama") == []
