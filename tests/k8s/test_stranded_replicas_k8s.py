"""A replica of two GPUs whose pod no node has room for, through the API test server: the two
A100 nodes have 2 GPUs free between them, one on each, so the pod waits Pending, and the
NodePool's node limit (the pool's target) would hold it there. The ticks read the unbound pod
and, once it has waited autoscaling.stranded_grace_s, raise the pool by a node for it, saying
why; once the pod is bound the target is what the placement needs again."""

from __future__ import annotations

from apiserver import ApiServer
from k8s_builders import MODELS_NS, gpu_node
from k8s_builders import TP2_LLAMA as TP2  # 2 whole A100s a replica
from k8s_harness import assert_schema_valid
from stranded_scenario import APP, fragmented_fleet, replica_pod, tick

from controlplane.domain.actions import ScaleNodePool
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store


def test_a_replica_of_two_gpus_with_one_free_gpu_on_each_node_gets_a_node_of_its_own(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    fragmented_fleet(apiserver)
    store = Store.open(sqlite_url, migrate=True)
    store.upsert_models((TP2,))
    # 35 rps at 10 a replica under the reactive policy: 5 replicas of 2 GPUs, 2 nodes of 8
    # would hold them packed; the pod waiting for 2 GPUs on one node needs a third. It waits
    # autoscaling.stranded_grace_s (120 s) first: ticks 30 s apart
    waiting = [tick(apiserver, clock, store) for _ in range(4)]
    for i, report in enumerate(waiting):
        assert report.status.value == "applied", report.reason
        seen = report.observed.model(TP2.name)
        assert seen is not None and seen.replicas_unscheduled == 1
        assert report.plan is not None
        assert not [a for a in report.plan.actions if isinstance(a, ScaleNodePool)]
        (note,) = [n for n in report.observed.notes if "unscheduled" in n]
        assert f"stranded for {30 * i} s: pool a100-80gb's target is raised for them after " \
               "120 s" in note
    report = tick(apiserver, clock, store)
    assert report.plan is not None
    assert [(a.from_nodes, a.to_nodes, a.reason) for a in report.plan.actions
            if isinstance(a, ScaleNodePool)] == [(2, 3, "stranded:llama-3-70b 1x2 GPUs")]
    (note,) = [n for n in report.observed.notes if "unscheduled" in n]
    assert note.startswith("model llama-3-70b: 1 replica(s) of 2 GPUs unscheduled: no ready node "
                           "of pool a100-80gb has 2 whole GPUs free (2 free in all, at most 1 "
                           "on one node); pool a100-80gb's target raised to 3 node(s) for them")
    stored = apiserver.get("karpenter.sh/v1", "NodePool", "a100-80gb")
    assert stored["spec"]["limits"]["nodes"] == "3"
    assert assert_schema_valid(apiserver) >= 1

    # the node comes up and the scheduler binds the pod there: nothing is stranded, and the
    # target is the placement's again (the guards pace any scale-down)
    apiserver.seed(gpu_node("a100-3"))
    apiserver.delete("v1", "Pod", f"{APP}-4", MODELS_NS)
    apiserver.seed(replica_pod(f"{APP}-4", "a100-3"))
    later = tick(apiserver, clock, store)
    seen = later.observed.model(TP2.name)
    assert seen is not None and seen.replicas_unscheduled == 0
    assert not [n for n in later.observed.notes if "unscheduled" in n]
    assert later.plan is not None
    assert not [a for a in later.plan.actions if isinstance(a, ScaleNodePool)]
    assert [(s.target, s.wanted, s.kept) for s in later.plan.skipped] == [("a100-80gb", 2, 3)]
