"""Tenant-scoped bearer tokens on the placement API, over real gRPC on 127.0.0.1: a token scoped
to tenants acts only on their bindings (PERMISSION_DENIED or ``unknown`` otherwise, the other
tenant's binding untouched) and never on the whole fleet; an unscoped token does everything."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from placement_builders import make_node, make_place

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.domain.model import WorkloadSpec
from scheduler.engine import PlacementEngine
from scheduler.metrics import PlacementMetrics
from scheduler.security import BearerTokens, SecurityFileError, TransportSecurity
from scheduler.server import create_server, stop
from scheduler.tenancy import TokenLineError, parse_token_file

T0_S = 1_800_000_000.0
TOKENS = "ops-token\nalpha-token tenant=alpha\nbeta-token tenant=beta,gamma\n"


@dataclass
class Served:
    channel: grpc.Channel
    token_file: Path
    metrics: PlacementMetrics
    now_s: list[float]

    def call(self, method: str, request: object, token: str, **kwargs: object) -> object:
        rpc: Callable[..., object] = getattr(pb_grpc.PlacementStub(self.channel), method)
        return rpc(request, timeout=5, metadata=(("authorization", f"Bearer {token}"),),
                   **kwargs)

    def refused(self, method: str, request: object, token: str) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as err:
            self.call(method, request, token)
        return err.value

    def bindings(self) -> dict[str, pb.Binding]:
        """Every binding, as the unscoped token lists them."""
        reply = self.call("ListBindings", pb.ListBindingsRequest(), "ops-token")
        assert isinstance(reply, pb.ListBindingsResponse)
        return {b.workload_id: b for b in reply.bindings}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A server with the three tokens of TOKENS, four nodes and bindings ``a1`` (alpha, leased
    30 s), ``b1`` (beta, leased 30 s) and ``old`` (tenant "": journaled before tenants were)."""
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKENS)
    now_s = [T0_S]
    metrics = PlacementMetrics()
    server, port = create_server("127.0.0.1:0", PlacementEngine(now_s=lambda: now_s[0]),
                                 metrics=metrics, security=TransportSecurity(token_file=token_file))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    fixture = Served(channel, token_file, metrics, now_s)
    try:
        fixture.call("SyncInventory", pb.SyncInventoryRequest(
            nodes=[make_node(f"n{i}") for i in range(4)]), "ops-token")
        for workload_id, tenant in (("a1", "alpha"), ("b1", "beta"), ("old", "")):
            place = make_place(workload_id, tenant=tenant)
            place.lease_s = 30
            fixture.call("Place", place, "ops-token")
        yield fixture
    finally:
        channel.close()
        stop(server, grace_s=0.5)


def _denied_count(served: Served, method: str) -> float:
    value = served.metrics.registry.get_sample_value(
        "headroom_placement_requests_total", {"method": method, "code": "PERMISSION_DENIED"})
    return value or 0.0


# ------------------------------------------------------------------ the token file


def test_token_lines_without_a_scope_are_unscoped_and_with_tenant_are_scoped_to_those() -> None:
    parsed = parse_token_file(b"ops\n\n  alpha tenant=alpha \r\nboth\ttenant=a,b\nops\n")
    assert parsed == ((b"ops", None), (b"alpha", frozenset({"alpha"})),
                      (b"both", frozenset({"a", "b"})))


@pytest.mark.parametrize(("line", "problem"), [
    ("SECRET-9 tenant=", "an empty tenant name"),
    ("SECRET-9 tenant=a,,b", "an empty tenant name"),
    ("SECRET-9 team=a", "only tenant= may follow"),
    ("SECRET-9 with-space", "only tenant= may follow"),
    ("SECRET-9 tenant=a tenant=b", "more than one field"),
    ("tenant=SECRET-9", "no token before tenant="),
    ("ops-token tenant=SECRET-9", "the token of line 1 with another scope"),
    ("SECRET-9\u00e9", "not printable ASCII"),
    ("SECRET\x01-9 tenant=a", "not printable ASCII"),
])
def test_a_malformed_token_line_is_named_by_its_line_number_without_its_text(
        tmp_path: Path, line: str, problem: str) -> None:
    token_file = tmp_path / "tokens"
    token_file.write_text(f"ops-token\n\n{line}\n")
    with pytest.raises(SecurityFileError) as err:
        create_server("127.0.0.1:0", security=TransportSecurity(token_file=token_file))
    message = str(err.value)
    assert err.value.setting == "token_file" and err.value.path == token_file
    assert str(token_file) in message and "line 3: " in message and problem in message
    assert "SECRET" not in message


