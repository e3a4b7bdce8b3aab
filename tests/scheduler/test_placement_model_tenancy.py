"""Place against the store's models table, over real gRPC on 127.0.0.1: a token scoped to
tenants places only the models the table lists under them (PERMISSION_DENIED naming the model,
as DemandHints refuses a hint for it), a Place naming another tenant than its listed model's is
INVALID_ARGUMENT naming ``tenant``, and a model the table does not list is placed as ever."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from placement_builders import make_node, make_place
from sqlalchemy import text

from controlplane.placement_api import journaled_engine, listed_tenant
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.domain.errors import Unavailable
from scheduler.security import TransportSecurity
from scheduler.server import create_server, stop

CHAT = "llama-3-8b-chat"  # listed under tenant acme
VISION = "resnet50-vision"  # listed under tenant globex
T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
TOKENS = "ops-token\nacme-token tenant=acme,initech\nglobex-token tenant=globex\n"


@dataclass
class Served:
    stub: pb_grpc.PlacementStub
    store: Store

    def place(self, token: str, workload_id: str, model: str, tenant: str) -> pb.PlaceResponse:
        reply: pb.PlaceResponse = self.stub.Place(
            make_place(workload_id, model=model, tenant=tenant), timeout=5,
            metadata=(("authorization", f"Bearer {token}"),))
        return reply

    def refused(self, token: str, workload_id: str, model: str, tenant: str) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as err:
            self.place(token, workload_id, model, tenant)
        return err.value

    def bound(self) -> set[str]:
        reply = self.stub.ListBindings(pb.ListBindingsRequest(), timeout=5,
                                       metadata=(("authorization", "Bearer ops-token"),))
        return {b.workload_id for b in reply.bindings}


@pytest.fixture
def served(tmp_path: Path, sqlite_url: str) -> Iterator[Served]:
    """A placement server on a store whose models table lists the demo's models; four nodes."""
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKENS)
    store = Store.open(sqlite_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    engine = journaled_engine(store, VirtualClock(T0), "test")
    server, port = create_server("127.0.0.1:0", engine,
                                 security=TransportSecurity(token_file=token_file))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        fixture = Served(pb_grpc.PlacementStub(channel), store)
        nodes = [make_node(f"n{i}") for i in range(4)]
        fixture.stub.SyncInventory(pb.SyncInventoryRequest(nodes=nodes), timeout=5,
                                   metadata=(("authorization", "Bearer ops-token"),))
        yield fixture
    finally:
        channel.close()
        stop(server, grace_s=0.5)
        store.engine.dispose()


def test_a_scoped_token_may_not_place_a_model_listed_under_another_tenant(
        served: Served) -> None:
    denied = served.refused("acme-token", "a-4", VISION, "acme")
    assert denied.code() is grpc.StatusCode.PERMISSION_DENIED
    assert denied.details() == (
        f"model: {VISION} is not a model of the caller's tenants (acme, initech)")
    assert "a-4" not in served.bound()


def test_a_place_naming_another_tenant_than_its_listed_models_is_refused_naming_tenant(
        served: Served) -> None:
    for token, tenant in (("ops-token", "globex"), ("acme-token", "initech")):
        invalid = served.refused(token, f"x-{token}", CHAT, tenant)
        assert invalid.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert invalid.details() == (f"tenant: {tenant!r} is not the tenant of model {CHAT!r}: "
                                     "the models table lists it under 'acme'")
    assert not served.bound()


def test_a_listed_model_is_placed_for_its_own_tenant_and_an_unlisted_one_as_before(
        served: Served) -> None:
    assert served.place("acme-token", "a-1", CHAT, "acme").binding.tenant == "acme"
    assert served.place("globex-token", "b-1", VISION, "globex").binding.tenant == "globex"
    assert served.place("acme-token", "a-2", "free-text-model", "acme").binding.node
    assert served.place("ops-token", "o-1", VISION, "").binding.tenant == ""  # not stated
    assert served.bound() == {"a-1", "b-1", "a-2", "o-1"}


def test_a_models_table_that_cannot_be_read_fails_the_lookup_as_unavailable(
        sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    try:
        with store.engine.begin() as connection:
            connection.execute(text("DROP TABLE models"))
        with pytest.raises(Unavailable, match="models table: cannot read the tenant of model"):
            listed_tenant(store)(CHAT)
    finally:
        store.engine.dispose()
