"""The DemandHints gRPC service over real gRPC on loopback, on a real SQLite store: a serving
layer announces demand, lists and withdraws it; a refused hint is INVALID_ARGUMENT naming the
proto field and stores nothing; an unknown id is NOT_FOUND."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from sqlalchemy import create_engine, text
from tick_builders import sample_tick_report

from controlplane.adapters.keda import KedaScalerServicer, keda_registrar
from controlplane.autoscaling.core import Budgets
from controlplane.autoscaling.hint_capacity import KnownCapacity
from controlplane.cli.placement import _kept_in_store
from controlplane.domain.desired import PoolSpec
from controlplane.domain.lease import LeaseRecord
from controlplane.domain.profile import ProfileCorrection
from controlplane.domain.timestamps import utc_text
from controlplane.fleet_lease import FLEET_LEASE
from controlplane.runtime import SimRuntime, hints_api
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.hints import SqlDemandHints, remove_model_and_hints
from controlplane.store.lease import SqlLeaseStore
from controlplane.store.pauses import SqlModelPauses
from protos.headroom.v1 import hints_pb2 as pb
from protos.headroom.v1 import hints_pb2_grpc as pb_grpc
from scheduler.security import TransportSecurity
from scheduler.server import create_server, stop

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
CHAT = "llama-3-8b-chat"  # tenant acme
VISION = "resnet50-vision"  # tenant globex
Api = tuple[pb_grpc.DemandHintsStub, Store, VirtualClock]


@contextmanager
def _served(store_url: str, known: KnownCapacity | None = None) -> Iterator[Api]:
    """The DemandHints service of a placement server on the store (the demo's models), its
    clock at T0; with ``known``, a server that knows its fleet's pools."""
    store = Store.open(store_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    clock = VirtualClock(T0)
    server, port = create_server("127.0.0.1:0",
                                 extra_servicers=[hints_api(store, clock, known)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield pb_grpc.DemandHintsStub(channel), store, clock
    finally:
        channel.close()
        stop(server, 0)
        store.engine.dispose()


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with _served(store_url) as served:
        yield served


def _s(minutes: float) -> float:
    return (T0 + timedelta(minutes=minutes)).timestamp()


def test_a_hint_is_announced_listed_and_withdrawn_over_grpc(api: Api) -> None:
    stub, store, clock = api
    added = stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=600.0, start_unix_s=_s(15),
                                           end_unix_s=_s(75), reason="campaign"))
    assert added.id > 0
    assert (added.model, added.rate_rps, added.start_unix_s, added.end_unix_s, added.reason) == (
        CHAT, 600.0, _s(15), _s(75), "campaign")
    now = stub.AddHint(pb.AddHintRequest(model="bert-embed", rate_rps=2000.0, end_unix_s=_s(30)))
    assert now.start_unix_s == _s(0)  # start 0: now, by the service's clock
    assert [h.id for h in stub.ListHints(pb.ListHintsRequest()).hints] == [now.id, added.id]
    assert [h.id for h in stub.ListHints(pb.ListHintsRequest(model=CHAT)).hints] == [added.id]
    clock.advance(45 * 60)  # the bert hint has ended
    assert [h.id for h in stub.ListHints(pb.ListHintsRequest()).hints] == [added.id]
    assert len(stub.ListHints(pb.ListHintsRequest(include_ended=True)).hints) == 2
    assert stub.RemoveHint(pb.RemoveHintRequest(id=added.id)) == added
    assert [h.model for h in SqlDemandHints(store.engine).hints()] == ["bert-embed"]



def test_a_hint_whose_model_the_models_table_no_longer_lists_is_listed_with_model_listed_false(
        api: Api) -> None:
    stub, store, _ = api
    kept = stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=600.0, end_unix_s=_s(60)))
    other = stub.AddHint(pb.AddHintRequest(model=VISION, rate_rps=300.0, start_unix_s=_s(5),
                                           end_unix_s=_s(60)))
    assert kept.HasField("model_listed") and kept.model_listed  # AddHint: always listed
    # `headroom models remove --keep-hints`: the hint stays
    assert remove_model_and_hints(store.engine, CHAT, datetime.now(UTC), keep_hints=True)
    listed = stub.ListHints(pb.ListHintsRequest()).hints
    assert [(h.id, h.HasField("model_listed"), h.model_listed) for h in listed] == [
        (kept.id, True, False), (other.id, True, True)]
    removed = stub.RemoveHint(pb.RemoveHintRequest(id=kept.id))
    assert (removed.id, removed.model_listed) == (kept.id, False)
    assert stub.RemoveHint(pb.RemoveHintRequest(id=other.id)) == other