@pytest.mark.parametrize("comment", [
    "# the operators' token, rotated monthly",  # before: "more than one field after the token"
    "#revoked-2026",  # before: accepted as a token
    "   # indented",
])
def test_a_hash_starts_a_comment_line_as_in_the_client_identities_file(
        tmp_path: Path, comment: str) -> None:
    text = f"{comment}\nops-token\n"
    assert parse_token_file(text.encode()) == ((b"ops-token", None),)
    token_file = tmp_path / "tokens"
    token_file.write_text(text)
    server, port = create_server("127.0.0.1:0", security=TransportSecurity(token_file=token_file))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.PlacementStub(channel)
        assert stub.GetPlan(pb.GetPlanRequest(), timeout=5,
                            metadata=(("authorization", "Bearer ops-token"),)).revision == 0
        with pytest.raises(grpc.RpcError) as err:
            stub.GetPlan(pb.GetPlanRequest(), timeout=5,
                         metadata=(("authorization", f"Bearer {comment.split()[0]}"),))
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
    finally:
        channel.close()
        stop(server, grace_s=0.5)


def test_a_token_line_error_carries_its_line_number() -> None:
    with pytest.raises(TokenLineError) as err:
        parse_token_file(b"a\nb tenant=\n")
    assert err.value.line_no == 2


def test_a_rewritten_token_file_with_a_malformed_line_keeps_the_previous_tokens_and_scopes(
        served: Served) -> None:
    served.token_file.write_text("ops-token\nalpha-token tenant=\n")
    assert served.call("Place", make_place("a2", tenant="alpha"), "alpha-token")
    denied = served.refused("Place", make_place("a3", tenant="beta"), "alpha-token")
    assert denied.code() is grpc.StatusCode.PERMISSION_DENIED


def test_a_rewritten_token_file_gives_a_token_its_new_scope_without_restart(
        served: Served) -> None:
    served.token_file.write_text("ops-token\nalpha-token tenant=beta,delta\n")
    os.utime(served.token_file, ns=(1, 1))  # another stamp, however fast the rewrite
    assert served.call("Place", make_place("b2", tenant="beta"), "alpha-token")
    denied = served.refused("Place", make_place("a2", tenant="alpha"), "alpha-token")
    assert denied.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "tenant 'alpha'" in (denied.details() or "")
    gone = served.refused("Place", make_place("x", tenant="beta"), "beta-token")
    assert gone.code() is grpc.StatusCode.UNAUTHENTICATED


def test_the_bearer_tokens_say_which_scope_a_header_carries(tmp_path: Path) -> None:
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKENS)
    tokens = BearerTokens(token_file)
    alpha, ops = tokens.accepted("Bearer alpha-token"), tokens.accepted(b"bearer ops-token")
    assert alpha is not None and alpha.scope == frozenset({"alpha"})
    assert ops is not None and ops.scope is None
    assert tokens.accepted("Bearer alpha-token tenant=alpha") is None
    assert tokens.accepted(None) is None and not tokens.accepts("Bearer nope")


# ------------------------------------------------------------------ Place


def test_a_scoped_token_places_for_its_tenants_and_not_for_another_or_none(
        served: Served) -> None:
    for workload_id, tenant in (("b2", "beta"), ("g2", "gamma")):
        reply = served.call("Place", make_place(workload_id, tenant=tenant), "beta-token")
        assert isinstance(reply, pb.PlaceResponse) and reply.binding.tenant == tenant
    for workload_id, tenant in (("x1", "alpha"), ("x2", "")):
        denied = served.refused("Place", make_place(workload_id, tenant=tenant), "beta-token")
        assert denied.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "tenant" in (denied.details() or "") and "beta, gamma" in (denied.details() or "")
    assert {"b2", "g2"} <= served.bindings().keys()
    assert not {"x1", "x2"} & served.bindings().keys()
    assert _denied_count(served, "Place") == 2


def test_an_unscoped_token_places_for_any_tenant_and_for_none(served: Served) -> None:
    for workload_id, tenant in (("o1", "alpha"), ("o2", "zeta"), ("o3", "")):
        assert served.call("Place", make_place(workload_id, tenant=tenant), "ops-token")
    assert {"o1", "o2", "o3"} <= served.bindings().keys()


def test_an_already_exists_place_shows_the_binding_held_only_to_a_caller_of_its_tenant(
        served: Served) -> None:
    from scheduler.service import BINDING_TRAILER

    for token, tenant, shown in (("beta-token", "beta", False), ("alpha-token", "alpha", True),
                                 ("ops-token", "", True)):
        refused = served.refused("Place", make_place("a1", tenant=tenant), token)
        assert refused.code() is grpc.StatusCode.ALREADY_EXISTS
        keys = [m.key for m in refused.trailing_metadata() or ()]
        assert (BINDING_TRAILER in keys) is shown
    assert served.bindings()["a1"].tenant == "alpha"


