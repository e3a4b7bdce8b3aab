"""Property-based fuzzing of the Placement service over real gRPC on loopback: every RPC gets
requests that mix valid shapes with hostile values (empty, 10k-character, NUL and non-ASCII
strings; NaN, infinite, negative and huge numbers; int32 / int64 extremes; unknown products, MIG
profiles and sharing modes; duplicate and unknown ids). Each call answers within a deadline with
a code the contract allows for it (never INTERNAL or UNKNOWN), a refusal's details name what is
wrong, a refused Place binds nothing, and afterwards the server still gives known-good answers.
One server for the module (hypothesis runs many examples against it)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from placement_builders import make_node, make_place
from scheduler_fixtures import served_stub

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc

DEADLINE_S = 5.0
Code = grpc.StatusCode
#: examples per RPC; HEADROOM_FUZZ_EXAMPLES=1000 HEADROOM_FUZZ_RANDOM=1 hunts longer, unseeded
FUZZ = settings(max_examples=int(os.environ.get("HEADROOM_FUZZ_EXAMPLES", "80")), deadline=None,
                derandomize=not os.environ.get("HEADROOM_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
PRODUCTS = ("A100-80GB", "A100-40GB", "a100-80gb", "T4", "L4", "H100-80GB", "A30", "G1",
            "NVIDIA-A100-SXM4-80GB", "RTX-9090", "", " T4 ")
MIG_PROFILES = ("1g.10gb", "3g.40gb", "7g.80gb", "2g.24gb", "9g.99gb", "", "1g.10gb\x00")
NAMES = ("n0", "n1", "w", "", " ", "\x00", "a\x00b", "ü🚀", "x" * 10_000, "../etc", "n0 ",
         "\u202e", "m")


def note(text: str) -> None:
    """Count ``text`` in hypothesis's statistics (--hypothesis-show-statistics)."""
    if currently_in_test_context():
        event(text)


def mixed(valid: dict[str, st.SearchStrategy[Any]], hostile: dict[str, st.SearchStrategy[Any]]
          ) -> st.SearchStrategy[dict[str, Any]]:
    """Fields of a valid request with up to two of them (any of ``hostile``) made hostile, so
    that valid requests and each hostile value alone are both common."""
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        bad = draw(st.sets(st.sampled_from(sorted(hostile)), max_size=2))
        return {k: draw(hostile[k] if k in bad else v) for k, v in valid.items()}
    return build()


def hostile_text(*good: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(good + NAMES), st.text(max_size=24))


def int32s() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from((0, 1, -1, 2, 7, 8, 1000, 999, 1001, *INT32)),
                     st.integers(*INT32))


def int64s(*good: int) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from((0, 1, -1, *good, *INT64, 2**53 + 1)),
                     st.integers(*INT64))


def doubles(*good: float) -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from((0.0, -0.0, 1.0, -1.0, math.nan, math.inf, -math.inf,
                                      1e308, -1e308, 5e-324, *good)),
                     st.floats(allow_nan=True, allow_infinity=True))


def enums(values: int) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(0, values), st.sampled_from((-1, 99, INT32[1], INT32[0])))


@pytest.fixture(scope="module")
def stub() -> Iterator[pb_grpc.PlacementStub]:
    yield from served_stub()  # one server for the module's fuzzing


def call(method: Callable[..., Any], request: Any, allowed: set[grpc.StatusCode],
         timeout: float = DEADLINE_S) -> tuple[Any, grpc.RpcError | None]:
    """``method(request)``; its reply or its error, which must be one of ``allowed`` (never
    DEADLINE_EXCEEDED: every unary call answers in time), with details for a refusal."""
    try:
        reply = method(request, timeout=timeout)
    except grpc.RpcError as err:
        code = err.code()
        note(f"{type(request).__name__}: {code.name}")
        assert code in allowed, (code, err.details(), request_summary(request))
        assert err.details(), (code, request_summary(request))
        if code == Code.INVALID_ARGUMENT:
            field = (err.details() or "").split(":")[0]
            assert field.strip(), err.details()
        return None, err
    note(f"{type(request).__name__}: OK")
    return reply, None


def request_summary(request: Any) -> str:
    text = str(request)
    return text if len(text) < 2000 else text[:2000] + "..."


def mig_instances() -> st.SearchStrategy[pb.MigInstance]:
    return st.builds(lambda profile, start, model: pb.MigInstance(
        profile=profile, model=model, **({} if start is None else {"start": start})),
        st.sampled_from(MIG_PROFILES), st.one_of(st.none(), int32s()), hostile_text("m"))


