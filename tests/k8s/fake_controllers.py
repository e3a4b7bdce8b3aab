"""Controllers the API test server does not run, played by tests: NVIDIA's MIG manager, a
ReplicaSet controller + scheduler that puts evicted replicas back on a node with room, and a
ReplicaSet's scale-down, which picks the pods it deletes by Kubernetes' ranking."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

import yaml
from apiserver import ApiServer
from k8s_builders import GPU_OPERATOR_NS, gpu_pod

from controlplane.domain.mig_layout import builtin_layout
from controlplane.sim.clock import VirtualClock

MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


class FakeMigManager:
    """On a node whose ``nvidia.com/mig.config`` has no state yet: report ``pending``, and on the
    next call the outcome for that config (``success`` by default; ``failed``; or ``pending``
    forever). Like the real one it needs the config in its config file and refuses to run under
    user GPU pods (recorded in ``violations``).

    Its config file is the ConfigMap mounted as a volume, which kubelet updates only after its
    sync period plus its ConfigMap cache TTL: it sees the ConfigMap as it was ``mounted_delay_s``
    ago (the newest copy it has read, at construction and at each ``react``, that old; before it
    has one, the first it read, as the file it started with)."""

    def __init__(self, server: ApiServer, outcomes: dict[str, str] | None = None,
                 config_map: str = "headroom-mig-parted-config", *, clock: VirtualClock,
                 mounted_delay_s: float = 90.0) -> None:
        self.server = server
        self.outcomes = outcomes or {}
        self.config_map = config_map
        self.clock = clock
        self.mounted_delay_s = mounted_delay_s
        self.applied: list[tuple[str, str]] = []
        self.violations: list[str] = []
        self._copies: list[tuple[datetime, frozenset[str]]] = []
        self._read_config_map()

    def _read_config_map(self) -> None:
        stored = self.server.find("v1", "ConfigMap", self.config_map, GPU_OPERATOR_NS)
        text = (stored or {}).get("data", {}).get("config.yaml", "")
        configs = (yaml.safe_load(text) or {}).get("mig-configs", {}) if text else {}
        self._copies.append((self.clock.now(), frozenset(configs)))

    def mounted(self) -> frozenset[str]:
        """The config names in the mounted file now."""
        cutoff = self.clock.now() - timedelta(seconds=self.mounted_delay_s)
        old_enough = [names for at, names in self._copies if at <= cutoff]
        return old_enough[-1] if old_enough else self._copies[0][1]

    def _known(self, product: str, config: str) -> bool:
        return config in self.mounted() or builtin_layout(product, config) is not None

    def react(self) -> None:
        self._read_config_map()
        for node in self.server.list("v1", "Node"):
            labels = node["metadata"].get("labels") or {}
            config, state = labels.get(MIG_CONFIG), labels.get(MIG_STATE, "")
            name = node["metadata"]["name"]
            if config is None:
                continue
            if not state:
                self._label(name, "pending")
            elif state == "pending":
                outcome = self.outcomes.get(config, "success")
                if outcome == "success" and not self._known("A100-80GB", config):
                    outcome = "failed"
                busy = self._user_gpu_pods(name)
                if outcome == "success" and busy:
                    self.violations.append(f"{name}: reconfigured under {busy}")
                if outcome != "pending":
                    self._label(name, outcome)
                    self.applied.append((name, f"{config}:{outcome}"))

    def _user_gpu_pods(self, node: str) -> list[str]:
        """The pods it would reconfigure under: every pod a drain should have removed, and a
        DaemonSet pod that requests GPUs unless it is one of the GPU Operator's (which it stops
        itself); finished pods hold nothing."""
        busy = []
        for pod in self.server.list("v1", "Pod"):
            if pod["spec"].get("nodeName") != node or pod.get("status", {}).get("phase") in (
                    "Succeeded", "Failed"):
                continue
            daemon = any(ref["kind"] == "DaemonSet"
                         for ref in pod["metadata"].get("ownerReferences") or [])
            operand = daemon and pod["metadata"].get("namespace") == GPU_OPERATOR_NS
            gpus = any(r == "nvidia.com/gpu" or r.startswith("nvidia.com/mig-")
                       for r in _requests(pod))
            if not daemon or (gpus and not operand):
                busy.append(pod["metadata"]["name"])
        return busy

    def _label(self, node: str, state: str) -> None:
        self.server.update("v1", "Node", node, {"metadata": {"labels": {MIG_STATE: state}}},
                           manager="nvidia-mig-manager")


class FakeReplicaController:
    """Keeps ``replicas`` Ready pods labelled ``app=<app>``, placing new ones on schedulable
    nodes with a free ``nvidia.com/mig-1g.10gb`` slice (scheduler + ReplicaSet + kubelet)."""

    def __init__(self, server: ApiServer, app: str, replicas: int, namespace: str = "models"
                 ) -> None:
        self.server, self.app, self.replicas, self.namespace = server, app, replicas, namespace
        self._serial = itertools.count(100)

    def _free_node(self) -> str | None:
        pods = self.server.list("v1", "Pod")
        for node in self.server.list("v1", "Node"):
            if node["spec"].get("unschedulable"):
                continue
            allocatable = node["status"].get("allocatable", {})
            slots = int(allocatable.get("nvidia.com/mig-1g.10gb", 0))
            used = sum(1 for p in pods if p["spec"].get("nodeName") == node["metadata"]["name"]
                       and "nvidia.com/mig-1g.10gb" in _requests(p))
            if slots > used:
                return str(node["metadata"]["name"])
        return None

    def react(self) -> None:
        mine = [p for p in self.server.list("v1", "Pod", self.namespace)
                if (p["metadata"].get("labels") or {}).get("app") == self.app]
        for _ in range(self.replicas - len(mine)):
            node = self._free_node()
            if node is None:
                return
            self.server.seed(gpu_pod(f"{self.app}-{next(self._serial)}", node,
                                     namespace=self.namespace, labels={"app": self.app},
                                     owner_kind="Deployment", owner_name=self.app))


class FakeReplicaSetScaleDown:
    """A Deployment's ReplicaSet when its ``spec.replicas`` drops below its pods: deletes the
    excess pods in kube-controller-manager's order (``ActivePodsWithRanks``): unscheduled,
    then not ready, then the lower ``controller.kubernetes.io/pod-deletion-cost``, then those
    doubled up with more of its pods on their node, then the newest (seeded later; pods seeded
    in one second: the later name)."""

    def __init__(self, server: ApiServer, deployment: str, namespace: str = "models") -> None:
        self.server, self.deployment, self.namespace = server, deployment, namespace
        self.deleted: list[str] = []

    def _rank(self, pod: dict[str, Any], on_node: dict[str, int]) -> tuple[Any, ...]:
        node = pod["spec"].get("nodeName", "")
        cost = int((pod["metadata"].get("annotations") or {}).get(DELETION_COST, "0"))
        ready = any(c["type"] == "Ready" and c["status"] == "True"
                    for c in pod.get("status", {}).get("conditions") or [])
        return (bool(node), ready, cost, -on_node.get(node, 0))

    def react(self) -> None:
        deployment = self.server.get("apps/v1", "Deployment", self.deployment, self.namespace)
        selector = deployment["spec"]["selector"]["matchLabels"]
        mine = [p for p in self.server.list("v1", "Pod", self.namespace)
                if all((p["metadata"].get("labels") or {}).get(k) == v
                       for k, v in selector.items())]
        on_node: dict[str, int] = {}
        for pod in mine:
            node = pod["spec"].get("nodeName", "")
            on_node[node] = on_node.get(node, 0) + 1
        excess = len(mine) - int(deployment["spec"]["replicas"])
        ranked = sorted(mine, key=lambda p: (p["metadata"]["creationTimestamp"],
                                             p["metadata"]["name"]), reverse=True)  # newest
        ranked.sort(key=lambda p: self._rank(p, on_node))  # stable: the newest first on ties
        for pod in ranked[:max(0, excess)]:
            self.server.delete("v1", "Pod", pod["metadata"]["name"], self.namespace)
            self.deleted.append(pod["metadata"]["name"])


def _requests(pod: dict[str, Any]) -> dict[str, Any]:
    requests: dict[str, Any] = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
    return requests
