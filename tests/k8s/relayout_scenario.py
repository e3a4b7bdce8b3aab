"""A small MIG relayout scenario on the API test server: two one-GPU A100-80GB nodes laid out as
7 x 1g.10gb, three replicas of model ``m`` (a Deployment) on them, a device-plugin DaemonSet pod
and a disruption budget."""

from __future__ import annotations

from typing import Any

from apiserver import ApiServer
from k8s_builders import gpu_node, gpu_pod, k8s_settings, model_deployment, nodepool, pdb
from k8s_harness import client_for

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.mig import K8sMigRelayoutActuator, surge_floors
from controlplane.adapters.k8s.node_pools import K8sNodePoolActuator
from controlplane.adapters.k8s.reader import K8sClusterReader
from controlplane.domain.desired import PoolSpec
from controlplane.domain.mig_layout import uniform
from controlplane.domain.mig_relayout import RelayoutPolicy
from controlplane.ports import Clock, RelayoutStore
from controlplane.settings import pool_specs

TARGET = uniform("A100-80GB", ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
TO = "headroom-1x3g.40gb-1x2g.20gb-2x1g.10gb"
FROM = "all-1g.10gb"
SLICE = "nvidia.com/mig-1g.10gb"


def seed(server: ApiServer, *, budget: dict[str, Any] | None = None, spare_slots: int = 7,
         nodepool_nodes: str = "2") -> None:
    server.seed(nodepool("a100-80gb", limits={"nodes": nodepool_nodes}))
    server.seed(gpu_node("a100-1", gpus=1, mig_config=FROM, allocatable={SLICE: "7"}))
    server.seed(gpu_node("a100-2", gpus=1, mig_config=FROM, allocatable={SLICE: str(spare_slots)}))
    server.seed(model_deployment("m", replicas=3))
    for name, node in (("m-0", "a100-1"), ("m-1", "a100-1"), ("m-2", "a100-2")):
        server.seed(gpu_pod(name, node, labels={"app": "m"}, owner_kind="Deployment",
                            owner_name="m"))
    server.seed(gpu_pod("nvidia-device-plugin-a100-1", "a100-1", namespace="gpu-operator",
                        requests={}, owner_kind="DaemonSet"))
    server.seed(pdb("m", {"app": "m"}, **(budget if budget is not None else
                                          {"max_unavailable": 1})))


def relayout_actuator(server: ApiServer, clock: Clock, store: RelayoutStore,
                      api: KubeApi | None = None, pools: tuple[PoolSpec, ...] | None = None,
                      **k8s: object) -> K8sMigRelayoutActuator:
    """The relayout actuator alone (no leader gate), as the leader runs it; ``pools``: the
    configured pools (default: the settings' a100-80gb and l4)."""
    settings = k8s_settings(**{"mig_timeout_s": 120.0, **k8s})
    api = api or KubeApi(client_for(server), "headroom")
    pools = pools if pools is not None else pool_specs(settings)
    reader = K8sClusterReader(api, settings.k8s, pools, clock)
    node_pools = K8sNodePoolActuator(api, settings.k8s, pools, lambda: surge_floors(store))
    policy = RelayoutPolicy(settings.k8s.surge_timeout_s, settings.k8s.drain_timeout_s,
                            settings.k8s.mig_timeout_s, settings.k8s.relayout_retry_after_s,
                            settings.k8s.config_propagation_s)
    return K8sMigRelayoutActuator(api, settings.k8s, pools, reader, node_pools, store, clock,
                                  policy)
