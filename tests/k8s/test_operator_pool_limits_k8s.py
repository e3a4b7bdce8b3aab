"""An operator lowers a pool's ``max_nodes`` below the nodes it runs and restarts ``headroom
serve`` while the demand still needs more: the model the pool can no longer hold in full keeps
the replicas the pool's new maximum holds, named by the pool's limit, instead of being dropped
to zero as "unplaced" (and the pool shrunk under it)."""

from __future__ import annotations

from apiserver import ApiServer
from k8s_builders import MODELS_NS, gpu_node
from operator_scenario import LLAMA, RESNET, Leader, operator_settings, seed_operator_fleet

from controlplane.domain.actions import ScaleNodePool, SetReplicas
from controlplane.domain.observed import ModelLoad
from controlplane.settings import Settings
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store

# llama needs about 63 replicas of a 3g.40gb slice: 32 A100 GPUs, 4 nodes of 8
OVER_THREE_NODES = {LLAMA: ModelLoad(2000.0, 40.0), RESNET: ModelLoad(900.0, 250.0)}


def lowered_to(max_nodes: int) -> Settings:
    settings = operator_settings()
    return settings.model_copy(update={"pools": [
        p.model_copy(update={"max_nodes": max_nodes}) if p.name == "a100-80gb" else p
        for p in settings.pools]})


def test_a_model_the_lowered_pool_cannot_hold_in_full_keeps_what_it_can_hold(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    seed_operator_fleet(apiserver)
    for i in range(2, 6):
        apiserver.seed(gpu_node(f"a100-{i}"))  # five nodes run; max_nodes goes down to 3
    leader = Leader(apiserver, clock, Store.open(sqlite_url, migrate=True), lowered_to(3),
                    OVER_THREE_NODES)
    # 10 minutes and a tick: the reactive node stabilization window (600 s) held on a new store
    reports = [leader.tick() for _ in range(21)]
    for report in reports:
        assert report.status.value == "applied", report.reason
        assert report.plan is not None
        assert not [a for a in report.plan.actions
                    if isinstance(a, SetReplicas) and a.target == LLAMA and a.to_replicas == 0]
    llama = apiserver.get("apps/v1", "Deployment", LLAMA, MODELS_NS)["spec"]["replicas"]
    assert llama >= 24  # 3 nodes of 8 A100s: at least one 3g.40gb replica per GPU
    last = reports[-1]
    assert last.placement is not None and not last.placement.unplaced
    first = reports[0].plan
    assert first is not None
    (to_llama,) = [a for a in first.actions if isinstance(a, SetReplicas) and a.target == LLAMA]
    assert to_llama.reason == "pool_max_nodes:a100-80gb"
    pools = [a for r in reports if r.plan for a in r.plan.actions if isinstance(a, ScaleNodePool)]
    assert pools and pools[-1].to_nodes == 3  # down to the new maximum, not below it