def test_a_retried_add_returns_the_hint_it_added_so_removing_that_id_withdraws_it(
        api: Api) -> None:
    stub, store, clock = api
    request_ = pb.AddHintRequest(model=VISION, rate_rps=300.0, start_unix_s=_s(10),
                                 end_unix_s=_s(120), reason="campaign-42")
    first = stub.AddHint(request_)
    clock.advance(60)  # the reply was lost; the gateway retries a minute later
    retry = stub.AddHint(request_)
    assert retry == first  # before: a second hint, and removing it left the first in force
    started = stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=50.0, end_unix_s=_s(60)))
    clock.advance(5)
    assert stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=50.0, end_unix_s=_s(60))
                        ) == started  # no start: "now", which the stored one already covers
    other = stub.AddHint(pb.AddHintRequest(model=VISION, rate_rps=300.0, start_unix_s=_s(10),
                                           end_unix_s=_s(120), reason="campaign-43"))
    assert other.id not in (first.id, started.id)  # another reason: another hint
    stub.RemoveHint(pb.RemoveHintRequest(id=retry.id))
    assert [h.hint_id for h in SqlDemandHints(store.engine).hints()] == [started.id, other.id]
    clock.advance(2 * 3600)  # once the hint has ended, the same request adds a new one
    assert stub.AddHint(pb.AddHintRequest(model=VISION, rate_rps=300.0, start_unix_s=_s(125),
                                          end_unix_s=_s(240))).id > other.id


@pytest.mark.parametrize(("request_", "message"), [
    (pb.AddHintRequest(model="nope", rate_rps=5, end_unix_s=_s(60)),
     "model: model 'nope' is not in the store's models table (known: bert-embed, "),
    (pb.AddHintRequest(model=CHAT, rate_rps=-5, end_unix_s=_s(60)),
     "rate_rps: must be a number in (0, 1e+07], got -5.0"),
    (pb.AddHintRequest(model=CHAT, end_unix_s=_s(60)),
     "rate_rps: must be a number in (0, 1e+07], got 0.0"),
    (pb.AddHintRequest(model=CHAT, rate_rps=float("nan"), end_unix_s=_s(60)),
     "rate_rps: must be a number"),
    (pb.AddHintRequest(model=CHAT, rate_rps=5, end_unix_s=_s(-1)), "end_unix_s: already past"),
    (pb.AddHintRequest(model=CHAT, rate_rps=5), "end_unix_s: required (seconds since 1970 "
                                                "when the hint ends; 0 is the field omitted)"),
    (pb.AddHintRequest(model=CHAT, rate_rps=5, start_unix_s=_s(90), end_unix_s=_s(60)),
     "start_unix_s/end_unix_s: demand hint for llama-3-8b-chat: end_at"),
    (pb.AddHintRequest(model=CHAT, rate_rps=5, start_unix_s=-1, end_unix_s=_s(60)),
     "start_unix_s: -1.0 is not a time in seconds since 1970"),
    (pb.AddHintRequest(model=CHAT, rate_rps=5, end_unix_s=float("inf")),
     "end_unix_s: inf is not a time"),
    (pb.AddHintRequest(model=CHAT, rate_rps=5, end_unix_s=_s(60), reason="x" * 501),
     "reason: 501 characters, at most 500"),
    (pb.AddHintRequest(model="m" * 20_000, rate_rps=5, end_unix_s=_s(60)),
     "model: the model name is 20000 characters long, at most 200"),
    (pb.AddHintRequest(model="chat\u202e", rate_rps=5, end_unix_s=_s(60)),
     "model: the model name holds the control character U+202E at 4"),
    (pb.AddHintRequest(model=CHAT, rate_rps=5, end_unix_s=_s(60), reason="launch\x00"),
     "reason: holds a NUL character at 6; the store's text cannot hold it"),
], ids=["unknown model", "negative rate", "rate omitted (0)", "nan rate", "past end", "no end",
        "end before start",
        "negative start", "infinite end", "reason too long", "20000-character model",
        "bidi control in model", "NUL in reason"])
