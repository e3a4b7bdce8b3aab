"""Pods that hold a node's GPUs through a MIG re-layout (pure; REFERENCE.md §1.7).

A drain leaves DaemonSet pods and static pods' mirrors on the node (they tolerate the cordon, and
their controller or the kubelet would recreate them at once). The GPU Operator's MIG manager
stops only the GPU Operator's own operands (it flips their ``nvidia.com/gpu.deploy.<operand>``
labels to ``paused-for-mig-change`` and waits for them to exit) and requires that no other
workload uses the GPUs it reconfigures. So a pod the drain leaves that requests GPUs and is not
the GPU Operator's would make the reconfiguration fail, or disrupt the pod, and nothing Headroom
may do removes it: the relayout must not go on while one runs (``gpu_daemon_pods``).

Which pods are the GPU Operator's: those in its namespace (``k8s.gpu_operator_namespace``), the
namespace Headroom already reads the MIG manager's ConfigMap from (so a relayout cannot work with
it wrong). All the operands the MIG manager pauses run there; a DaemonSet of the user's that
the GPU Operator did not make but that runs there is exempt too, a documented limit. Nothing
else exempts a pod: app labels and ``nvidia.com/gpu.deploy.*`` node selectors can be copied by
anyone, and wrongly exempting a pod would reconfigure GPUs under it, where wrongly holding one
only waits, naming it.

A pod blocks when it is one the drain leaves, has not finished (phase ``Succeeded`` or
``Failed``: it holds no GPU), requests at least one GPU-like resource (``nvidia.com/gpu``, a
renamed share ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``) and is not the GPU Operator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class UndrainedPod:
    """A pod on the node that a drain leaves (a DaemonSet's, or a static pod's mirror)."""

    namespace: str
    name: str
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    requests: tuple[tuple[str, int], ...] = ()  # GPU-like extended resources only

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def gpu_pods_in_the_way(pods: Sequence[UndrainedPod], operator_namespace: str
                        ) -> tuple[str, ...]:
    """The pods (``namespace/name``) of ``pods`` a MIG reconfiguration must not run under: not
    finished, requesting GPUs, and not in the GPU Operator's namespace."""
    return tuple(p.key for p in pods
                 if p.phase not in FINISHED_PHASES and p.namespace != operator_namespace
                 and any(quantity > 0 for _, quantity in p.requests))


def gpu_daemon_pods(keys: Sequence[str]) -> str:
    """Why the relayout waits for ``keys`` (``gpu_pods_in_the_way``) to go; "" for none."""
    if not keys:
        return ""
    one = len(keys) == 1
    listed, it = ", ".join(keys), "it" if one else "them"
    does = "requests GPUs and is" if one else "request GPUs and are"
    return (f"gpu_daemon_pods: {listed} ({does} left running by a drain (DaemonSet or static "
            "pods) and not stopped by the GPU Operator's MIG manager, which stops only its own; "
            f"delete {it}, or keep {it} off the node with a nodeSelector or node affinity, then "
            "the relayout goes on)")


def gpu_daemon_pods_refusal(node: str, keys: Sequence[str]) -> str:
    """Why a relayout of ``node`` must not start ("" when it may): refused before any surge or
    cordon, so that no capacity is cordoned away for a relayout that could not finish."""
    why = gpu_daemon_pods(keys)
    return f"node {node}: {why}" if why else ""
