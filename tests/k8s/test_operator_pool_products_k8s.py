"""An operator's pools disagree with the models or the nodes: a pool configured with another GPU
product than its nodes have, a model no pool offers a product of, a pool's ``gpus_per_node``
other than its nodes report. The loop serves what the pools can run, holds what it cannot place
and says so, and bills the GPUs the nodes have."""

from __future__ import annotations

from dataclasses import replace

from apiserver import ApiServer
from k8s_builders import MODELS_NS, gpu_node, model_deployment, nodepool
from k8s_harness import FixedLoads, make_backend
from operator_scenario import LLAMA, RESNET, SPECS, Leader, operator_settings

from controlplane.adapters.k8s.reader import K8sClusterReader
from controlplane.cost_reader import facts_from_observed
from controlplane.domain.actions import ScaleNodePool, SetReplicas
from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from controlplane.domain.observed import ModelLoad
from controlplane.domain.tick import TickReport
from controlplane.reconcile_config import reconcile_config
from controlplane.settings import Settings
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.codec import observed_to_json

# profiled on A100-80GB (3g.40gb, 20 rps) and on whole L4s (8 rps), as deploy/examples/models.yaml
CHAT = ModelSpec(LLAMA, "acme", Isolation.STRICT, Engine.VLLM, 2000.0, (
    ProfilePoint("A100-80GB", 3, 8, 1, 20.0, 800.0, 30_000),
    ProfilePoint("L4", 0, 1, 1, 8.0, 850.0, 20_000)), ColdStart(60.0, 180.0))
# profiled on T4 only, which no pool offers
BERT_T4 = ModelSpec("bert-t4", "default", Isolation.NONE, Engine.TRITON, 100.0, (
    ProfilePoint("T4", 0, 1, 1, 250.0, 30.0, 2000),), ColdStart(5.0, 12.0))


def _with_pools(settings: Settings, **changes: dict[str, object]) -> Settings:
    return settings.model_copy(update={"pools": [
        p.model_copy(update=changes.get(p.name.replace("-", "_"), {})) for p in settings.pools]})


def _leader(apiserver: ApiServer, clock: VirtualClock, url: str, settings: Settings,
            specs: tuple[ModelSpec, ...], loads: dict[str, ModelLoad]) -> Leader:
    leader = Leader(apiserver, clock, Store.open(url, migrate=True), settings, loads)
    leader.store.upsert_models(specs)
    leader.config = reconcile_config(settings, specs)
    return leader


def _llama_actions(reports: list[TickReport]) -> list[SetReplicas]:
    return [a for r in reports if r.plan for a in r.plan.actions
            if isinstance(a, SetReplicas) and a.model == LLAMA]


