"""Backends under the shared contract: the simulator, Headroom's Kubernetes adapters against the
API test server, and (``-m k8s``, when ``KUBECONFIG`` is set) against a real cluster."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from apiserver import ApiServer
from k8s_builders import gpu_node, model_deployment, nodepool
from k8s_harness import make_backend

from controlplane.adapters.clock import WallClock
from controlplane.adapters.k8s.api import KubeApi, NotFoundError
from controlplane.adapters.k8s.backend import api_client_from, build_k8s_backend
from controlplane.domain.desired import PoolSpec
from controlplane.ports import (
    ClusterReader,
    MigRelayoutActuator,
    NodePoolActuator,
    ReplicaActuator,
    SharingActuator,
)
from controlplane.settings import KubernetesSettings, PoolSettings, SimSettings, load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.sim.cluster import SimCluster
from controlplane.store.relayout import MemoryRelayoutStore

START_AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Harness:
    reader: ClusterReader
    node_pools: NodePoolActuator
    replicas: ReplicaActuator
    pool: str  # a pool the backend knows
    model: str  # a model the backend knows
    sharing: SharingActuator
    mig: MigRelayoutActuator
    gpu_node: str | None  # a ready, empty A100-80GB node with MIG off (None: the backend has none)
    settle: Callable[[], None] = lambda: None  # let the configs written so far propagate


def sim_harness() -> Iterator[Harness]:
    pools = [PoolSpec("a100-80gb", "A100-80GB", 8, 1, 8, 5.12), PoolSpec("l4", "L4", 4, 0, 8, 0.8)]
    cluster = SimCluster(pools, DEMO_MODELS, lambda model, at: 10.0, SimSettings(), START_AT)
    yield Harness(cluster, cluster, cluster, "a100-80gb", DEMO_MODELS[0].name, cluster, cluster,
                  "a100-80gb-0001")


def apiserver_harness() -> Iterator[Harness]:
    server = ApiServer().start()
    try:
        server.seed(nodepool("a100-80gb"))
        server.seed(nodepool("l4", gpu_name="l4"))
        server.seed(gpu_node("a100-1"))
        server.seed(model_deployment("language/m-large", replicas=1))
        clock = VirtualClock(START_AT)
        backend = make_backend(server, clock)
        assert backend.elector.try_acquire_or_renew(START_AT)

        def settle() -> None:  # past k8s.config_propagation_s, still the leader
            clock.advance(120)
            assert backend.elector.try_acquire_or_renew(clock.now())

        yield Harness(backend.reader, backend.node_pools, backend.replicas, "a100-80gb",
                      "language/m-large", backend.sharing, backend.mig, "a100-1", settle)
    finally:
        server.stop()


def _unschedulable_nodepool(name: str) -> dict[str, Any]:
    """A NodePool Karpenter can never launch from (its node class does not exist)."""
    pool = nodepool(name)
    pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] = f"{name}-absent"
    return pool


def real_cluster_harness() -> Iterator[Harness]:
    """Creates (and deletes) its own namespace, an inert NodePool and a zero-replica model
    Deployment that can never schedule; needs the karpenter.sh/v1 NodePool CRD."""
    suffix = uuid.uuid4().hex[:6]
    name = f"headroom-contract-{suffix}"
    kubeconfig = os.environ["KUBECONFIG"]
    api_client = api_client_from(KubernetesSettings(kubeconfig=kubeconfig))
    api = KubeApi(api_client, "headroom-contract")
    settings = load_settings(
        backend="kubernetes",
        pools=[PoolSettings(name=name, product="CONTRACT-GPU", gpus_per_node=1, max_nodes=4,
                            price_per_gpu_hour=0.0)],
        k8s={"kubeconfig": kubeconfig, "namespace": name, "workload_namespaces": [name],
             "placeholder_priority_class": name, "lease_name": name,
             "field_manager": "headroom-contract"})
    model = model_deployment(f"contract/{suffix}", name="contract-model", namespace=name,
                             replicas=0)
    model["spec"]["template"]["spec"]["nodeSelector"] = {"headroom.dev/never": "true"}
    model.pop("status")
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        try:
            api.create(_unschedulable_nodepool(name))
        except NotFoundError:
            pytest.fail("the real-cluster contract needs the karpenter.sh/v1 NodePool CRD")
        api.create(model)
        backend = build_k8s_backend(settings, WallClock(), MemoryRelayoutStore(),
                                    api_client=api_client, identity=name)
        assert backend.elector.try_acquire_or_renew(WallClock().now())
        yield Harness(backend.reader, backend.node_pools, backend.replicas, name,
                      f"contract/{suffix}", backend.sharing, backend.mig, None)
    finally:
        for api_version, kind in (("karpenter.sh/v1", "NodePool"),
                                  ("scheduling.k8s.io/v1", "PriorityClass"),
                                  ("v1", "Namespace")):
            with contextlib.suppress(NotFoundError):
                api.delete(api_version, kind, name)


HARNESSES = {"sim": sim_harness, "k8s-apiserver": apiserver_harness,
             "k8s-real": real_cluster_harness}
HARNESS_PARAMS = [
    "sim", "k8s-apiserver",
    *([pytest.param("k8s-real", marks=pytest.mark.k8s)] if os.environ.get("KUBECONFIG") else []),
]