def gpus() -> st.SearchStrategy[pb.Gpu]:
    return st.builds(pb.Gpu, index=st.one_of(st.integers(0, 3), int32s()),
                     product=st.sampled_from(PRODUCTS), memory_mib=int64s(15_360, 81_920),
                     mig_capable=st.booleans(),
                     mig_instances=st.lists(mig_instances(), max_size=3),
                     whole_in_use=st.booleans())


def nodes() -> st.SearchStrategy[pb.Node]:
    return st.builds(pb.Node, name=hostile_text("n0", "n1"), cpu_milli=int64s(32_000),
                     memory_mib=int64s(131_072), gpus=st.lists(gpus(), max_size=4),
                     labels=st.dictionaries(hostile_text(), hostile_text(), max_size=3),
                     pool=hostile_text("T4"), unschedulable=st.booleans())


def good_nodes() -> st.SearchStrategy[list[pb.Node]]:
    """Valid inventories (so Place has somewhere to go), of known products."""
    return st.lists(st.builds(make_node, name=st.sampled_from(("n0", "n1", "n2")),
                              gpus=st.integers(1, 4),
                              product=st.sampled_from(("T4", "L4", "A100-80GB")),
                              gpu_memory_mib=st.sampled_from((15_360, 81_920, 0)),
                              mig_capable=st.booleans()),
                    min_size=1, max_size=3, unique_by=lambda n: n.name)


def place_requests() -> st.SearchStrategy[pb.PlaceRequest]:
    valid = {"workload_id": st.sampled_from(("w0", "w1", "w2")), "model": st.just("m"),
             "tenant": st.just("t"), "cpu_milli": st.sampled_from((0, 1000)),
             "memory_mib": st.sampled_from((0, 1024)), "num_gpu": st.integers(0, 2),
             "gpu_milli": st.sampled_from((1000, 500, 250)),
             "gpu_memory_mib": st.sampled_from((0, 4096)),
             "gpu_products": st.lists(st.sampled_from(("T4", "L4", "A100-80GB")), max_size=2),
             "isolation": st.integers(0, 3), "lease_s": st.sampled_from((0.0, 30.0))}
    hostile = {"workload_id": hostile_text(), "model": hostile_text(),
               "tenant": hostile_text(), "cpu_milli": int64s(), "memory_mib": int64s(),
               "num_gpu": int32s(), "gpu_milli": int32s(), "gpu_memory_mib": int64s(),
               "gpu_products": st.lists(st.sampled_from(PRODUCTS), max_size=3),
               "isolation": enums(3), "lease_s": doubles()}
    return mixed(valid, hostile).map(lambda fields: pb.PlaceRequest(**fields))


def bound_ids(stub: pb_grpc.PlacementStub) -> set[str]:
    reply = stub.ListBindings(pb.ListBindingsRequest(), timeout=DEADLINE_S)
    return {b.workload_id for b in reply.bindings}


def assert_no_gpu_oversubscribed(stub: pb_grpc.PlacementStub) -> None:
    """No GPU's shares (gpu_milli of its MPS / time-sliced / exclusive bindings) pass 1000."""
    used: dict[tuple[str, int], int] = {}
    for b in stub.ListBindings(pb.ListBindingsRequest(), timeout=DEADLINE_S).bindings:
        if b.mode != pb.MIG:
            for index in b.gpu_indices:
                used[b.node, index] = used.get((b.node, index), 0) + b.gpu_milli
    assert all(0 <= milli <= 1000 for milli in used.values()), used


SYNC_CODES = {Code.INVALID_ARGUMENT}
PLACE_CODES = {Code.INVALID_ARGUMENT, Code.RESOURCE_EXHAUSTED, Code.ALREADY_EXISTS}


@FUZZ
@given(nodes=st.one_of(st.lists(nodes(), max_size=4), good_nodes()))
def test_sync_inventory_answers_ok_or_invalid_argument(
        stub: pb_grpc.PlacementStub, nodes: list[pb.Node]) -> None:
    reply, err = call(stub.SyncInventory, pb.SyncInventoryRequest(nodes=nodes), SYNC_CODES)
    if err is None:
        assert reply.nodes == len(nodes)
        assert reply.gpus == sum(len(n.gpus) for n in nodes)