def test_a_model_whose_best_product_has_no_pool_is_scaled_as_far_as_the_other_pool_allows(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    apiserver.seed(gpu_node("a100-1"))  # an A100-80GB node in a pool configured as A100-40GB
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    apiserver.seed(model_deployment(LLAMA, replicas=13))
    # 200 rps needs 32 L4 replicas; the l4 pool holds 2 nodes of 4 GPUs
    settings = _with_pools(operator_settings(), a100_80gb={"product": "A100-40GB"},
                           l4={"max_nodes": 2})
    leader = _leader(apiserver, clock, sqlite_url, settings, (CHAT,),
                     {LLAMA: ModelLoad(200.0, 100.0)})
    reports = [leader.tick() for _ in range(12)]
    assert all(r.status.value == "applied" for r in reports), [r.reason for r in reports]
    actions = _llama_actions(reports)
    assert actions and all(a.to_replicas > 0 for a in actions)
    assert {a.reason for a in actions} == {"pool_max_nodes:l4"}
    deployment = apiserver.get("apps/v1", "Deployment", LLAMA, MODELS_NS)
    assert deployment["spec"]["replicas"] == 8  # every GPU the l4 pool holds
    last = reports[-1]
    assert last.placement is not None and not last.placement.unplaced
    assert any(note.startswith("pool a100-80gb: configured with product A100-40GB, but its "
                               "node(s) a100-1 report nvidia.com/gpu.product=NVIDIA-A100-SXM4-"
                               "80GB (A100-80GB)") for note in last.observed.notes)


def test_a_model_left_unplaced_while_it_serves_keeps_its_replicas_and_says_why(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    apiserver.seed(model_deployment(LLAMA, replicas=3))
    slow = replace(CHAT, latency_slo_ms=1000.0)  # no profiled shape meets 0.45 x its SLO
    leader = _leader(apiserver, clock, sqlite_url, operator_settings(), (slow,),
                     {LLAMA: ModelLoad(20.0, 24.0)})
    reports = [leader.tick() for _ in range(20)]  # 10 minutes: past every stabilization window
    assert not _llama_actions(reports)
    assert apiserver.get("apps/v1", "Deployment", LLAMA, MODELS_NS)["spec"]["replicas"] == 3
    last = reports[-1]
    assert last.placement is not None and last.placement.unplaced
    assert [r.target for r in last.replicas if r.model == LLAMA] == [3]
    assert any(note.startswith(f"model {LLAMA}: unplaced: no_profile_meets_slo (")
               and note.endswith("held at the 3 replica(s) it has while it serves "
                                 "(unplaced_held:no_profile_meets_slo), not scaled to 0")
               for note in last.observed.notes)


def test_a_model_no_pool_offers_a_product_of_holds_no_pool_back(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    apiserver.seed(gpu_node("a100-1"))
    apiserver.seed(gpu_node("a100-2"))
    apiserver.seed(model_deployment(RESNET))
    apiserver.seed(model_deployment("bert-t4"))  # its load is not measured
    specs = (*(s for s in SPECS if s.name == RESNET), BERT_T4)
    leader = _leader(apiserver, clock, sqlite_url, operator_settings(), specs,
                     {RESNET: ModelLoad(100.0, 250.0)})
    # 21 ticks: a new store's first scale-down waits out the 600 s node window
    reports = [leader.tick() for _ in range(21)]
    a100 = [a for r in reports if r.plan for a in r.plan.actions
            if isinstance(a, ScaleNodePool) and a.pool == "a100-80gb"]
    assert a100 and a100[-1].to_nodes == 1  # resnet's one A100: the second node goes
    assert not [s for r in reports if r.plan for s in r.plan.skipped
                if s.reason == "replicas_scaling_down"]
    last = reports[-1]
    assert ("model bert-t4: no pool offers a product of its profile (T4; the pools offer "
            "a100-80gb: A100-80GB, l4: L4): the loop cannot place it (no_pool_for_profile)"
            ) in last.observed.notes


def test_a_pool_whose_nodes_report_more_gpus_than_configured_bills_what_they_report(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    apiserver.seed(gpu_node("l4-2", product="NVIDIA-L4", gpus=4, nodepool="l4", ready=False))
    made = make_backend(apiserver, clock).reader
    observed = K8sClusterReader(made.api, made.settings, tuple(
        replace(p, gpus_per_node=3) if p.name == "l4" else p for p in made.pools),
        clock, FixedLoads({})).snapshot()
    l4 = observed.pool("l4")
    assert l4 is not None and (l4.gpus_ready, l4.gpus_billed) == (4, 8)
    # the cost pages and the cost export read the same from the tick's stored record
    assert facts_from_observed(observed_to_json(observed)).billed_gpus["L4"] == 8
    assert ("pool l4: configured with gpus_per_node 3, but its node(s) l4-1, l4-2 report "
            "nvidia.com/gpu.count=4: the plan sizes the pool in steps of 3 GPUs, while the "
            "cloud bills the 4 GPUs of each such node (as Headroom's cost figures count them); "
            "set gpus_per_node to its nodes' (or pin the NodePool's GPU count)"
            ) in observed.notes