# ------------------------------------------------------------------ Release


def test_a_scoped_token_cannot_release_another_tenants_binding_which_stays_bound(
        served: Served) -> None:
    for workload_id in ("b1", "old"):
        denied = served.refused("Release", pb.ReleaseRequest(workload_id=workload_id),
                                "alpha-token")
        assert denied.code() is grpc.StatusCode.PERMISSION_DENIED
        assert repr(workload_id) in (denied.details() or "")
    assert {"b1", "old"} <= served.bindings().keys()
    assert _denied_count(served, "Release") == 2


def test_a_scoped_token_releases_its_own_binding_and_ids_bound_to_nobody(
        served: Served) -> None:
    assert served.call("Release", pb.ReleaseRequest(workload_id="a1"), "alpha-token") == \
        pb.ReleaseResponse()
    assert served.call("Release", pb.ReleaseRequest(workload_id="ghost"), "alpha-token") == \
        pb.ReleaseResponse()
    assert served.bindings().keys() == {"b1", "old"}
    empty = served.refused("Release", pb.ReleaseRequest(), "alpha-token")
    assert empty.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_an_unscoped_token_releases_any_tenants_binding(served: Served) -> None:
    for workload_id in ("a1", "b1", "old"):
        served.call("Release", pb.ReleaseRequest(workload_id=workload_id), "ops-token")
    assert served.bindings() == {}


# ------------------------------------------------------------------ RenewLeases, RankReplicas


def test_a_scoped_token_renewing_another_tenants_lease_finds_it_unknown_and_leaves_it(
        served: Served) -> None:
    served.now_s[0] = T0_S + 10
    reply = served.call("RenewLeases", pb.RenewLeasesRequest(
        workload_ids=["b1", "a1", "old", "ghost", "a1"]), "alpha-token")
    assert isinstance(reply, pb.RenewLeasesResponse)
    assert [(b.workload_id, b.lease_expires_at_s) for b in reply.renewed] == [
        ("a1", T0_S + 40), ("a1", T0_S + 40)]  # as often as asked
    assert list(reply.unknown) == ["b1", "old", "ghost"]
    held = served.bindings()
    assert held["b1"].lease_expires_at_s == held["old"].lease_expires_at_s == T0_S + 30
    assert held["a1"].lease_expires_at_s == T0_S + 40


def test_a_scoped_token_renewing_only_other_tenants_ids_renews_nothing(served: Served) -> None:
    served.now_s[0] = T0_S + 10
    reply = served.call("RenewLeases", pb.RenewLeasesRequest(workload_ids=["b1"]),
                        "alpha-token")
    assert isinstance(reply, pb.RenewLeasesResponse)
    assert not reply.renewed and list(reply.unknown) == ["b1"]
    assert served.bindings()["b1"].lease_expires_at_s == T0_S + 30


def test_a_renewal_with_an_empty_id_is_refused_whole_naming_its_index(served: Served) -> None:
    served.now_s[0] = T0_S + 10
    bad = served.refused("RenewLeases", pb.RenewLeasesRequest(workload_ids=["b1", "a1", ""]),
                         "alpha-token")
    assert bad.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "workload_ids[2]" in (bad.details() or "")
    held = served.bindings()
    assert held["b1"].lease_expires_at_s == held["a1"].lease_expires_at_s == T0_S + 30


def test_an_unscoped_token_renews_every_tenants_lease(served: Served) -> None:
    served.now_s[0] = T0_S + 10
    reply = served.call("RenewLeases", pb.RenewLeasesRequest(workload_ids=["a1", "b1", "old"]),
                        "ops-token")
    assert isinstance(reply, pb.RenewLeasesResponse)
    assert [b.workload_id for b in reply.renewed] == ["a1", "b1", "old"] and not reply.unknown


def test_a_scoped_token_ranking_replicas_finds_other_tenants_ids_unknown(
        served: Served) -> None:
    replicas = [pb.ReplicaLoad(workload_id=w) for w in ("b1", "a1", "old", "ghost")]
    reply = served.call("RankReplicas", pb.RankReplicasRequest(replicas=replicas),
                        "alpha-token")
    assert isinstance(reply, pb.RankReplicasResponse)
    assert [r.workload_id for r in reply.ranked] == ["a1"] and reply.ranked[0].node
    assert list(reply.unknown) == ["b1", "old", "ghost"]
    only_others = served.call("RankReplicas", pb.RankReplicasRequest(replicas=replicas[:1]),
                              "alpha-token")
    assert isinstance(only_others, pb.RankReplicasResponse)
    assert not only_others.ranked and list(only_others.unknown) == ["b1"]
    unscoped = served.call("RankReplicas", pb.RankReplicasRequest(replicas=replicas),
                           "ops-token")
    assert isinstance(unscoped, pb.RankReplicasResponse)
    assert {r.workload_id for r in unscoped.ranked} == {"a1", "b1", "old"}