@FUZZ
@given(inventory=good_nodes(), requests=st.lists(place_requests(), min_size=1, max_size=4))
def test_place_answers_a_documented_code_and_a_refusal_binds_nothing(
        stub: pb_grpc.PlacementStub, inventory: list[pb.Node],
        requests: list[pb.PlaceRequest]) -> None:
    call(stub.SyncInventory, pb.SyncInventoryRequest(nodes=inventory), set())
    names = {n.name for n in inventory}
    for request in requests:
        before = bound_ids(stub)
        reply, err = call(stub.Place, request, PLACE_CODES)
        after = bound_ids(stub)
        if err is None:
            binding = reply.binding
            assert binding.workload_id == request.workload_id
            assert binding.node in names
            assert_no_gpu_oversubscribed(stub)
            assert after - before <= {request.workload_id}
            if request.lease_s == 0 or request.lease_s >= 60:  # a tiny lease may have run out
                assert request.workload_id in after
        else:
            assert after <= before, (err.code(), err.details())
    for request in requests:
        call(stub.Release, pb.ReleaseRequest(workload_id=request.workload_id),
             {Code.INVALID_ARGUMENT})
    assert not bound_ids(stub) & {r.workload_id for r in requests}


@FUZZ
@given(workload_id=hostile_text("w0"))
def test_release_is_idempotent_for_any_id(stub: pb_grpc.PlacementStub, workload_id: str) -> None:
    for _ in range(2):
        call(stub.Release, pb.ReleaseRequest(workload_id=workload_id), {Code.INVALID_ARGUMENT})
    assert workload_id not in bound_ids(stub)


def profile_points() -> st.SearchStrategy[pb.ProfilePoint]:
    valid = {"product": st.sampled_from(("A100-80GB", "L4", "T4")),
             "compute_slices": st.sampled_from((0, 7)), "batch_size": st.integers(1, 16),
             "mps_processes": st.integers(1, 4),
             "throughput_rps": st.floats(1.0, 1000.0), "latency_ms": st.floats(1.0, 40.0),
             "memory_mib": st.sampled_from((0, 8192))}
    hostile = {"product": st.sampled_from(PRODUCTS),
               "compute_slices": st.one_of(st.sampled_from((1, 2, 3, 4, 5)), int32s()),
               "batch_size": int32s(), "mps_processes": int32s(), "throughput_rps": doubles(),
               "latency_ms": doubles(), "memory_mib": int64s()}
    return mixed(valid, hostile).map(lambda fields: pb.ProfilePoint(**fields))


def model_demands() -> st.SearchStrategy[pb.ModelDemand]:
    valid = {"model": st.sampled_from(("m", "m2", "m3")), "tenant": st.just("t"),
             "isolation": st.integers(1, 3), "rate_rps": st.floats(0.0, 500.0),
             "latency_slo_ms": st.sampled_from((100.0, 500.0)),
             "profile": st.lists(profile_points(), min_size=1, max_size=3),
             "cold_start_s": st.sampled_from((0.0, 30.0))}
    hostile = {"model": hostile_text(), "tenant": hostile_text(), "isolation": enums(3),
               "rate_rps": doubles(), "latency_slo_ms": doubles(),
               "profile": st.lists(profile_points(), max_size=3), "cold_start_s": doubles()}
    return mixed(valid, hostile).map(lambda fields: pb.ModelDemand(**fields))


def gpu_pools() -> st.SearchStrategy[pb.GpuPool]:
    valid = {"product": st.sampled_from(("A100-80GB", "L4", "T4")),
             "max_gpus": st.integers(0, 8), "price_per_gpu_hour": st.sampled_from((0.0, 4.0))}
    hostile = {"product": st.sampled_from(PRODUCTS), "max_gpus": int32s(),
               "price_per_gpu_hour": doubles()}
    return mixed(valid, hostile).map(lambda fields: pb.GpuPool(**fields))


@FUZZ
@given(models=st.lists(model_demands(), max_size=3),
       pools=st.lists(gpu_pools(), max_size=3, unique_by=lambda p: p.product))
def test_plan_fleet_answers_ok_or_invalid_argument_in_time(
        stub: pb_grpc.PlacementStub, models: list[pb.ModelDemand],
        pools: list[pb.GpuPool]) -> None:
    before = stub.GetPlan(pb.GetPlanRequest(), timeout=DEADLINE_S).revision
    plan, err = call(stub.PlanFleet, pb.PlanFleetRequest(models=models, pools=pools),
                     {Code.INVALID_ARGUMENT})
    after = stub.GetPlan(pb.GetPlanRequest(), timeout=DEADLINE_S)
    if err is None:
        assert plan.revision == after.revision == before + 1
        assert math.isfinite(plan.cost_per_hour) and plan.cost_per_hour >= 0
    else:
        assert after.revision == before


