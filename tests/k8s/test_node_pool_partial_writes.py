"""A pool resize that fails half-way leaves the old size observed, so the next tick plans and
writes the whole target again (the NodePool annotation is the commit point, written last). A
placeholder Deployment or node limit changed by someone else after a resize is noted, and the
next tick writes the same target again."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from apiserver import ApiServer
from k8s_builders import HEADROOM_NS, nodepool
from k8s_harness import assert_pool_drift_noted, make_backend

from controlplane.adapters.k8s.backend import K8sBackend
from controlplane.adapters.k8s.manifests import placeholder_deployment
from controlplane.domain.actions import ScaleNodePool
from controlplane.domain.desired import DesiredState, DesiredTarget
from controlplane.domain.guards import GuardLimits, GuardMemory
from controlplane.domain.planner import plan
from controlplane.sim.clock import VirtualClock

PLACEHOLDERS = "headroom-warm-l4"


def leading_l4(server: ApiServer, clock: VirtualClock) -> K8sBackend:
    server.seed(nodepool("l4", gpu_name="l4"))
    backend = make_backend(server, clock)
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert backend.node_pools.set_size("l4", 1).ok
    return backend


def next_tick_actions(backend: K8sBackend, clock: VirtualClock, nodes: int
                      ) -> tuple[ScaleNodePool, ...]:
    limits = GuardLimits(max_step=4, stabilization_s=0.0)
    desired = DesiredState((DesiredTarget("l4", nodes, "test"),), ())
    planned, _ = plan(backend.reader.snapshot(), desired, GuardMemory(), limits, limits,
                      clock.now())
    return tuple(a for a in planned.actions if isinstance(a, ScaleNodePool))


@pytest.mark.parametrize(("method", "path"), [
    ("PATCH", f"/deployments/{PLACEHOLDERS}"),
    ("PATCH", "/nodepools/l4"),
    ("PATCH", "/priorityclasses/"),
])
def test_a_failed_write_leaves_the_old_size_observed_and_the_next_tick_completes_it(
        apiserver: ApiServer, clock: VirtualClock, method: str, path: str) -> None:
    backend = leading_l4(apiserver, clock)
    apiserver.inject_fault(method, path, 503)
    first = backend.node_pools.set_size("l4", 3)
    assert not first.ok and first.retryable
    observed = backend.reader.snapshot().pool("l4")
    assert observed is not None and observed.target_nodes == 1
    actions = next_tick_actions(backend, clock, 3)
    assert [(a.from_nodes, a.to_nodes) for a in actions] == [(1, 3)]
    assert backend.node_pools.set_size("l4", actions[0].to_nodes).ok
    placeholder = apiserver.get("apps/v1", "Deployment", PLACEHOLDERS, HEADROOM_NS)
    assert placeholder["spec"]["replicas"] == 3
    limits = apiserver.get("karpenter.sh/v1", "NodePool", "l4")["spec"]["limits"]
    assert limits == {"nodes": "3"}
    assert next_tick_actions(backend, clock, 3) == ()


def test_a_rejected_nodepool_write_says_the_placeholders_were_already_written(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    backend = leading_l4(apiserver, clock)
    apiserver.inject_fault("PATCH", "/nodepools/l4", 422)
    outcome = backend.node_pools.set_size("l4", 3)
    assert not outcome.ok and not outcome.retryable
    assert outcome.message == ("NodePool l4: HTTP 422: injected fault 422; its placeholder "
                               "Deployment already asks for 3 nodes")
    placeholder = apiserver.get("apps/v1", "Deployment", PLACEHOLDERS, HEADROOM_NS)
    assert placeholder["spec"]["replicas"] == 3


def test_a_rejected_placeholder_write_names_its_deployment_and_leaves_the_nodepool(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    backend = leading_l4(apiserver, clock)
    apiserver.inject_fault("PATCH", f"/deployments/{PLACEHOLDERS}", 422)
    outcome = backend.node_pools.set_size("l4", 3)
    assert not outcome.ok and not outcome.retryable
    assert outcome.message == (f"Deployment {HEADROOM_NS}/{PLACEHOLDERS}: HTTP 422: injected "
                               "fault 422")
    observed = backend.reader.snapshot().pool("l4")
    assert observed is not None and observed.target_nodes == 1


def test_a_completed_resize_is_observed_at_its_target_with_its_placeholders(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    backend = leading_l4(apiserver, clock)
    assert backend.node_pools.set_size("l4", 2).ok
    placeholder = apiserver.get("apps/v1", "Deployment", PLACEHOLDERS, HEADROOM_NS)
    assert placeholder["spec"]["replicas"] == 2
    assert next_tick_actions(backend, clock, 2) == ()


def _delete_placeholders(server: ApiServer) -> None:
    server.delete("apps/v1", "Deployment", PLACEHOLDERS, HEADROOM_NS)


def _scale_placeholders_by_hand(server: ApiServer) -> None:
    server.update("apps/v1", "Deployment", PLACEHOLDERS, {"spec": {"replicas": 0}}, HEADROOM_NS,
                  manager="kubectl")


def _lower_the_node_limit(server: ApiServer) -> None:  # e.g. a GitOps sync of the NodePool
    server.update("karpenter.sh/v1", "NodePool", "l4",
                  {"spec": {"limits": {"nodes": "1"}}}, manager="argocd")


def _ask_for_a_mig_slice(server: ApiServer) -> None:  # kubectl edit of the pod template
    wanted = {"nvidia.com/mig-3g.40gb": "1", "cpu": "10m", "memory": "16Mi"}
    deployment = server.get("apps/v1", "Deployment", PLACEHOLDERS, HEADROOM_NS)
    containers = deployment["spec"]["template"]["spec"]["containers"]
    containers[0]["resources"] = {"requests": wanted, "limits": wanted}
    server.update("apps/v1", "Deployment", PLACEHOLDERS, {"spec": {"template": {"spec": {
        "containers": containers}}}}, HEADROOM_NS, manager="kubectl-edit")


def _select_another_nodepool(server: ApiServer) -> None:
    server.update("apps/v1", "Deployment", PLACEHOLDERS, {"spec": {"template": {"spec": {
        "nodeSelector": {"karpenter.sh/nodepool": "a100-80gb"}}}}}, HEADROOM_NS,
                  manager="kubectl-edit")


def _pin_another_gpu_product(server: ApiServer) -> None:  # a key Headroom never applied
    server.update("apps/v1", "Deployment", PLACEHOLDERS, {"spec": {"template": {"spec": {
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}}}, HEADROOM_NS,
                  manager="kubectl-edit")


def _drop_the_anti_affinity(server: ApiServer) -> None:
    server.update("apps/v1", "Deployment", PLACEHOLDERS, {"spec": {"template": {"spec": {
        "affinity": None}}}}, HEADROOM_NS, manager="kubectl-edit")


def _drop_the_pod_security_context(server: ApiServer) -> None:  # admission refuses its pods
    server.update("apps/v1", "Deployment", PLACEHOLDERS, {"spec": {"template": {"spec": {
        "securityContext": None}}}}, HEADROOM_NS, manager="kubectl-edit")


def _let_the_pause_container_escalate(server: ApiServer) -> None:
    deployment = server.get("apps/v1", "Deployment", PLACEHOLDERS, HEADROOM_NS)
    containers = deployment["spec"]["template"]["spec"]["containers"]
    containers[0]["securityContext"]["allowPrivilegeEscalation"] = True
    server.update("apps/v1", "Deployment", PLACEHOLDERS, {"spec": {"template": {"spec": {
        "containers": containers}}}}, HEADROOM_NS, manager="kubectl-edit")


@pytest.mark.parametrize(("change", "noted"), [
    (_delete_placeholders, "placeholder Deployment headroom-warm-l4 missing"),
    (_scale_placeholders_by_hand, "placeholder Deployment holds 0 nodes"),
    (_lower_the_node_limit, "NodePool nodes limit 1, not 2"),
    (_ask_for_a_mig_slice, "placeholder Deployment headroom-warm-l4 asks for "
                           "nvidia.com/mig-3g.40gb: 1, not none"),
    (_select_another_nodepool, "placeholder Deployment headroom-warm-l4 selects nodes "
                               "karpenter.sh/nodepool=a100-80gb, not karpenter.sh/nodepool=l4"),
    (_pin_another_gpu_product, "placeholder Deployment headroom-warm-l4 selects nodes "
                               "karpenter.sh/nodepool=l4, nvidia.com/gpu.product="
                               "NVIDIA-H100-80GB-HBM3, not karpenter.sh/nodepool=l4"),
    (_drop_the_anti_affinity, "placeholder Deployment headroom-warm-l4 affinity changed"),
    (_drop_the_pod_security_context, "placeholder Deployment headroom-warm-l4 pod "
                                     "securityContext changed"),
    (_let_the_pause_container_escalate, "placeholder Deployment headroom-warm-l4 container "
                                        "pause securityContext changed"),
])
def test_a_pool_changed_by_someone_else_is_noted_and_its_target_written_again(
        apiserver: ApiServer, clock: VirtualClock, change: Callable[[ApiServer], None],
        noted: str) -> None:
    backend = leading_l4(apiserver, clock)
    assert backend.node_pools.set_size("l4", 2).ok
    change(apiserver)
    assert_pool_drift_noted(backend.reader.snapshot(), "l4", noted, 2)
    actions = next_tick_actions(backend, clock, 2)
    assert [(a.from_nodes, a.to_nodes, a.reason) for a in actions] == [
        (2, 2, "pool_objects_changed")]
    assert backend.node_pools.set_size("l4", actions[0].to_nodes).ok
    placeholder = apiserver.get("apps/v1", "Deployment", PLACEHOLDERS, HEADROOM_NS)
    assert placeholder["spec"]["replicas"] == 2
    assert placeholder["spec"]["template"]["spec"] == placeholder_deployment(
        "l4", "l4", 2, HEADROOM_NS, "headroom-warm-placeholder",
        "registry.k8s.io/pause:3.10")["spec"]["template"]["spec"]
    limits = apiserver.get("karpenter.sh/v1", "NodePool", "l4")["spec"]["limits"]
    assert limits == {"nodes": "2"}
    assert backend.reader.snapshot().notes == ()
    assert next_tick_actions(backend, clock, 2) == ()
    writes = len(apiserver.writes())
    assert backend.node_pools.set_size("l4", 2).ok  # a second write of the same target
    assert backend.reader.snapshot().notes == ()
    assert {w.content_type for w in apiserver.writes()[writes:]} == {
        "application/apply-patch+yaml"}  # the same applies again, nothing to reset