def test_a_refused_hint_names_the_proto_field_and_stores_nothing(
        api: Api, request_: pb.AddHintRequest, message: str) -> None:
    stub, store, _ = api
    with pytest.raises(grpc.RpcError) as caught:
        stub.AddHint(request_)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith(message)
    assert SqlDemandHints(store.engine).hints() == ()


@pytest.mark.parametrize(("model", "message"), [
    ("m" * 201, "model: is 201 characters long, at most 200"),
    ("chat\x00", "model: holds the control character U+0000 at 4"),
])
def test_listing_hints_of_a_model_name_the_api_refuses_is_invalid_argument_naming_model(
        api: Api, model: str, message: str) -> None:
    stub, _, _ = api
    with pytest.raises(grpc.RpcError) as caught:
        stub.ListHints(pb.ListHintsRequest(model=model))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith(message)


@pytest.mark.parametrize("hint_id", [42, 0, -1, 2**31, 2**63 - 1])
def test_removing_an_unknown_hint_is_not_found_even_past_the_id_columns_range(
        api: Api, hint_id: int) -> None:
    stub, _, _ = api
    with pytest.raises(grpc.RpcError) as caught:
        stub.RemoveHint(pb.RemoveHintRequest(id=hint_id))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert caught.value.details() == f"id: no demand hint with id {hint_id}"


@pytest.mark.postgres
def test_a_store_that_goes_down_is_unavailable_in_one_line_naming_what_failed(
        postgres_url: str) -> None:
    store = Store.open(postgres_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    server, port = create_server("127.0.0.1:0",
                                 extra_servicers=[hints_api(store, VirtualClock(T0))])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.DemandHintsStub(channel)
    base, _, name = postgres_url.rpartition("/")
    admin = create_engine(f"{base}/test", isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:  # the store's database goes away under the server
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        calls: list[tuple[Callable[[], object], str]] = [
                (lambda: stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=5, end_unix_s=_s(60))),
                 "read the models"),
                (lambda: stub.ListHints(pb.ListHintsRequest()), "read the demand hints"),
                (lambda: stub.RemoveHint(pb.RemoveHintRequest(id=1)), "read the models")]
        for call, what in calls:
            with pytest.raises(grpc.RpcError) as caught:
                call()
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            details = caught.value.details() or ""
            assert details.startswith(f"store: cannot {what}: ") and "\n" not in details
            assert f'database "{name}" does not exist' in details
    finally:
        admin.dispose()
        channel.close()
        stop(server, 0)
        store.engine.dispose()


def test_a_caller_scoped_to_tenants_announces_lists_and_withdraws_hints_of_its_own_models_only(
        store_url: str, tmp_path: Path) -> None:
    # the models table names each model's tenant: acme owns the chat model, globex the vision one
    token_file = tmp_path / "tokens"
    token_file.write_text("ops-token\nacme-token tenant=acme\n")
    store = Store.open(store_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    clock = VirtualClock(T0)
    server, port = create_server("127.0.0.1:0", extra_servicers=[hints_api(store, clock)],
                                 security=TransportSecurity(token_file=token_file))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.DemandHintsStub(channel)
    acme, ops = ((("authorization", f"Bearer {t}"),) for t in ("acme-token", "ops-token"))
    try:
        own = stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=600, end_unix_s=_s(60)),
                           metadata=acme)
        theirs = pb.AddHintRequest(model=VISION, rate_rps=90, end_unix_s=_s(60))
        with pytest.raises(grpc.RpcError) as denied:
            stub.AddHint(theirs, metadata=acme)
        assert denied.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert denied.value.details() == (
            f"model: {VISION} is not a model of the caller's tenants (acme)")
        with pytest.raises(grpc.RpcError) as unknown:  # lists acme's models, not globex's
            stub.AddHint(pb.AddHintRequest(model="nope", rate_rps=9, end_unix_s=_s(60)),
                         metadata=acme)
        assert unknown.value.details() == ("model: model 'nope' is not in the store's models "
                                           f"table (known: {CHAT}, mistral-7b-support)")
        other = stub.AddHint(theirs, metadata=ops)
        assert [h.id for h in stub.ListHints(pb.ListHintsRequest(), metadata=acme).hints] == [
            own.id]
        assert [h.id for h in stub.ListHints(pb.ListHintsRequest(), metadata=ops).hints] == [
            own.id, other.id]
        with pytest.raises(grpc.RpcError) as hidden:  # another tenant's hint, as an unknown id
            stub.RemoveHint(pb.RemoveHintRequest(id=other.id), metadata=acme)
        assert hidden.value.code() is grpc.StatusCode.NOT_FOUND
        assert hidden.value.details() == f"id: no demand hint with id {other.id}"
        assert stub.RemoveHint(pb.RemoveHintRequest(id=own.id), metadata=acme).id == own.id
        assert [h.hint_id for h in SqlDemandHints(store.engine).hints()] == [other.id]
    finally:
        channel.close()
        stop(server, 0)
        store.engine.dispose()


