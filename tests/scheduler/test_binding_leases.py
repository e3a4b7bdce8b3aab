"""Binding leases: a Place with ``lease_s`` expires unless RenewLeases extends it, so a serving
layer that dies without Release leaks no GPU; bindings without a lease never expire."""

from __future__ import annotations

import math

import pytest
from placement_builders import make_node, make_place

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import Infeasible, InvalidArgument
from scheduler.engine import PlacementEngine

T0_S = 1_800_000_000.0


class FakeClock:
    def __init__(self) -> None:
        self.now_s = T0_S

    def __call__(self) -> float:
        return self.now_s


def _one_gpu_engine(clock: FakeClock) -> PlacementEngine:
    engine = PlacementEngine(now_s=clock)
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0", gpus=1)]))
    return engine


def _leased(workload_id: str, lease_s: float) -> pb.PlaceRequest:
    request = make_place(workload_id)
    request.lease_s = lease_s
    return request


def _bound(engine: PlacementEngine) -> list[str]:
    return [b.workload_id for b in engine.list_bindings(pb.ListBindingsRequest()).bindings]


def test_a_leased_binding_says_when_it_runs_out_and_frees_its_gpu_then() -> None:
    clock = FakeClock()
    engine = _one_gpu_engine(clock)
    binding = engine.place(_leased("a", 30)).binding
    assert (binding.lease_s, binding.lease_expires_at_s) == (30, T0_S + 30)
    clock.now_s = T0_S + 29.9
    with pytest.raises(Infeasible):
        engine.place(make_place("b"))
    clock.now_s = T0_S + 30
    assert engine.place(make_place("b")).binding.gpu_indices == [0]
    assert engine.binding("a") is None
    assert _bound(engine) == ["b"]


def test_renewing_keeps_a_binding_past_its_first_expiry_until_renewals_stop() -> None:
    clock = FakeClock()
    engine = _one_gpu_engine(clock)
    engine.place(_leased("a", 30))
    clock.now_s = T0_S + 20
    renewed = engine.renew_leases(pb.RenewLeasesRequest(workload_ids=["a"]))
    assert [(b.workload_id, b.lease_expires_at_s) for b in renewed.renewed] == [("a", T0_S + 50)]
    assert list(renewed.unknown) == []
    clock.now_s = T0_S + 49
    assert _bound(engine) == ["a"]
    clock.now_s = T0_S + 50
    assert _bound(engine) == []
    assert engine.counts()[0] == 0


def test_after_one_lease_runs_out_the_next_one_still_does() -> None:
    clock = FakeClock()
    engine = PlacementEngine(now_s=clock)
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0", gpus=2)]))
    engine.place(_leased("short", 10))
    engine.place(_leased("long", 30))
    clock.now_s = T0_S + 10
    assert _bound(engine) == ["long"]
    clock.now_s = T0_S + 30
    assert _bound(engine) == []


def test_renewal_names_ids_not_bound_and_returns_unleased_bindings_unchanged() -> None:
    clock = FakeClock()
    engine = _one_gpu_engine(clock)
    engine.place(make_place("keep", num_gpu=0, gpu_milli=0))
    engine.place(_leased("gone", 10))
    clock.now_s = T0_S + 11
    answer = engine.renew_leases(pb.RenewLeasesRequest(workload_ids=["keep", "gone", "ghost"]))
    assert [(b.workload_id, b.lease_expires_at_s) for b in answer.renewed] == [("keep", 0.0)]
    assert list(answer.unknown) == ["gone", "ghost"]


def test_an_id_asked_twice_is_renewed_once_and_answered_as_often_and_in_the_order_asked() -> None:
    clock = FakeClock()
    engine = PlacementEngine(now_s=clock)
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0", gpus=2)]))
    engine.place(_leased("a", 30))
    engine.place(_leased("b", 30))
    clock.now_s = T0_S + 20
    answer = engine.renew_leases(pb.RenewLeasesRequest(
        workload_ids=["b", "ghost", "a", "b", "ghost"]))
    assert [(b.workload_id, b.lease_expires_at_s) for b in answer.renewed] == [
        ("b", T0_S + 50), ("a", T0_S + 50), ("b", T0_S + 50)]
    assert list(answer.unknown) == ["ghost", "ghost"]


def test_a_binding_without_a_lease_is_never_expired() -> None:
    clock = FakeClock()
    engine = _one_gpu_engine(clock)
    engine.place(make_place("a"))
    clock.now_s = T0_S + 10 * 365 * 86_400
    engine.expire_leases()
    assert _bound(engine) == ["a"]


def test_a_leased_binding_on_a_cordoned_node_still_runs_out() -> None:
    clock = FakeClock()
    engine = _one_gpu_engine(clock)
    engine.place(_leased("a", 30))
    cordoned = make_node("n0", gpus=1)
    cordoned.unschedulable = True
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[cordoned]))
    clock.now_s = T0_S + 31
    engine.expire_leases()
    assert engine.binding("a") is None
    assert engine.counts()[0] == 0


@pytest.mark.parametrize("lease_s", [-1.0, math.nan, math.inf])
def test_a_lease_that_is_negative_or_not_finite_is_refused_naming_lease_s(
        lease_s: float) -> None:
    engine = _one_gpu_engine(FakeClock())
    with pytest.raises(InvalidArgument) as err:
        engine.place(_leased("a", lease_s))
    assert err.value.field == "lease_s"
    assert _bound(engine) == []


def test_renewing_an_empty_workload_id_is_refused_naming_its_position() -> None:
    engine = _one_gpu_engine(FakeClock())
    engine.place(_leased("a", 30))
    with pytest.raises(InvalidArgument) as err:
        engine.renew_leases(pb.RenewLeasesRequest(workload_ids=["a", ""]))
    assert err.value.field == "workload_ids[1]"
    assert engine.list_bindings(pb.ListBindingsRequest()).bindings[0].lease_expires_at_s == (
        T0_S + 30)


def test_a_binding_whose_lease_ran_out_is_not_counted_before_any_sweep() -> None:
    clock = FakeClock()
    engine = _one_gpu_engine(clock)
    engine.place(_leased("a", 30))
    assert engine.counts()[0] == 1
    clock.now_s = T0_S + 30  # no call has swept it yet: the count (and the gauge) leave it out
    assert engine.counts()[0] == 0
