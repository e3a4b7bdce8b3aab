"""A fragmented A100 pool (the stranded replicas' scenario): two nodes of 8 A100s with 7 GPUs
in use on each, one on each free, and a replica of llama-3-70b of 2 GPUs whose pod waits
Pending; and a leader tick of serve's loop over it, 30 s after the one before."""

from __future__ import annotations

from typing import Any

from apiserver import ApiServer
from k8s_builders import TP2_LLAMA as TP2  # 2 whole A100s a replica
from k8s_builders import gpu_node, gpu_pod, k8s_settings, model_deployment, nodepool
from k8s_harness import FixedLoads, leader_deps, make_backend

from controlplane.domain.observed import ModelLoad
from controlplane.domain.tick import TickReport
from controlplane.reconcile import reconcile_once
from controlplane.reconcile_config import reconcile_config
from controlplane.settings import Settings
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store

TWO_GPUS = {"nvidia.com/gpu": "2"}
APP = "llama-3-70b"


def settings() -> Settings:
    base = k8s_settings()
    return base.model_copy(update={
        "autoscaling": base.autoscaling.model_copy(update={"policy": "reactive"})})


def replica_pod(name: str, node: str) -> dict[str, Any]:
    return gpu_pod(name, node, labels={"app": APP}, requests=TWO_GPUS, ready=bool(node),
                   owner_kind="ReplicaSet", owner_name=f"{APP}-rs",
                   phase="Running" if node else "Pending")


def fragmented_fleet(apiserver: ApiServer) -> None:
    """Two nodes of 8 A100s; four replicas of llama bound (three on a100-1, one on a100-2) and
    other teams' pods on 1 and 5 GPUs: 7 GPUs in use on each node; the fifth replica's pod
    unbound. An unbound pod of another workload is not llama's."""
    apiserver.seed(nodepool("a100-80gb", limits={"nodes": "2"}))
    for node in ("a100-1", "a100-2"):
        apiserver.seed(gpu_node(node))
    apiserver.seed(model_deployment(TP2.name, replicas=5, ready=4, limits=TWO_GPUS))
    for i, node in enumerate(("a100-1", "a100-1", "a100-1", "a100-2", "")):
        apiserver.seed(replica_pod(f"{APP}-{i}", node))
    apiserver.seed(gpu_pod("batch-1", "a100-1", requests={"nvidia.com/gpu": "1"}))
    apiserver.seed(gpu_pod("batch-5", "a100-2", requests={"nvidia.com/gpu": "5"}))
    apiserver.seed(gpu_pod("batch-waiting", "", requests={"nvidia.com/gpu": "1"},
                           ready=False, phase="Pending"))


def tick(apiserver: ApiServer, clock: VirtualClock, store: Store) -> TickReport:
    backend = make_backend(apiserver, clock, load=FixedLoads({TP2.name: ModelLoad(35.0, 40.0)}))
    assert backend.elector.try_acquire_or_renew(clock.now())
    report = reconcile_once(leader_deps(backend, store, clock),
                            reconcile_config(settings(), (TP2,)))
    clock.advance(30)
    return report
