"""A binding records the model and tenant of its Place, so a serving layer that restarted can
ask ListBindings for the bindings of one model (with the node and prefix filters: all must
match); renewals and a new inventory keep them."""

from __future__ import annotations

from placement_builders import make_node, make_place, two_node_engine

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.engine import PlacementEngine

T0_S = 1_800_000_000.0


def _listed(engine: PlacementEngine, **filters: str) -> list[str]:
    return [b.workload_id for b in engine.list_bindings(
        pb.ListBindingsRequest(**filters)).bindings]


def test_a_binding_carries_the_model_and_tenant_of_its_place() -> None:
    engine = two_node_engine()
    placed = engine.place(make_place("w", model="llama-3-8b", tenant="search")).binding
    assert (placed.model, placed.tenant) == ("llama-3-8b", "search")
    assert engine.binding("w") == placed
    assert list(engine.list_bindings(pb.ListBindingsRequest()).bindings) == [placed]


def test_list_bindings_of_a_model_leaves_out_the_other_models_and_ands_the_other_filters(
        ) -> None:
    engine = two_node_engine()
    bound = {w: engine.place(make_place(w, gpu_milli=250, model=m)).binding for w, m in (
        ("vllm-b", "llama"), ("vllm-a", "llama"), ("triton-a", "llama"), ("vllm-c", "bert"))}
    assert _listed(engine, model="llama") == ["triton-a", "vllm-a", "vllm-b"]
    assert _listed(engine, model="bert") == ["vllm-c"]
    assert _listed(engine, model="llama", workload_prefix="vllm-") == ["vllm-a", "vllm-b"]
    node = bound["vllm-a"].node
    assert _listed(engine, model="llama", node=node) == sorted(
        w for w, b in bound.items() if b.node == node and b.model == "llama")
    assert _listed(engine, model="mistral") == []
    assert _listed(engine) == ["triton-a", "vllm-a", "vllm-b", "vllm-c"]  # "" = any model


def test_a_renewal_and_a_new_inventory_keep_the_model_and_tenant() -> None:
    now_s = [T0_S]
    engine = PlacementEngine(now_s=lambda: now_s[0])
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]))
    request = make_place("w", model="llama", tenant="search")
    request.lease_s = 30
    engine.place(request)
    now_s[0] += 20
    renewed = engine.renew_leases(pb.RenewLeasesRequest(workload_ids=["w"])).renewed[0]
    assert (renewed.model, renewed.tenant, renewed.lease_expires_at_s) == (
        "llama", "search", T0_S + 50)
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0"), make_node("n1")]))
    held = engine.binding("w")
    assert held is not None and (held.model, held.tenant) == ("llama", "search")
    assert _listed(engine, model="llama") == ["w"]
