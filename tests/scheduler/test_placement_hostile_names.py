"""Hostile names in placement requests, over real gRPC on 127.0.0.1: an id, node, model,
tenant or product longer than its limit or holding a control or bidirectional character is
INVALID_ARGUMENT naming the field (never UNAVAILABLE from a store that cannot hold it, which
clients retry), and nothing is bound; names at their limits are bound and kept by the store
(SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from placement_builders import make_node, make_place

from controlplane.placement_api import journaled_engine
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.server import create_server, stop

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
CONTROL = " (control and bidirectional characters are refused)"


@dataclass
class Served:
    stub: pb_grpc.PlacementStub
    store: Store


@pytest.fixture
def served(store_url: str) -> Iterator[Served]:
    """A placement server on a store's journal (its models table lists the demo's models),
    with two nodes."""
    store = Store.open(store_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    server, port = create_server("127.0.0.1:0", journaled_engine(store, VirtualClock(T0), "t"))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}",
                                    options=[("grpc.max_send_message_length", 8 << 20)])
    try:
        stub = pb_grpc.PlacementStub(channel)
        stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0"), make_node("n1")]),
                           timeout=5)
        yield Served(stub, store)
    finally:
        channel.close()
        stop(server, grace_s=0.5)
        store.engine.dispose()


def _refused(call: Callable[[], Any]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details() or ""


@pytest.mark.parametrize(("place", "details"), [
    (make_place("x" * 1_000_000), "workload_id: is 1000000 characters long, at most 317"),
    (make_place("evil\n\x00z"), f"workload_id: holds the control character U+000A at 4{CONTROL}"),
    (make_place("w\x00"), f"workload_id: holds the control character U+0000 at 1{CONTROL}"),
    (make_place("w", model="m" * 1_000_000), "model: is 1000000 characters long, at most 200"),
    (make_place("w", model="chat\x00"), f"model: holds the control character U+0000 at 4{CONTROL}"),
    (make_place("w", tenant="t" * 1_000_000), "tenant: is 1000000 characters long, at most 100"),
    (make_place("w", tenant="acme\u202egpj.exe"),
     f"tenant: holds the control character U+202E at 4{CONTROL}"),
], ids=["1 MB id", "newline and NUL in id", "NUL in id", "1 MB model", "NUL in model",
        "1 MB tenant", "right-to-left override in tenant"])
def test_a_place_with_a_hostile_id_model_or_tenant_is_invalid_argument_and_binds_nothing(
        served: Served, place: pb.PlaceRequest, details: str) -> None:
    assert _refused(lambda: served.stub.Place(place, timeout=10)) == (
        grpc.StatusCode.INVALID_ARGUMENT, details)
    assert served.stub.ListBindings(pb.ListBindingsRequest(), timeout=5).bindings == []


def test_an_id_model_and_tenant_one_past_their_limits_are_refused_and_at_them_kept_by_the_store(
        served: Served) -> None:
    workload_id, model, tenant = "w" * 317, "m" * 200, "t" * 100  # "namespace/name"
    for past, field in ((make_place(workload_id + "w", model=model, tenant=tenant), "workload_id"),
                        (make_place(workload_id, model=model + "m", tenant=tenant), "model"),
                        (make_place(workload_id, model=model, tenant=tenant + "t"), "tenant")):
        code, details = _refused(lambda: served.stub.Place(past, timeout=10))  # noqa: B023
        assert (code, details.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, field)
    served.stub.Place(make_place(workload_id, model=model, tenant=tenant), timeout=10)
    again = journaled_engine(served.store, VirtualClock(T0), "again")  # reads the journal
    kept = again.list_bindings(pb.ListBindingsRequest()).bindings
    assert [(b.workload_id, b.model, b.tenant) for b in kept] == [(workload_id, model, tenant)]


NODE = make_node("n0", product="A100-80GB", mig_capable=True)


def _node(**changes: Any) -> pb.SyncInventoryRequest:
    """An inventory of one node changed by ``changes`` (pool, labels, gpu_product, profile,
    held_model)."""
    node = pb.Node()
    node.CopyFrom(NODE)
    node.pool = changes.get("pool", node.pool)
    node.labels.update(changes.get("labels", {}))
    node.gpus[0].product = changes.get("gpu_product", node.gpus[0].product)
    if "profile" in changes or "held_model" in changes:
        node.gpus[0].mig_instances.append(pb.MigInstance(
            profile=changes.get("profile", "3g.40gb"), model=changes.get("held_model", "")))
    return pb.SyncInventoryRequest(nodes=[node])


def _plan(model: str = "m", tenant: str = "t", point: str = "A100-80GB",
          pool: str = "A100-80GB", warm: str | None = None) -> pb.PlanFleetRequest:
    request = pb.PlanFleetRequest(
        models=[pb.ModelDemand(model=model, tenant=tenant, isolation=pb.TRUSTED, rate_rps=1.0,
                               latency_slo_ms=100.0, profile=[pb.ProfilePoint(
                                   product=point, batch_size=1, mps_processes=1,
                                   throughput_rps=10.0, latency_ms=10.0)])],
        pools=[pb.GpuPool(product=pool, max_gpus=1, price_per_gpu_hour=1.0)])
    if warm is not None:
        request.warm.pools.append(pb.WarmPool(product=warm, gpus=1))
    return request


def _rank(workload_id: str = "w", version: str = "", adapter: str = "a",
          wanted: str = "") -> pb.RankReplicasRequest:
    return pb.RankReplicasRequest(replicas=[pb.ReplicaLoad(
        workload_id=workload_id, model_version=version, adapters=[adapter])],
        model_version=wanted)


LONG = "x" * 254


@pytest.mark.parametrize(("method", "request_", "details"), [
    ("Place", make_place("w", products=["A100\x7f"]),
     f"gpu_products[0]: holds the control character U+007F at 4{CONTROL}"),
    ("Release", pb.ReleaseRequest(workload_id="\x1b[2Jw"),
     f"workload_id: holds the control character U+001B at 0{CONTROL}"),
    ("RenewLeases", pb.RenewLeasesRequest(workload_ids=["w", "w" * 318]),
     "workload_ids[1]: is 318 characters long, at most 317"),
    ("ListBindings", pb.ListBindingsRequest(node="n0\u2066"),
     f"node: holds the control character U+2066 at 2{CONTROL}"),
    ("ListBindings", pb.ListBindingsRequest(workload_prefix="w" * 318),
     "workload_prefix: is 318 characters long, at most 317"),
    ("ListBindings", pb.ListBindingsRequest(model="m" * 201),
     "model: is 201 characters long, at most 200"),
    ("RankReplicas", _rank(workload_id="w\u2028"),
     f"replicas[0].workload_id: holds the control character U+2028 at 1{CONTROL}"),
    ("RankReplicas", _rank(version=LONG),
     "replicas[0].model_version: is 254 characters long, at most 253"),
    ("RankReplicas", _rank(adapter="lora\u200f"),
     f"replicas[0].adapters[0]: holds the control character U+200F at 4{CONTROL}"),
    ("RankReplicas", _rank(wanted="v\t1"),
     f"model_version: holds the control character U+0009 at 1{CONTROL}"),
    ("SyncInventory", pb.SyncInventoryRequest(nodes=[make_node("n\x00")]),
     f"nodes[0].name: holds the control character U+0000 at 1{CONTROL}"),
    ("SyncInventory", _node(pool=LONG), "nodes[0].pool: is 254 characters long, at most 253"),
    ("SyncInventory", _node(labels={"k" * 318: "v"}),
     "nodes[0].labels: a key of is 318 characters long, at most 317"),
    ("SyncInventory", _node(labels={"zone": "z\u202a"}),
     f"nodes[0].labels[zone]: holds the control character U+202A at 1{CONTROL}"),
    ("SyncInventory", _node(gpu_product="A" * 65),
     "nodes[0].gpus[0].product: is 65 characters long, at most 64"),
    ("SyncInventory", _node(profile="3g.40gb" + "x" * 26),
     "nodes[0].gpus[0].mig_instances[0].profile: is 33 characters long, at most 32"),
    ("SyncInventory", _node(held_model="chat\r"),
     f"nodes[0].gpus[0].mig_instances[0].model: holds the control character U+000D at 4"
     f"{CONTROL}"),
    ("PlanFleet", _plan(model="m" * 201), "models[0].model: is 201 characters long, at most 200"),
    ("PlanFleet", _plan(tenant="\u061cacme"),
     f"models[0].tenant: holds the control character U+061C at 0{CONTROL}"),
    ("PlanFleet", _plan(point="A" * 65),
     "models[0].profile[0].product: is 65 characters long, at most 64"),
    ("PlanFleet", _plan(pool="A100\x85"),
     f"pools[0].product: holds the control character U+0085 at 4{CONTROL}"),
    ("PlanFleet", _plan(warm="A" * 65), "warm.pools[0].product: is 65 characters long, at most 64"),
], ids=lambda value: value if isinstance(value, str) and value[0].isupper() else None)
def test_every_request_refuses_a_hostile_name_as_invalid_argument_naming_the_field(
        stub: pb_grpc.PlacementStub, method: str, request_: Any, details: str) -> None:
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]), timeout=5)
    assert _refused(lambda: getattr(stub, method)(request_, timeout=10)) == (
        grpc.StatusCode.INVALID_ARGUMENT, details)
    assert stub.ListBindings(pb.ListBindingsRequest(), timeout=5).bindings == []
    assert stub.GetPlan(pb.GetPlanRequest(), timeout=5).revision == 0