def test_reflection_lists_and_health_reports_the_hints_and_keda_services_beside_placement(
        store_url: str) -> None:
    """grpcurl and kubelet's gRPC probe see every service the server serves, not only Placement."""
    store = Store.open(store_url, migrate=True)
    keda = KedaScalerServicer(store, VirtualClock(T0))
    server, port = create_server("127.0.0.1:0", extra_servicers=[
        hints_api(store, VirtualClock(T0)), keda_registrar(keda)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        (answer,) = list(reflect.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
        assert {s.name for s in answer.list_services_response.service} == {
            "headroom.v1.Placement", "headroom.v1.DemandHints", "externalscaler.ExternalScaler",
            "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("headroom.v1.DemandHints", "externalscaler.ExternalScaler"):
            assert health.Check(health_pb2.HealthCheckRequest(service=service),
                                timeout=5).status == health_pb2.HealthCheckResponse.SERVING
    finally:
        keda.stopping.set()
        channel.close()
        stop(server, 0)
        store.engine.dispose()


#: two nodes of 8 A100s: the chat model's 2 replicas of 40 rps to a GPU hold 1024 rps at 0.8
TWO_A100_NODES = KnownCapacity((PoolSpec("a100-80gb", "A100-80GB", 8, 0, 2, 5.12),), Budgets(),
                               0.8)


@pytest.fixture
def checked(store_url: str) -> Iterator[Api]:
    """The service of a server that knows its fleet's pools (serve, demo, placement serve
    --config)."""
    with _served(store_url, TWO_A100_NODES) as served:
        yield served


def test_an_add_over_the_known_capacity_is_stored_and_its_reply_says_what_it_needs_and_the_limit(
        checked: Api) -> None:
    stub, store, _ = checked
    over = stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=2000.0, end_unix_s=_s(60)))
    assert over.id > 0 and over.HasField("capacity_rps") and over.capacity_rps == 1024.0
    assert over.capacity_warning == (
        f"{CHAT} at 2000 rps needs 63 replicas on 32 A100-80GB GPUs, but "
        "pool_max_nodes:a100-80gb holds at most 32 replicas on 16 GPUs (1024 rps at 40 rps per "
        "replica: the offline profile, no tick has recorded a correction of it); the hint is "
        "stored and the loop will scale the model as far as that allows")
    held = stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=1000.0, end_unix_s=_s(60)))
    assert (held.capacity_rps, held.capacity_warning) == (1024.0, "")
    assert [(h.rate_rps, h.hint_id) for h in SqlDemandHints(store.engine).hints()] == [
        (2000.0, over.id), (1000.0, held.id)]
    listed = stub.ListHints(pb.ListHintsRequest()).hints  # AddHint's reply only
    assert [h.HasField("capacity_rps") or h.capacity_warning != "" for h in listed] == [
        False, False]


def test_an_add_is_counted_on_the_profile_the_last_tick_corrected_as_the_loop_sizes_with(
        checked: Api) -> None:
    stub, store, _ = checked
    halved = ProfileCorrection(CHAT, 40.0, 20.0, 0.5, 31, "over_slo: 31 of 120 samples")
    store.save_tick(replace(sample_tick_report(), profiles=(halved,)))
    added = stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=1000.0, end_unix_s=_s(60)))
    # the offline 40 rps per replica hold it (32 replicas, 1024 rps: before, no warning); the
    # loop sizes 20 rps per replica: 63 replicas needed, 32 held for 512 rps
    assert added.capacity_rps == 512.0
    assert added.capacity_warning == (
        f"{CHAT} at 1000 rps needs 63 replicas on 32 A100-80GB GPUs, but "
        "pool_max_nodes:a100-80gb holds at most 32 replicas on 16 GPUs (512 rps at 20 rps per "
        "replica: the profile the last tick corrected online, 0.5x the offline 40); the hint is "
        "stored and the loop will scale the model as far as that allows")