def test_a_scoped_ranking_with_a_bad_replica_names_it_by_its_index_in_the_request(
        served: Served) -> None:
    replicas = [pb.ReplicaLoad(workload_id="b1"), pb.ReplicaLoad(workload_id="a1", queue_depth=-1)]
    bad = served.refused("RankReplicas", pb.RankReplicasRequest(replicas=replicas),
                         "alpha-token")
    assert bad.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "replicas[1].queue_depth" in (bad.details() or "")


# ------------------------------------------------------------------ ListBindings


def test_a_scoped_token_lists_only_its_tenants_bindings(served: Served) -> None:
    served.call("Place", make_place("g1", tenant="gamma"), "ops-token")
    for token, expected in (("alpha-token", ["a1"]), ("beta-token", ["b1", "g1"]),
                            ("ops-token", ["a1", "b1", "g1", "old"])):
        reply = served.call("ListBindings", pb.ListBindingsRequest(), token)
        assert isinstance(reply, pb.ListBindingsResponse)
        assert [b.workload_id for b in reply.bindings] == expected
    filtered = served.call("ListBindings", pb.ListBindingsRequest(workload_prefix="g"),
                           "beta-token")
    assert isinstance(filtered, pb.ListBindingsResponse)
    assert [b.workload_id for b in filtered.bindings] == ["g1"]


# ------------------------------------------------------------------ the whole fleet


def test_a_scoped_token_may_not_sync_the_inventory_or_plan_the_fleet(served: Served) -> None:
    sync = served.refused("SyncInventory", pb.SyncInventoryRequest(), "alpha-token")
    plan = served.refused("PlanFleet", pb.PlanFleetRequest(), "alpha-token")
    for denied, method in ((sync, "SyncInventory"), (plan, "PlanFleet")):
        assert denied.code() is grpc.StatusCode.PERMISSION_DENIED
        assert method in (denied.details() or "") and "alpha" in (denied.details() or "")
        assert _denied_count(served, method) == 1
    assert served.bindings().keys() == {"a1", "b1", "old"}  # the inventory was not emptied


def test_an_unscoped_token_syncs_the_inventory_and_plans_the_fleet(served: Served) -> None:
    synced = served.call("SyncInventory", pb.SyncInventoryRequest(
        nodes=[make_node(f"n{i}") for i in range(4)]), "ops-token")
    assert isinstance(synced, pb.SyncInventoryResponse) and synced.nodes == 4
    plan = served.call("PlanFleet", pb.PlanFleetRequest(), "ops-token")
    assert isinstance(plan, pb.FleetPlan) and plan.revision == 1


def test_a_scoped_token_reads_and_watches_the_fleet_plan(served: Served) -> None:
    served.call("PlanFleet", pb.PlanFleetRequest(), "ops-token")
    plan = served.call("GetPlan", pb.GetPlanRequest(), "alpha-token")
    assert isinstance(plan, pb.FleetPlan) and plan.revision == 1
    stream = served.call("WatchPlan", pb.WatchPlanRequest(), "alpha-token")
    assert isinstance(stream, Iterator)
    assert next(stream).revision == 1
    stream.cancel()  # type: ignore[attr-defined]


def test_a_scoped_token_may_use_reflection_a_streaming_service_beside_placement(
        served: Served) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    reflect = reflection_pb2_grpc.ServerReflectionStub(served.channel)
    replies = reflect.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5,
        metadata=(("authorization", "Bearer alpha-token"),))
    names = {s.name for s in next(iter(replies)).list_services_response.service}
    assert "headroom.v1.Placement" in names