@FUZZ
@given(node=hostile_text("n0"), prefix=hostile_text("w"), model=hostile_text("m"))
def test_list_bindings_answers_for_any_filter(stub: pb_grpc.PlacementStub, node: str,
                                              prefix: str, model: str) -> None:
    reply, _ = call(stub.ListBindings, pb.ListBindingsRequest(
        node=node, workload_prefix=prefix, model=model), {Code.INVALID_ARGUMENT})
    if reply is not None:
        for b in reply.bindings:
            assert (not node or b.node == node) and b.workload_id.startswith(prefix)


@FUZZ
@given(ids=st.one_of(st.lists(hostile_text("w0", "w1"), max_size=6),
                     st.lists(st.sampled_from(("w0", "dup")), min_size=50, max_size=500)))
def test_renew_leases_answers_for_any_ids(stub: pb_grpc.PlacementStub, ids: list[str]) -> None:
    reply, _ = call(stub.RenewLeases, pb.RenewLeasesRequest(workload_ids=ids),
                    {Code.INVALID_ARGUMENT})
    if reply is not None:
        assert {b.workload_id for b in reply.renewed} | set(reply.unknown) <= set(ids)


def replica_loads() -> st.SearchStrategy[pb.ReplicaLoad]:
    def build(workload_id: str, queue: int, kv: float | None, used: int | None, version: str,
              sleeping: bool, adapters: list[str]) -> pb.ReplicaLoad:
        load = pb.ReplicaLoad(workload_id=workload_id, queue_depth=queue, model_version=version,
                              sleeping=sleeping, adapters=adapters)
        if kv is not None:
            load.kv_cache_usage = kv
        if used is not None:
            load.gpu_memory_used_mib = used
        return load
    return st.builds(build, hostile_text("w0", "w1"), st.one_of(st.integers(0, 5), int32s()),
                     st.one_of(st.none(), st.floats(0, 1), doubles(0.5)),
                     st.one_of(st.none(), int64s(1024)), hostile_text("v1"), st.booleans(),
                     st.lists(hostile_text("lora-a"), max_size=3))


@FUZZ
@given(replicas=st.lists(replica_loads(), max_size=5), version=hostile_text("v1"),
       factor=st.one_of(st.none(), doubles(0.25)))
def test_rank_replicas_answers_ok_or_invalid_argument(
        stub: pb_grpc.PlacementStub, replicas: list[pb.ReplicaLoad], version: str,
        factor: float | None) -> None:
    request = pb.RankReplicasRequest(replicas=replicas, model_version=version)
    if factor is not None:
        request.version_mismatch_factor = factor
    reply, _ = call(stub.RankReplicas, request, {Code.INVALID_ARGUMENT})
    if reply is not None:
        assert len(reply.ranked) + len(reply.unknown) == len(replicas)
        assert all(math.isfinite(r.score) and r.score >= 0 for r in reply.ranked)


def test_rank_replicas_over_the_limit_is_invalid_argument(stub: pb_grpc.PlacementStub) -> None:
    loads = [pb.ReplicaLoad(workload_id=f"w{i}") for i in range(10_001)]
    _, err = call(stub.RankReplicas, pb.RankReplicasRequest(replicas=loads),
                  {Code.INVALID_ARGUMENT})
    assert err is not None and (err.details() or "").startswith("replicas")


@FUZZ
@given(after=int64s(), timeout=st.sampled_from((0.2, 0.5)))
def test_watch_plan_sends_the_current_plan_or_waits_or_refuses(
        stub: pb_grpc.PlacementStub, after: int, timeout: float) -> None:
    current = stub.GetPlan(pb.GetPlanRequest(), timeout=DEADLINE_S).revision
    stream = stub.WatchPlan(pb.WatchPlanRequest(after_revision=after), timeout=timeout)
    try:
        first = next(stream)
    except grpc.RpcError as err:
        if after < 0:
            assert err.code() == Code.INVALID_ARGUMENT
            assert (err.details() or "").startswith("after_revision:")
        else:  # nothing newer than what the client saw: it waits (the documented stream case)
            assert err.code() == Code.DEADLINE_EXCEEDED, (err.code(), err.details())
            assert after == current or current == 0
        return
    finally:
        stream.cancel()
    assert after >= 0
    assert first.revision == current and (after < current or after > current)


