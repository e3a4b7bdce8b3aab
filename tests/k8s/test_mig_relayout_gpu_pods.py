"""Pods a drain leaves on a node and a MIG relayout, decided purely from values: which of them
hold the relayout (a user's DaemonSet or static pod that requests GPUs), and how the relayout
waits for them before the cordon, in the drain and before the MIG label."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from test_mig_relayout_machine import POD, POLICY, T0, TO, draining_until, fresh, view

from controlplane.domain.mig_relayout import RelayoutPhase, step_relayout
from controlplane.domain.relayout_effects import Evict, LabelMigConfig, SetUnschedulable
from controlplane.domain.relayout_gpu_pods import (
    UndrainedPod,
    gpu_daemon_pods,
    gpu_daemon_pods_refusal,
    gpu_pods_in_the_way,
)

OPERATOR_NS = "gpu-operator"
SLICE = "nvidia.com/mig-1g.10gb"
PROBE = UndrainedPod("monitoring", "gpu-probe-a100-1", "Running", ((SLICE, 1),))
PROBE_WHY = (
    "gpu_daemon_pods: monitoring/gpu-probe-a100-1 (requests GPUs and is left running by a drain "
    "(DaemonSet or static pods) and not stopped by the GPU Operator's MIG manager, which stops "
    "only its own; delete it, or keep it off the node with a nodeSelector or node affinity, "
    "then the relayout goes on)")


def test_a_running_or_pending_user_pod_the_drain_leaves_that_requests_gpus_is_in_the_way(
) -> None:
    whole = UndrainedPod("monitoring", "dcgm-probe", "Pending", (("nvidia.com/gpu", 1),))
    shared = UndrainedPod("kube-system", "static-probe", "Running",
                          (("nvidia.com/gpu.shared", 2),))
    assert gpu_pods_in_the_way((PROBE, whole, shared), OPERATOR_NS) == (
        "monitoring/gpu-probe-a100-1", "monitoring/dcgm-probe", "kube-system/static-probe")


def test_the_gpu_operators_pods_pods_without_gpus_and_finished_pods_are_not_in_the_way() -> None:
    dcgm_exporter = replace(PROBE, namespace=OPERATOR_NS, name="nvidia-dcgm-exporter-a100-1")
    log_shipper = UndrainedPod("logging", "fluent-bit-a100-1", "Running")
    zero = replace(PROBE, name="asks-none", requests=((SLICE, 0),))
    done = [replace(PROBE, name=phase.lower(), phase=phase) for phase in ("Succeeded", "Failed")]
    assert gpu_pods_in_the_way((dcgm_exporter, log_shipper, zero, *done), OPERATOR_NS) == ()
    # the namespace is the configured one, not a fixed name
    assert gpu_pods_in_the_way((dcgm_exporter,), "nvidia-gpu-operator") == (
        "gpu-operator/nvidia-dcgm-exporter-a100-1",)


def test_a_relayout_is_refused_before_the_cordon_naming_every_pod_in_the_way_and_what_to_do(
) -> None:
    assert gpu_daemon_pods_refusal("a100-1", ("monitoring/gpu-probe-a100-1",)) == (
        f"node a100-1: {PROBE_WHY}")
    assert gpu_daemon_pods(("monitoring/a", "monitoring/b")) == (
        "gpu_daemon_pods: monitoring/a, monitoring/b (request GPUs and are left running by a "
        "drain (DaemonSet or static pods) and not stopped by the GPU Operator's MIG manager, "
        "which stops only its own; delete them, or keep them off the node with a nodeSelector "
        "or node affinity, then the relayout goes on)")
    assert gpu_daemon_pods_refusal("a100-1", ()) == ""


def test_a_drain_evicts_none_while_a_gpu_pod_it_leaves_runs_and_goes_on_once_it_is_gone() -> None:
    draining = draining_until(T0 + timedelta(seconds=1200))
    held = step_relayout(draining, replace(view(cordoned=True), undrained_gpu_pods=(PROBE.key,)),
                         T0, POLICY)
    assert (held.relayout.phase, held.effects) == (RelayoutPhase.DRAIN, ())
    assert held.relayout.wait_reason == PROBE_WHY
    only = step_relayout(draining, replace(view(cordoned=True, pods=()),
                                           undrained_gpu_pods=(PROBE.key,)), T0, POLICY)
    assert only.relayout.phase is RelayoutPhase.DRAIN  # not on to the MIG label
    gone = step_relayout(held.relayout, view(cordoned=True), T0, POLICY)
    assert gone.effects == (Evict(POD.namespace, POD.name),)


def test_a_drain_a_gpu_pod_holds_past_its_deadline_aborts_uncordoned_naming_it() -> None:
    draining = draining_until(T0 + timedelta(seconds=1200))
    late = step_relayout(draining, replace(view(cordoned=True, pods=()),
                                           undrained_gpu_pods=(PROBE.key,)),
                         T0 + timedelta(seconds=1200), POLICY)
    assert late.relayout.phase is RelayoutPhase.ABORTED
    assert late.effects == (SetUnschedulable("a100-1", False),)
    assert late.relayout.alert == (
        f"drain_timeout: monitoring/gpu-probe-a100-1 still running; {PROBE_WHY}")


def test_the_mig_label_is_not_written_while_a_gpu_pod_the_drain_left_runs_on_the_node() -> None:
    relabel = replace(fresh(), phase=RelayoutPhase.RELABEL,
                      deadline_at=T0 + timedelta(seconds=POLICY.timeout_s(RelayoutPhase.RELABEL)
                                                 or 0))
    drained = view(cordoned=True, pods=())  # its config long present
    held = step_relayout(relabel, replace(drained, undrained_gpu_pods=(PROBE.key,)), T0, POLICY)
    assert (held.relayout.phase, held.effects) == (RelayoutPhase.RELABEL, ())
    assert held.relayout.wait_reason == PROBE_WHY
    gone = step_relayout(held.relayout, drained, T0, POLICY)
    assert gone.relayout.phase is RelayoutPhase.AWAIT_MIG
    assert gone.effects == (LabelMigConfig("a100-1", TO),)
    late = step_relayout(relabel, replace(drained, undrained_gpu_pods=(PROBE.key,)),
                         relabel.deadline_at or T0, POLICY)
    assert late.relayout.phase is RelayoutPhase.ABORTED
    assert late.effects == (SetUnschedulable("a100-1", False),)
    assert late.relayout.alert == f"relabel_timeout: {PROBE_WHY}"