class _NotingThreads(PlacementEngine):
    """A real engine that notes the thread each Place runs on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def place(self, request: pb.PlaceRequest | WorkloadSpec,
              still_wanted: Callable[[], bool] | None = None) -> pb.PlaceResponse:
        self.threads.append(threading.current_thread().name)
        return super().place(request, still_wanted)


def test_a_scoped_call_still_runs_on_the_fast_pool_and_leaves_no_scope_behind(
        tmp_path: Path) -> None:
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKENS)
    engine = _NotingThreads()
    server, port = create_server("127.0.0.1:0", engine, fast_workers=1,
                                 security=TransportSecurity(token_file=token_file))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            served = Served(channel, token_file, PlacementMetrics(), [T0_S])
            served.call("SyncInventory", pb.SyncInventoryRequest(nodes=[make_node("n0")]),
                        "ops-token")
            served.call("Place", make_place("a1", tenant="alpha"), "alpha-token")
            # the same single fast thread next serves an unscoped call: unscoped there
            served.call("Place", make_place("z1", tenant="zeta"), "ops-token")
    finally:
        stop(server, grace_s=0.5)
    assert len(engine.threads) == 2
    assert all(name.startswith("placement-fast") for name in engine.threads)


def test_on_a_store_a_scoped_token_cannot_renew_or_release_a_binding_another_server_made(
        tmp_path: Path, sqlite_url: str) -> None:
    from datetime import UTC, datetime

    from controlplane.sim.clock import VirtualClock
    from controlplane.store import Store
    from controlplane.store.placement_journal import SqlPlacementJournal, live_bindings

    token_file = tmp_path / "tokens"
    token_file.write_text(TOKENS)
    store = Store.open(sqlite_url, migrate=True)
    clock = VirtualClock(datetime.fromtimestamp(T0_S, UTC))
    now_s = [T0_S]
    servers = [create_server("127.0.0.1:0", PlacementEngine(
        journal=SqlPlacementJournal(store.engine, holder, clock), now_s=lambda: now_s[0]),
        security=TransportSecurity(token_file=token_file)) for holder in ("first", "second")]
    channels = [grpc.insecure_channel(f"127.0.0.1:{port}") for _, port in servers]
    try:
        first, second = (Served(c, token_file, PlacementMetrics(), [T0_S]) for c in channels)
        for each in (first, second):
            each.call("SyncInventory", pb.SyncInventoryRequest(nodes=[make_node("n0")]),
                      "ops-token")
        place = make_place("b1", tenant="beta")
        place.lease_s = 30
        first.call("Place", place, "beta-token")  # the second server has not read it yet
        now_s[0] = T0_S + 10
        renewed = second.call("RenewLeases", pb.RenewLeasesRequest(workload_ids=["b1"]),
                              "alpha-token")
        assert isinstance(renewed, pb.RenewLeasesResponse)
        assert not renewed.renewed and list(renewed.unknown) == ["b1"]
        denied = second.refused("Release", pb.ReleaseRequest(workload_id="b1"), "alpha-token")
        assert denied.code() is grpc.StatusCode.PERMISSION_DENIED
        with store.engine.connect() as connection:
            held = [(b.workload_id, b.lease_expires_at_s) for b, _ in live_bindings(connection)]
        assert held == [("b1", T0_S + 30)]  # never renewed nor released
    finally:
        for channel in channels:
            channel.close()
        for server, _ in servers:
            stop(server, grace_s=0.5)
        store.engine.dispose()


def test_a_scoped_release_is_checked_against_the_binding_held_when_it_is_freed(
        sqlite_url: str) -> None:
    # the id was released and placed again for another tenant by another server after this
    # one last read the journal: the check is made where the binding is freed, not before
    from datetime import UTC, datetime

    from controlplane.sim.clock import VirtualClock
    from controlplane.store import Store
    from controlplane.store.placement_journal import SqlPlacementJournal, live_bindings
    from scheduler.tenancy import PermissionDenied

    store = Store.open(sqlite_url, migrate=True)
    clock = VirtualClock(datetime.fromtimestamp(T0_S, UTC))
    stale, other = (PlacementEngine(journal=SqlPlacementJournal(store.engine, holder, clock),
                                    now_s=lambda: T0_S) for holder in ("stale", "other"))
    try:
        for engine in (stale, other):
            engine.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]))
        stale.place(make_place("w1", tenant="alpha"))
        other.refresh()
        other.release(pb.ReleaseRequest(workload_id="w1"))
        other.place(make_place("w1", tenant="beta"))
        with pytest.raises(PermissionDenied, match="w1"):
            stale.release(pb.ReleaseRequest(workload_id="w1"), frozenset({"alpha"}))
        renewed = stale.renew_leases(pb.RenewLeasesRequest(workload_ids=["w1"]),
                                     frozenset({"alpha"}))
        assert list(renewed.unknown) == ["w1"] and not renewed.renewed
        with store.engine.connect() as connection:
            held = [(b.workload_id, b.tenant) for b, _ in live_bindings(connection)]
        assert held == [("w1", "beta")]
    finally:
        store.engine.dispose()
