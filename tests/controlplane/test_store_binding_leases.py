"""Binding leases on the store's placement journal (SQLite and PostgreSQL): a renewal through one
placement server keeps the binding alive on every server; once renewals stop, the first server
to sweep releases it for all of them and the store shows it released; a restarted server keeps
each lease's expiry; migration 0009 adds the lease columns and its downgrade drops them."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect
from tick_builders import T0

from controlplane.placement_api import JournalFollower
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.placement_journal import SqlPlacementJournal, live_bindings
from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import Infeasible
from scheduler.engine import PlacementEngine

T0_S = T0.timestamp()
A100 = "A100-80GB"


class FakeClock:
    def __init__(self) -> None:
        self.now_s = T0_S

    def __call__(self) -> float:
        return self.now_s


def _engine(store: Store, holder: str, clock: FakeClock) -> PlacementEngine:
    return PlacementEngine(journal=SqlPlacementJournal(store.engine, holder, VirtualClock(T0)),
                           now_s=clock)


def _two_servers(store: Store, clock: FakeClock) -> tuple[PlacementEngine, PlacementEngine]:
    """Two placement servers on one store, each sent the same one-GPU inventory."""
    first, second = _engine(store, "first", clock), _engine(store, "second", clock)
    for engine in (first, second):
        engine.sync_inventory(_one_gpu_node())
    return first, second


def _one_gpu_node() -> pb.SyncInventoryRequest:
    return pb.SyncInventoryRequest(nodes=[pb.Node(
        name="n0", cpu_milli=32_000, memory_mib=131_072, pool=A100,
        gpus=[pb.Gpu(index=0, product=A100, memory_mib=81_920)])])


def _place(workload_id: str, lease_s: float = 0.0) -> pb.PlaceRequest:
    return pb.PlaceRequest(workload_id=workload_id, model="m", tenant="t", cpu_milli=1000,
                           memory_mib=1024, num_gpu=1, lease_s=lease_s)


def _stored(store: Store) -> list[tuple[str, float]]:
    with store.engine.connect() as connection:
        return [(b.workload_id, b.lease_expires_at_s) for b, _ in live_bindings(connection)]


def test_a_renewal_through_one_server_holds_on_every_server_and_the_sweep_ends_it_for_all(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    clock = FakeClock()
    first, second = _two_servers(store, clock)
    first.place(_place("a", lease_s=30))
    clock.now_s = T0_S + 20
    second.renew_leases(pb.RenewLeasesRequest(workload_ids=["a"]))
    assert _stored(store) == [("a", T0_S + 50)]
    clock.now_s = T0_S + 40  # past the first expiry: the renewal made elsewhere counts
    first.expire_leases()
    assert [b.lease_expires_at_s for b in first.list_bindings(
        pb.ListBindingsRequest()).bindings] == [T0_S + 50]
    with pytest.raises(Infeasible):
        first.place(_place("b"))
    clock.now_s = T0_S + 50
    JournalFollower(first)()  # what a server's follow job does every 0.5 s
    assert _stored(store) == []
    second.refresh()
    assert second.counts()[0] == 0
    assert second.place(_place("b")).binding.node == "n0"


def test_a_place_reusing_an_id_whose_lease_ran_out_elsewhere_binds_it_anew_at_once(
        store_url: str) -> None:
    """The second server has not seen the first's binding yet (no follow since): it learns of it
    inside its own Place's journal change, already run out, and binds the id again there."""
    store = Store.open(store_url, migrate=True)
    clock = FakeClock()
    first, second = _two_servers(store, clock)
    first.place(_place("a", lease_s=0.2))
    clock.now_s = T0_S + 0.3  # run out; no server has swept it, nor has "second" refreshed
    again = second.place(_place("a", lease_s=30)).binding
    assert (again.node, again.lease_expires_at_s) == ("n0", T0_S + 30.3)
    assert _stored(store) == [("a", T0_S + 30.3)]
    first.refresh()
    assert [(b.workload_id, b.lease_expires_at_s) for b in first.list_bindings(
        pb.ListBindingsRequest()).bindings] == [("a", T0_S + 30.3)]


def test_a_refused_place_leaves_a_lease_it_found_run_out_for_the_sweep_to_release_once(
        store_url: str) -> None:
    """The refused Place's change rolls back, so the engine re-reads the journal instead of
    keeping a release the store never saw; the next sweep releases (and reports) it once."""
    store = Store.open(store_url, migrate=True)
    clock = FakeClock()
    first, second = _two_servers(store, clock)
    first.place(_place("a", lease_s=0.2))
    clock.now_s = T0_S + 0.3
    reported: list[int] = []
    second.on_leases_expired = reported.append
    too_big = _place("b")
    too_big.num_gpu = 2
    with pytest.raises(Infeasible):
        second.place(too_big)
    assert _stored(store) == [("a", T0_S + 0.2)]
    assert reported == []
    second.expire_leases()
    assert (_stored(store), reported) == ([], [1])
    assert second.place(_place("b")).binding.node == "n0"


def test_a_restarted_server_keeps_each_leases_expiry(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    clock = FakeClock()
    before = _engine(store, "before", clock)
    before.sync_inventory(_one_gpu_node())
    before.place(_place("a", lease_s=30))
    before.place(pb.PlaceRequest(workload_id="cpu", cpu_milli=100, memory_mib=64))
    after = _engine(store, "after", clock)
    after.sync_inventory(_one_gpu_node())
    held = {b.workload_id: (b.lease_s, b.lease_expires_at_s)
            for b in after.list_bindings(pb.ListBindingsRequest()).bindings}
    assert held == {"a": (30, T0_S + 30), "cpu": (0, 0)}
    clock.now_s = T0_S + 30
    after.expire_leases()
    assert [w for w, _ in _stored(store)] == ["cpu"]


def test_migration_0009_adds_the_lease_columns_and_its_downgrade_drops_them(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    engine = _engine(store, "x", FakeClock())
    engine.sync_inventory(_one_gpu_node())
    engine.place(_place("kept"))
    lease_columns = {"lease_s", "lease_expires_at_s"}

    def columns() -> set[str]:
        return {c["name"] for c in inspect(store.engine).get_columns("placement_bindings")}

    assert lease_columns <= columns()
    downgrade(store.engine, "0008")
    assert not lease_columns & columns()
    upgrade(store.engine)
    assert _stored(store) == [("kept", 0.0)]
