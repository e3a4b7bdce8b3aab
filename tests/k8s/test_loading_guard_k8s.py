"""The leader's loading guard against the API test server: a model's pod that loads carries
karpenter.sh/do-not-disrupt (Cluster Autoscaler: safe-to-evict "false") until it is ready."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from apiserver import ApiServer
from k8s_builders import MODELS_NS, gpu_node, gpu_pod, model_deployment
from k8s_harness import leading, make_backend

from controlplane.adapters.k8s.inventory import parse_pod
from controlplane.domain.errors import TransientError
from controlplane.domain.loading_guard import GuardChange, GuardSync
from controlplane.domain.timestamps import utc_text
from controlplane.serve_k8s import guard_loading
from controlplane.sim.clock import VirtualClock

HOLD = "karpenter.sh/do-not-disrupt"
MARK = "headroom.dev/loading-guard"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def model_pod(name: str, clock: VirtualClock, *, app: str = "m", ready: bool = False,
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod of app ``app`` on a100-1 whose Ready condition changed a minute ago."""
    obj = gpu_pod(name, "a100-1", labels={"app": app}, ready=ready, owner_kind="ReplicaSet",
                  owner_name=f"{app}-rs")
    obj["status"]["conditions"][0]["lastTransitionTime"] = utc_text(clock.now())
    obj["status"]["startTime"] = obj["status"]["conditions"][0]["lastTransitionTime"]
    if annotations:
        obj["metadata"]["annotations"] = annotations
    return obj


def seed(server: ApiServer, clock: VirtualClock) -> None:
    """Model m's loading pod m-0 and ready pod m-1; m-2 someone annotated do-not-disrupt
    "false"; x-0 loads but belongs to no model workload."""
    server.seed(gpu_node("a100-1", gpus=1))
    server.seed(model_deployment("m", replicas=3))
    server.seed(model_pod("m-0", clock))
    server.seed(model_pod("m-1", clock, ready=True))
    server.seed(model_pod("m-2", clock, annotations={HOLD: "false"}))
    server.seed(model_pod("x-0", clock, app="x"))
    clock.advance(60)



def annotations_of(server: ApiServer, name: str) -> dict[str, str]:
    found: dict[str, str] = server.get("v1", "Pod", name, MODELS_NS)["metadata"].get(
        "annotations") or {}
    return found


def test_a_loading_model_pod_is_guarded_until_it_is_ready_then_released(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver, clock)
    backend = leading(apiserver, clock)
    guarded = backend.guard_loading()
    assert guarded.lines() == ("guard models/m-0: loading: not ready for 60 s",)
    assert guarded.guarded_pods == 1
    assert annotations_of(apiserver, "m-0") == {HOLD: "true", MARK: utc_text(clock.now())}
    assert annotations_of(apiserver, "m-1") == {}
    assert annotations_of(apiserver, "m-2") == {HOLD: "false"}  # someone else's, left as it is
    assert annotations_of(apiserver, "x-0") == {}  # no model's workload selects it
    clock.advance(30)
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert backend.guard_loading() == GuardSync((), 1)  # still loading: nothing to change
    status = apiserver.get("v1", "Pod", "m-0", MODELS_NS)["status"]
    status["conditions"][0]["status"] = "True"
    apiserver.set_status("v1", "Pod", "m-0", status, MODELS_NS)
    released = backend.guard_loading()
    assert released.lines() == ("release models/m-0: ready",)
    assert released.guarded_pods == 0
    assert annotations_of(apiserver, "m-0") == {}


def test_a_relayout_drain_still_evicts_a_pod_only_headroom_guards(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver, clock)
    leading(apiserver, clock).guard_loading()
    guarded = parse_pod(apiserver.get("v1", "Pod", "m-0", MODELS_NS))
    assert not guarded.do_not_disrupt  # Headroom's own relayout weighed its surge already
    apiserver.update("v1", "Pod", "m-1", {"metadata": {"annotations": {HOLD: "true"}}},
                     MODELS_NS)
    assert parse_pod(apiserver.get("v1", "Pod", "m-1", MODELS_NS)).do_not_disrupt


def test_under_cluster_autoscaler_a_loading_pod_is_marked_not_safe_to_evict(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver, clock)
    backend = leading(apiserver, clock, node_provisioner="cluster-autoscaler")
    assert backend.guard_loading().lines() != ()
    assert annotations_of(apiserver, "m-0") == {SAFE_TO_EVICT: "false",
                                              MARK: utc_text(clock.now())}


def test_a_follower_and_a_dry_run_write_no_guard(apiserver: ApiServer,
                                                 clock: VirtualClock) -> None:
    seed(apiserver, clock)
    leader = leading(apiserver, clock)
    follower = make_backend(apiserver, clock, identity="headroom-1")
    assert not follower.elector.try_acquire_or_renew(clock.now())
    assert follower.guard_loading() == GuardSync()
    dry = make_backend(apiserver, clock, dry_run=True, identity="headroom-2")
    leader.elector.release()
    assert dry.elector.try_acquire_or_renew(clock.now())
    assert dry.guard_loading().lines() == ("guard models/m-0: loading: not ready for 60 s",)
    assert [(w.verb, w.name) for w in dry.planned_writes() if w.kind == "Pod"] == [
        ("merge_patch", "m-0")]
    assert annotations_of(apiserver, "m-0") == {}


def test_a_pod_that_never_gets_ready_is_released_after_the_longest_hold(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver, clock)
    backend = leading(apiserver, clock, loading_guard_max_s=300.0)
    backend.guard_loading()
    clock.advance(300)
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert backend.guard_loading().lines() == (
        "release models/m-0: loading_too_long: not ready 300 s after the guard began "
        "(k8s.loading_guard_max_s 300 s)",)
    clock.advance(30)
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert backend.guard_loading().lines() == ()
    assert annotations_of(apiserver, "m-0") == {}


def test_serve_logs_a_guard_that_cannot_reach_the_api_and_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    def unreachable() -> GuardSync:
        raise TransientError("kubernetes API unreachable: connection refused")

    guard = GuardChange(MODELS_NS, "m-0", True, "loading: not ready for 60 s")
    with caplog.at_level(logging.INFO, logger="headroom.serve"):
        guard_loading(unreachable)
        guard_loading(lambda: GuardSync((guard,), 1))
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "loading_guard.failed"), ("INFO", "loading_guard.changed")]
    assert caplog.records[0].__dict__["error"] == (
        "kubernetes API unreachable: connection refused")
    assert caplog.records[1].__dict__["change"] == (
        "guard models/m-0: loading: not ready for 60 s")
