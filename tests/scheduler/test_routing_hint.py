"""The routing hint: a serving layer's replicas ranked by GPU-memory headroom x 1/queue depth x
version affinity, with what Headroom knows about where each one runs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from placement_builders import make_node, make_place

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import InvalidArgument
from scheduler.domain.model import SharingMode
from scheduler.domain.routing import ReplicaLoad, ReplicaSite, rank_replicas
from scheduler.engine import PlacementEngine

OWN_GPU = ReplicaSite("n0", SharingMode.EXCLUSIVE, True, 15_360, 0.0)


def _load(workload_id: str, **fields: object) -> pb.ReplicaLoad:
    return pb.ReplicaLoad(workload_id=workload_id, **fields)  # type: ignore[arg-type]


def _rank(engine: PlacementEngine, *loads: pb.ReplicaLoad, version: str = ""
          ) -> pb.RankReplicasResponse:
    return engine.rank_replicas(pb.RankReplicasRequest(replicas=list(loads),
                                                       model_version=version))


def test_the_replica_with_the_shortest_queue_ranks_first_when_memory_is_equal() -> None:
    ranked = rank_replicas([(ReplicaLoad("busy", queue_depth=3), OWN_GPU),
                            (ReplicaLoad("idle", queue_depth=0), OWN_GPU)])
    assert [r.workload_id for r in ranked] == ["idle", "busy"]
    assert ranked[0].score == 1.0 and ranked[1].score == pytest.approx(0.25)


def test_a_fuller_kv_cache_outweighs_a_shorter_queue_only_by_the_product_of_the_factors() -> None:
    ranked = rank_replicas([(ReplicaLoad("full", kv_cache_usage=0.9), OWN_GPU),
                            (ReplicaLoad("queued", queue_depth=1, kv_cache_usage=0.2), OWN_GPU)])
    assert [r.workload_id for r in ranked] == ["queued", "full"]  # 0.8 x 1/2 > 0.1 x 1
    assert "kv cache" in ranked[0].reason


def test_a_replica_of_another_version_ranks_below_one_of_the_asked_version() -> None:
    ranked = rank_replicas([(ReplicaLoad("old", model_version="v1"), OWN_GPU),
                            (ReplicaLoad("new", model_version="v2", queue_depth=1), OWN_GPU)],
                           model_version="v2")
    assert [r.workload_id for r in ranked] == ["new", "old"]
    assert ranked[1].version_factor == 0.25
    assert "version v2 not loaded (serves v1)" in ranked[1].reason


def test_a_replica_with_the_asked_lora_adapter_loaded_matches_and_one_without_does_not() -> None:
    ranked = rank_replicas([
        (ReplicaLoad("base-only", model_version="llama-8b"), OWN_GPU),
        (ReplicaLoad("with-sql", queue_depth=1, model_version="llama-8b",
                     adapters=("sql-lora", "chat-lora")), OWN_GPU),
        (ReplicaLoad("says-nothing", queue_depth=2), OWN_GPU)], model_version="sql-lora")
    assert [(r.workload_id, r.version_factor) for r in ranked] == [
        ("with-sql", 1.0), ("says-nothing", 1.0), ("base-only", 0.25)]
    assert "sql-lora not loaded (serves llama-8b)" in ranked[2].reason


def test_a_sleeping_replica_scores_zero_but_is_still_ranked() -> None:
    ranked = rank_replicas([(ReplicaLoad("asleep", sleeping=True), OWN_GPU),
                            (ReplicaLoad("awake", queue_depth=9), OWN_GPU)])
    assert [(r.workload_id, r.score) for r in ranked] == [("awake", 0.1), ("asleep", 0.0)]
    assert ranked[1].reason.startswith("sleeping")
    assert [r.can_serve for r in ranked] == [True, False]


def test_replicas_scoring_zero_keep_the_order_of_what_they_would_score_awake_ones_first() -> None:
    closed = ReplicaSite("n0", SharingMode.EXCLUSIVE, False, 15_360, 0.0)
    ranked = rank_replicas([(ReplicaLoad("a-asleep", sleeping=True), OWN_GPU),
                            (ReplicaLoad("b-queued", queue_depth=9), closed),
                            (ReplicaLoad("c-idle"), closed),
                            (ReplicaLoad("d-open", queue_depth=99), OWN_GPU)])
    # every node restarting or draining at once (a restarted Headroom before its first
    # inventory): the router still gets the idle replica first, not the first id
    assert [r.workload_id for r in ranked] == ["d-open", "c-idle", "b-queued", "a-asleep"]
    assert [r.score for r in ranked[1:]] == [0.0, 0.0, 0.0]


def test_a_replica_with_a_full_kv_cache_still_ranks_above_one_on_a_cordoned_node() -> None:
    closed = ReplicaSite("n0", SharingMode.EXCLUSIVE, False, 15_360, 0.0)
    ranked = rank_replicas([(ReplicaLoad("a-cordoned"), closed),
                            (ReplicaLoad("b-full", kv_cache_usage=1.0), OWN_GPU)])
    assert [(r.workload_id, r.score) for r in ranked] == [("b-full", 0.0), ("a-cordoned", 0.0)]
    assert [r.can_serve for r in ranked] == [True, False]  # full, but it can take a request


loads = st.builds(
    ReplicaLoad, workload_id=st.text(min_size=1, max_size=4),
    queue_depth=st.integers(0, 1000),
    kv_cache_usage=st.none() | st.floats(0, 1),
    gpu_memory_used_mib=st.none() | st.integers(0, 100_000),
    model_version=st.sampled_from(["", "v1", "v2"]), sleeping=st.booleans(),
    adapters=st.lists(st.sampled_from(["v1", "lora-a"]), max_size=2).map(tuple))
sites = st.builds(
    ReplicaSite, node=st.just("n"), mode=st.sampled_from([*SharingMode, None]),
    node_open=st.booleans(), memory_mib=st.integers(0, 81_920),
    gpu_free_fraction=st.floats(0, 1))


@given(st.lists(st.tuples(loads, sites), max_size=8, unique_by=lambda p: p[0].workload_id),
       st.sampled_from(["", "v1"]))
def test_scores_stay_in_zero_to_one_best_first_and_one_more_queued_request_never_helps(
        pairs: list[tuple[ReplicaLoad, ReplicaSite]], version: str) -> None:
    ranked = rank_replicas(pairs, version)
    assert all(0.0 <= r.score <= 1.0 for r in ranked)
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    assert rank_replicas(list(reversed(pairs)), version) == ranked  # order-independent
    for load, site in pairs:
        (before,) = rank_replicas([(load, site)], version)
        longer = replace(load, queue_depth=load.queue_depth + 1)
        (after,) = rank_replicas([(longer, site)], version)
        assert after.score <= before.score


# --------------------------------------------------------------------------- the engine
def _engine(*nodes: pb.Node) -> PlacementEngine:
    engine = PlacementEngine()
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=list(nodes)))
    return engine


def test_a_replica_sharing_its_gpu_with_another_ranks_below_one_alone_on_its_gpu() -> None:
    engine = _engine(make_node("n0", gpus=2, product="L4", gpu_memory_mib=24_576))
    for workload_id in ("alone", "crowded", "neighbour"):
        engine.place(make_place(workload_id, gpu_milli=400, gpu_memory_mib=8_192,
                                isolation=pb.TRUSTED))
    bindings = {b.workload_id: b for b in engine.list_bindings(pb.ListBindingsRequest()).bindings}
    shared = [w for w, b in bindings.items() if b.gpu_indices == bindings["crowded"].gpu_indices]
    lonely = next(w for w in bindings if w not in shared)
    ranked = _rank(engine, *(_load(w) for w in bindings)).ranked
    assert ranked[0].workload_id == lonely and ranked[0].memory_headroom == 1.0
    assert {r.workload_id for r in ranked[1:]} == set(shared)
    # of the 22,818 MiB CUDA can use of an L4 (scheduler/domain/usable_memory.py), not 24,576
    assert all(r.memory_headroom == pytest.approx(1 - 8_192 / 22_818) for r in ranked[1:])
    assert "shared GPU" in ranked[1].reason


def test_a_replica_alone_on_a_shared_gpu_loses_no_headroom_to_its_own_charge() -> None:
    engine = _engine(make_node("n0", gpus=1, product="L4", gpu_memory_mib=23_034),
                     make_node("n1", gpus=1, product="L4", gpu_memory_mib=23_034))
    engine.place(make_place("whole", products=["L4"]))
    shared = engine.place(make_place("mps", gpu_milli=500, gpu_memory_mib=6_000,
                                     isolation=pb.TRUSTED)).binding
    assert shared.mode == pb.MPS
    ranked = _rank(engine, _load("mps"), _load("whole")).ranked
    assert [(r.workload_id, r.memory_headroom) for r in ranked] == [("mps", 1.0), ("whole", 1.0)]
    engine.place(make_place("neighbour", gpu_milli=300, isolation=pb.TRUSTED))  # 30 % charged
    (alone_no_more,) = _rank(engine, _load("mps")).ranked
    usable = 22_818  # of the 23,034 MiB an L4 reports (scheduler/domain/usable_memory.py)
    assert alone_no_more.memory_headroom == pytest.approx(1 - (usable * 300 // 1000) / usable)


def test_a_replica_on_a_cordoned_node_ranks_last_with_the_reason() -> None:
    engine = _engine(make_node("n0", gpus=1), make_node("n1", gpus=1))
    on = {engine.place(make_place(w)).binding.node: w for w in ("a", "b")}
    cordoned = make_node("n0", gpus=1)
    cordoned.unschedulable = True
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[cordoned, make_node("n1", gpus=1)]))
    ranked = _rank(engine, _load(on["n0"]), _load(on["n1"], queue_depth=50)).ranked
    assert [r.workload_id for r in ranked] == [on["n1"], on["n0"]]
    assert ranked[1].score == 0.0 and ranked[1].reason.startswith(
        "node_unavailable: n0 is cordoned or not ready;")
    assert [r.can_serve for r in ranked] == [True, False]  # said as a field, not only as text


def test_reported_memory_is_measured_against_the_mig_instance_the_replica_was_given() -> None:
    engine = _engine(make_node("n0", gpus=1, product="A100-80GB", gpu_memory_mib=81_920,
                               mig_capable=True))
    binding = engine.place(make_place("m", gpu_milli=100, isolation=pb.STRICT)).binding
    assert binding.mig_profile == "1g.10gb"
    (ranked,) = _rank(engine, _load("m", gpu_memory_used_mib=2_560)).ranked
    assert ranked.memory_headroom == pytest.approx(1 - 2_560 / 9_728)  # 1g.10gb's usable
    assert "reported memory" in ranked.reason



def test_each_ranked_replica_says_its_sharing_mode_and_the_gpu_memory_it_may_use() -> None:
    # a router sends a long prompt to the replica with room for it: 50 % of a 10 GiB MIG
    # instance is not 50 % of an 80 GiB GPU
    engine = _engine(make_node("a100", gpus=2, product="A100-80GB", gpu_memory_mib=81_920,
                               mig_capable=True),
                     make_node("l4", gpus=1, product="L4", gpu_memory_mib=23_034))
    engine.place(make_place("whole", products=["A100-80GB"]))
    engine.place(make_place("mig", gpu_milli=100, isolation=pb.STRICT))
    engine.place(make_place("mps", gpu_milli=500, gpu_memory_mib=6_000, products=["L4"],
                            isolation=pb.TRUSTED))
    ranked = _rank(engine, *(_load(w, kv_cache_usage=0.5) for w in ("whole", "mig", "mps")))
    assert {r.workload_id: (r.mode, r.memory_mib) for r in ranked.ranked} == {  # CUDA's usable
        "whole": (pb.EXCLUSIVE, 80_384), "mig": (pb.MIG, 9_728), "mps": (pb.MPS, 6_000)}

def test_ids_that_are_not_bound_come_back_unknown_and_unranked() -> None:
    engine = _engine(make_node("n0"))
    engine.place(make_place("a"))
    engine.release(pb.ReleaseRequest(workload_id="a"))
    engine.place(make_place("b"))
    answer = _rank(engine, _load("a"), _load("b"), _load("never"))
    assert [r.workload_id for r in answer.ranked] == ["b"]
    assert list(answer.unknown) == ["a", "never"]


@pytest.mark.parametrize("request_, field", [
    (pb.RankReplicasRequest(), "replicas"),
    (pb.RankReplicasRequest(replicas=[_load("")]), "replicas[0].workload_id"),
    (pb.RankReplicasRequest(replicas=[_load("a"), _load("a")]), "replicas[1].workload_id"),
    (pb.RankReplicasRequest(replicas=[_load("a", queue_depth=-1)]), "replicas[0].queue_depth"),
    (pb.RankReplicasRequest(replicas=[_load("a", kv_cache_usage=1.5)]),
     "replicas[0].kv_cache_usage"),
    (pb.RankReplicasRequest(replicas=[_load("a", kv_cache_usage=float("nan"))]),
     "replicas[0].kv_cache_usage"),
    (pb.RankReplicasRequest(replicas=[_load("a", gpu_memory_used_mib=-1)]),
     "replicas[0].gpu_memory_used_mib"),
    (pb.RankReplicasRequest(replicas=[_load("a")], version_mismatch_factor=2.0),
     "version_mismatch_factor"),
    (pb.RankReplicasRequest(replicas=[_load("a", adapters=["x", ""])]),
     "replicas[0].adapters[1]"),
])
def test_a_malformed_rank_request_names_the_field(request_: pb.RankReplicasRequest,
                                                  field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        _engine(make_node("n0")).rank_replicas(request_)
    assert err.value.field == field
