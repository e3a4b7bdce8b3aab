"""PlacementEngine behaviour through the proto messages the control plane uses."""

from __future__ import annotations

import pytest
from placement_builders import make_node, make_place, two_node_engine

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import AlreadyExists, Infeasible, InvalidArgument
from scheduler.engine import PlacementEngine


def test_sync_inventory_reports_nodes_and_gpus() -> None:
    eng = PlacementEngine()
    resp = eng.sync_inventory(pb.SyncInventoryRequest(
        nodes=[make_node("a", gpus=2), make_node("b", gpus=8, product="G2", gpu_memory_mib=0)]))
    assert (resp.nodes, resp.gpus) == (2, 10)


def test_whole_gpu_workload_gets_exclusive_gpus_with_full_milli() -> None:
    eng = two_node_engine()
    binding = eng.place(make_place("w", num_gpu=2, gpu_milli=0)).binding
    assert len(set(binding.gpu_indices)) == 2
    assert binding.gpu_milli == 1000
    assert binding.mode == pb.EXCLUSIVE


def test_share_workload_gets_at_least_what_it_asked() -> None:
    eng = two_node_engine()
    binding = eng.place(make_place("s", gpu_milli=300)).binding
    assert binding.gpu_milli >= 300
    assert binding.mode == pb.TIME_SLICING


def test_duplicate_workload_id_is_already_exists() -> None:
    eng = two_node_engine()
    eng.place(make_place("dup"))
    with pytest.raises(AlreadyExists):
        eng.place(make_place("dup"))


def test_infeasible_workload_is_rejected_with_a_reason() -> None:
    eng = two_node_engine()
    with pytest.raises(Infeasible) as err:
        eng.place(make_place("big", num_gpu=3))
    assert err.value.reason == "no_idle_gpus"


def test_malformed_request_names_the_field() -> None:
    eng = two_node_engine()
    with pytest.raises(InvalidArgument) as err:
        eng.place(make_place("bad", gpu_milli=1500))
    assert err.value.field == "gpu_milli"


def test_release_then_place_restores_capacity() -> None:
    eng = two_node_engine()
    for k in range(4):
        eng.place(make_place(f"w{k}"))
    with pytest.raises(Infeasible):
        eng.place(make_place("extra"))
    eng.release(pb.ReleaseRequest(workload_id="w2"))
    eng.release(pb.ReleaseRequest(workload_id="w2"))  # idempotent
    assert eng.place(make_place("extra")).binding.gpu_milli == 1000


def test_gpu_products_restrict_the_node() -> None:
    eng = PlacementEngine()
    eng.sync_inventory(pb.SyncInventoryRequest(
        nodes=[make_node("t4"), make_node("v100", product="V100M32", gpu_memory_mib=32768)]))
    binding = eng.place(make_place("v", products=["V100M32"])).binding
    assert binding.node == "v100"
