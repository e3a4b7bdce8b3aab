"""A relayout that cannot observe the cluster (5xx, unreachable, forbidden) waits in its phase,
says why, and resumes on a later advance: ``advance`` never raises an API error. Starting one
that cannot observe the cluster is a failed outcome of its action, never an exception that ends
the plan."""

from __future__ import annotations

import logging

import pytest
from apiserver import ApiServer
from fake_controllers import FakeMigManager, FakeReplicaController
from k8s_builders import MODELS_NS
from k8s_harness import make_backend
from kubernetes import client
from relayout_scenario import FROM, TARGET, relayout_actuator, seed

from controlplane.actuation import apply_actions
from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.mig import K8sMigRelayoutActuator
from controlplane.domain.actions import RelayoutMig, SetReplicas
from controlplane.domain.mig_layout import builtin_layout
from controlplane.domain.mig_relayout import RelayoutPhase
from controlplane.sim.clock import VirtualClock
from controlplane.store.relayout import MemoryRelayoutStore


def started(apiserver: ApiServer, clock: VirtualClock) -> K8sMigRelayoutActuator:
    seed(apiserver)
    actuator = relayout_actuator(apiserver, clock, MemoryRelayoutStore())
    assert actuator.start_relayout("a100-1", TARGET, "test").ok
    return actuator


@pytest.mark.parametrize(("path", "code", "said"), [
    ("/api/v1/nodes", 503, "HTTP 503"),
    ("/poddisruptionbudgets", 403, "HTTP 403"),
])
def test_an_unobservable_cluster_leaves_the_relayout_waiting_with_the_api_error(
        apiserver: ApiServer, clock: VirtualClock, caplog: pytest.LogCaptureFixture,
        path: str, code: int, said: str) -> None:
    actuator = started(apiserver, clock)
    apiserver.inject_fault("GET", path, code, times=1)
    clock.advance(30)
    with caplog.at_level(logging.WARNING, logger="headroom.k8s.mig"):
        (waiting,) = actuator.advance()
    assert waiting.phase is RelayoutPhase.SURGE
    assert waiting.wait_reason.startswith("observe_failed: ") and said in waiting.wait_reason
    assert actuator.store.active_relayouts() == (waiting,)
    warnings = [r for r in caplog.records if r.getMessage() == "relayout.observe_failed"]
    assert len(warnings) == 1 and warnings[0].levelname == "WARNING"
    assert warnings[0].exc_info is None


def test_an_unreachable_api_server_does_not_escape_advance(apiserver: ApiServer,
                                                           clock: VirtualClock) -> None:
    actuator = started(apiserver, clock)
    nowhere = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    actuator.reader.api = KubeApi(nowhere, "headroom", timeout_s=0.5)
    clock.advance(30)
    (waiting,) = actuator.advance()
    assert "kubernetes API unreachable" in waiting.wait_reason


def test_a_relayout_resumes_and_finishes_once_the_api_answers_again(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    actuator = started(apiserver, clock)
    apiserver.inject_fault("GET", "/api/v1/nodes", 503, times=3)
    mig_manager = FakeMigManager(apiserver, clock=clock)
    replicas = FakeReplicaController(apiserver, "m", replicas=3)
    for _ in range(20):
        clock.advance(30)
        actuator.advance()
        mig_manager.react()
        replicas.react()
    assert actuator.store.relayouts_of("a100-1")[-1].phase is RelayoutPhase.DONE


def test_a_relayout_whose_start_is_forbidden_fails_its_action_and_the_plan_goes_on(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    backend = make_backend(apiserver, clock)
    assert backend.elector.try_acquire_or_renew(clock.now())
    current = builtin_layout("A100-80GB", FROM)
    assert current is not None
    apiserver.inject_fault("GET", "/api/v1/pods", 403, times=1)  # e.g. its token just expired
    relayout, replicas = apply_actions(
        [RelayoutMig("a100-1", current, TARGET, "plan_needs_mig"), SetReplicas("m", 3, 4, "up")],
        backend.actuators)
    assert not relayout.ok and not relayout.retryable and "HTTP 403" in relayout.message
    assert backend.mig.in_flight() == {}
    assert replicas.ok, replicas.message
    assert apiserver.get("apps/v1", "Deployment", "m", MODELS_NS)["spec"]["replicas"] == 4