def test_huge_repeated_fields_answer_within_the_deadline(stub: pb_grpc.PlacementStub) -> None:
    nodes = [make_node(f"big-{i}", gpus=8) for i in range(2000)]
    synced = stub.SyncInventory(pb.SyncInventoryRequest(nodes=nodes), timeout=DEADLINE_S)
    assert (synced.nodes, synced.gpus) == (2000, 16_000)
    renewed = stub.RenewLeases(pb.RenewLeasesRequest(
        workload_ids=[f"none-{i}" for i in range(100_000)]), timeout=DEADLINE_S)
    assert len(renewed.unknown) == 100_000
    ranked = stub.RankReplicas(pb.RankReplicasRequest(replicas=[
        pb.ReplicaLoad(workload_id=f"none-{i}") for i in range(10_000)]), timeout=DEADLINE_S)
    assert len(ranked.unknown) == 10_000
    _, err = call(stub.SyncInventory, pb.SyncInventoryRequest(
        nodes=[*nodes, make_node("big-0")]), {Code.INVALID_ARGUMENT})
    assert err is not None and (err.details() or "").startswith("nodes[2000].name")
    _, err = call(stub.ListBindings, pb.ListBindingsRequest(workload_prefix="w" * 100_000),
                  {Code.INVALID_ARGUMENT})
    assert err is not None and err.details() == ("workload_prefix: is 100000 characters long, "
                                                 "at most 317")


def test_a_place_released_twice_and_then_renewed_is_unknown(stub: pb_grpc.PlacementStub) -> None:
    stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]), timeout=DEADLINE_S)
    request = make_place("seq-w")
    request.lease_s = 30.0
    bound = stub.Place(request, timeout=DEADLINE_S).binding
    assert bound.lease_s == 30.0 and bound.lease_expires_at_s > 0
    _, err = call(stub.Place, request, PLACE_CODES)
    assert err is not None and err.code() == Code.ALREADY_EXISTS
    renewed = stub.RenewLeases(pb.RenewLeasesRequest(workload_ids=["seq-w", "seq-w"]),
                               timeout=DEADLINE_S)
    assert [b.workload_id for b in renewed.renewed][:1] == ["seq-w"]
    for _ in range(2):
        stub.Release(pb.ReleaseRequest(workload_id="seq-w"), timeout=DEADLINE_S)
    renewed = stub.RenewLeases(pb.RenewLeasesRequest(workload_ids=["seq-w"]), timeout=DEADLINE_S)
    assert list(renewed.unknown) == ["seq-w"] and not renewed.renewed
    ranked = stub.RankReplicas(pb.RankReplicasRequest(replicas=[
        pb.ReplicaLoad(workload_id="seq-w")]), timeout=DEADLINE_S)
    assert list(ranked.unknown) == ["seq-w"]


def test_zz_after_the_fuzzing_a_known_good_sequence_gets_the_known_good_answers(
        stub: pb_grpc.PlacementStub) -> None:
    """Runs last in the module (pytest keeps file order): the server survived everything."""
    synced = stub.SyncInventory(pb.SyncInventoryRequest(
        nodes=[make_node("good-0", gpus=2), make_node("good-1", gpus=2)]), timeout=DEADLINE_S)
    assert (synced.nodes, synced.gpus) == (2, 4)
    assert bound_ids(stub) == set()
    placed = [stub.Place(make_place(f"good-w{i}"), timeout=DEADLINE_S).binding
              for i in range(4)]
    assert sorted((b.node, tuple(b.gpu_indices)) for b in placed) == [
        ("good-0", (0,)), ("good-0", (1,)), ("good-1", (0,)), ("good-1", (1,))]
    _, err = call(stub.Place, make_place("good-w4"), PLACE_CODES)
    assert err is not None and err.code() == Code.RESOURCE_EXHAUSTED
    ranked = stub.RankReplicas(pb.RankReplicasRequest(replicas=[
        pb.ReplicaLoad(workload_id="good-w0", queue_depth=5),
        pb.ReplicaLoad(workload_id="good-w1", queue_depth=0)]), timeout=DEADLINE_S)
    assert [r.workload_id for r in ranked.ranked] == ["good-w1", "good-w0"]
    for b in placed:
        stub.Release(pb.ReleaseRequest(workload_id=b.workload_id), timeout=DEADLINE_S)
    assert bound_ids(stub) == set()
    before = stub.GetPlan(pb.GetPlanRequest(), timeout=DEADLINE_S).revision
    point = pb.ProfilePoint(product="A100-80GB", compute_slices=7, batch_size=1,
                            mps_processes=1, throughput_rps=100.0, latency_ms=10.0)
    plan = stub.PlanFleet(pb.PlanFleetRequest(
        models=[pb.ModelDemand(model="good-m", tenant="t", isolation=pb.TRUSTED, rate_rps=150.0,
                               latency_slo_ms=100.0, profile=[point])],
        pools=[pb.GpuPool(product="A100-80GB", max_gpus=8, price_per_gpu_hour=4.0)]),
        timeout=30)
    assert plan.revision == before + 1 and not plan.unplaced
    assert sum(s.throughput_rps for g in plan.gpus for s in g.segments) >= 150.0