def test_an_add_on_a_paused_model_is_stored_and_its_reply_says_the_pause_holds_until_resumed(
        api: Api) -> None:
    stub, store, _ = api  # a server that knows no pools: the pause is the store's
    assert SqlModelPauses(store.engine).pause(CHAT, 3, T0, "ops")
    paused = stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=600.0, end_unix_s=_s(60)))
    assert paused.id > 0 and paused.pause_warning == (
        f"{CHAT} is paused since 2026-01-05T12:00:00Z by ops, held at 3 replica(s): the pause "
        f"holds until `headroom models resume {CHAT}`; the loop sizes the model for the hint "
        "only then")
    assert not paused.HasField("capacity_rps") and paused.capacity_warning == ""
    other = stub.AddHint(pb.AddHintRequest(model=VISION, rate_rps=300.0, end_unix_s=_s(60)))
    assert other.pause_warning == ""
    assert [h.pause_warning for h in stub.ListHints(pb.ListHintsRequest()).hints] == ["", ""]


def test_a_server_that_knows_no_pools_leaves_the_capacity_fields_unset(api: Api) -> None:
    stub, _, _ = api
    added = stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=9e6, end_unix_s=_s(60)))
    assert added.id > 0
    assert not added.HasField("capacity_rps") and added.capacity_warning == ""


@pytest.mark.parametrize("with_config", [True, False], ids=["--config", "--db alone"])
def test_placement_serve_checks_hints_against_its_configs_pools_only(
        tmp_path: Path, with_config: bool) -> None:
    settings = load_settings(db={"url": f"sqlite:///{tmp_path / 'store.db'}"}, pools=[{
        "name": "a100-80gb", "product": "A100-80GB", "gpus_per_node": 8, "max_nodes": 2,
        "price_per_gpu_hour": 5.12}])
    _, extra, close, _ = _kept_in_store(settings, checks_hints=with_config)
    Store.open(settings.db.url).upsert_models(DEMO_MODELS)
    server, port = create_server("127.0.0.1:0", extra_servicers=extra)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        added = pb_grpc.DemandHintsStub(channel).AddHint(pb.AddHintRequest(
            model=CHAT, rate_rps=2000.0, end_unix_s=datetime.now(UTC).timestamp() + 3600))
    finally:
        channel.close()
        stop(server, 0)
        close()
    assert added.HasField("capacity_rps") is with_config
    assert ("pool_max_nodes:a100-80gb" in added.capacity_warning) is with_config


def test_placement_serve_on_a_simulated_store_judges_hints_by_its_simulated_clock(
        tmp_path: Path) -> None:
    """``placement serve --db`` beside a demo whose simulated clock ticked two days before the
    wall clock: start 0 is that tick, an end after it is taken, one before it is past by the
    store's simulated clock (before: the wall clock refused the first and started hints days
    after the loop's now)."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    sim_at = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)
    settings = load_settings(db={"url": url}, sim={"history_s": 3600})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), sim_at)
    runtime.advance(60)
    SqlLeaseStore(runtime.store.engine).create_lease(
        FLEET_LEASE, LeaseRecord("demo", 15, sim_at, sim_at, 0, "1"))
    tick_at = runtime.store.last_tick_at()
    assert tick_at is not None
    _, extra, close, _ = _kept_in_store(settings)
    server, port = create_server("127.0.0.1:0", extra_servicers=extra)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.DemandHintsStub(channel)
        added = stub.AddHint(pb.AddHintRequest(
            model=CHAT, rate_rps=600.0, end_unix_s=(tick_at + timedelta(hours=1)).timestamp()))
        listed = stub.ListHints(pb.ListHintsRequest())
        with pytest.raises(grpc.RpcError) as refused:
            stub.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=600.0,
                                           end_unix_s=(tick_at - timedelta(minutes=1)).timestamp()))
    finally:
        channel.close()
        stop(server, 0)
        close()
    assert added.start_unix_s == tick_at.timestamp()
    assert [h.id for h in listed.hints] == [added.id]
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (f"already past (now {utc_text(tick_at)} by the store's simulated clock)"
            in str(refused.value.details()))
