"""A leader's Kubernetes requests end by its renew deadline: a gated call that starts just before
it sends nothing after it and waits for nothing past it, so its writes cannot land after a
follower took the Lease over (the server holds a request; the client gives it up)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

import pytest
from apiserver import ApiServer, Hold
from k8s_builders import HEADROOM_NS, MODELS_NS, gpu_node, model_deployment, nodepool
from k8s_harness import START_AT, client_for, make_backend
from relayout_scenario import TARGET, seed

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.backend import K8sBackend
from controlplane.adapters.k8s.fence import LeadershipEnded, fenced, monotonic_s
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.lease import LeaseTiming, deadline_on_scale_s, fenced_timeout_s
from controlplane.domain.mig_relayout import RelayoutPhase
from controlplane.sim.clock import VirtualClock

RENEW_DEADLINE_S = 10.0
LEFT_S = 2.0  # time left before the deadline: far more than a few local requests take
TAKEOVER_S = LeaseTiming().lease_duration_s - RENEW_DEADLINE_S  # a follower may take over then
T = TypeVar("T")


def test_a_deadline_carried_onto_another_scale_keeps_the_time_left() -> None:
    assert deadline_on_scale_s(START_AT, START_AT + timedelta(seconds=2.5), 100.0) == 102.5
    assert deadline_on_scale_s(START_AT, START_AT - timedelta(seconds=1), 100.0) == 99.0


def test_a_fenced_request_gets_the_smaller_of_its_timeout_and_the_time_left() -> None:
    assert fenced_timeout_s(10.0, 103.0, 100.0) == 3.0
    assert fenced_timeout_s(10.0, 200.0, 100.0) == 10.0
    assert fenced_timeout_s(10.0, None, 100.0) == 10.0  # no fence: the full timeout


def test_no_time_left_means_no_request() -> None:
    assert fenced_timeout_s(10.0, 100.0, 100.0) is None
    assert fenced_timeout_s(10.0, 99.0, 100.0) is None


def test_a_leader_leads_until_its_renew_deadline_and_a_follower_not_at_all(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    leader = make_backend(apiserver, clock, renew_deadline_s=RENEW_DEADLINE_S)
    follower = make_backend(apiserver, clock, identity="headroom-1")
    renewed_at = clock.now()
    assert leader.elector.try_acquire_or_renew(renewed_at)
    assert not follower.elector.try_acquire_or_renew(renewed_at)
    clock.advance(3)
    assert leader.elector.leads_until_at(clock.now()) == renewed_at + timedelta(
        seconds=RENEW_DEADLINE_S)
    assert follower.elector.leads_until_at(clock.now()) == clock.now()
    clock.advance(RENEW_DEADLINE_S)
    assert leader.elector.leads_until_at(clock.now()) == clock.now()


def scale_of(server: ApiServer, name: str) -> int:
    return int(server.get("apps/v1", "Deployment", name, MODELS_NS)["spec"]["replicas"])


def held_until_takeover(held: Hold, call: Callable[[], T]) -> T | Exception:
    """Run ``call`` (it starts ``LEFT_S`` before its deadline) while the server holds its
    request until a follower could have taken the Lease over, then lets the server go on with
    it; what ``call`` returned or raised."""
    deadline_s = monotonic_s() + LEFT_S
    done: list[T | Exception] = []

    def run() -> None:
        try:
            done.append(call())
        except Exception as error:  # handed to the test to assert on
            done.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    assert held.holding.wait(30)
    time.sleep(max(0.0, deadline_s + TAKEOVER_S - monotonic_s()))
    held.release()
    assert held.handled.wait(30)
    worker.join(90)
    return done[0]


def test_a_request_the_server_holds_past_the_deadline_is_given_up_as_leadership_ended(
        apiserver: ApiServer) -> None:
    apiserver.seed(model_deployment("m", replicas=1))
    api = KubeApi(client_for(apiserver), "headroom", timeout_s=60.0)
    held = apiserver.hold("PATCH", "/deployments/m")

    def patch() -> object:
        with fenced(monotonic_s() + LEFT_S):
            return api.merge_patch("apps/v1", "Deployment", "m", {"spec": {"replicas": 5}},
                                   MODELS_NS)

    raised = held_until_takeover(held, patch)
    assert isinstance(raised, LeadershipEnded) and "leadership ended" in str(raised)
    assert [r.status for r in apiserver.requests] == [499]  # the client had hung up: dropped
    assert scale_of(apiserver, "m") == 1


def test_with_no_time_left_no_request_reaches_the_server(apiserver: ApiServer) -> None:
    api = KubeApi(client_for(apiserver), "headroom")
    with fenced(monotonic_s() - 1.0), pytest.raises(LeadershipEnded, match="not sent"):
        api.scale("Deployment", "m", MODELS_NS, 5)
    assert apiserver.requests == []


def test_a_request_given_up_at_the_deadline_is_not_retried_after_it(
        apiserver: ApiServer) -> None:
    apiserver.seed(gpu_node("a100-1"))
    api = KubeApi(client_for(apiserver), "headroom", timeout_s=60.0)
    held = apiserver.hold("GET", "/nodes/a100-1")  # urllib3 retries a GET that timed out
    with fenced(monotonic_s() + LEFT_S), pytest.raises(LeadershipEnded):
        api.read("v1", "Node", "a100-1")
    held.release()
    assert held.handled.wait(30)
    assert [r.method for r in apiserver.requests] == ["GET"]


def test_requests_outside_a_gated_call_are_not_fenced(apiserver: ApiServer) -> None:
    apiserver.seed(gpu_node("a100-1"))
    api = KubeApi(client_for(apiserver), "headroom")
    with fenced(monotonic_s() - 1.0), fenced(None):  # no deadline inside one that passed
        assert api.read("v1", "Node", "a100-1") is not None
    assert api.read("v1", "Node", "a100-1") is not None


def leader_near_its_deadline(server: ApiServer, clock: VirtualClock) -> K8sBackend:
    """A leader ``LEFT_S`` before its renew deadline (its gate lets a call start)."""
    backend = make_backend(server, clock, renew_deadline_s=RENEW_DEADLINE_S,
                           request_timeout_s=60.0)
    assert backend.elector.try_acquire_or_renew(clock.now())
    clock.advance(RENEW_DEADLINE_S - LEFT_S)
    assert backend.elector.is_leader(clock.now())
    return backend


def test_a_scale_the_server_holds_past_the_leaders_deadline_does_not_land(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(model_deployment("m", replicas=1))
    backend = leader_near_its_deadline(apiserver, clock)
    held = apiserver.hold("PATCH", "/deployments/m/scale")
    outcome = held_until_takeover(held, lambda: backend.replicas.set_replicas("m", 5))
    assert isinstance(outcome, ActionOutcome) and not outcome.ok and outcome.retryable
    assert outcome.message.startswith("not_leader: leadership ended")
    scale_writes = [r for r in apiserver.requests if r.path.endswith("/scale")]
    assert [r.status for r in scale_writes] == [499]
    assert scale_of(apiserver, "m") == 1
    clock.advance(LEFT_S)
    assert not backend.replicas.set_replicas("m", 5).ok  # past the deadline: the gate refuses
    assert scale_of(apiserver, "m") == 1


def test_a_pool_write_held_past_the_deadline_stops_the_writes_after_it(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    backend = leader_near_its_deadline(apiserver, clock)
    held = apiserver.hold("PATCH", f"/namespaces/{HEADROOM_NS}/deployments/")  # placeholders
    outcome = held_until_takeover(held, lambda: backend.node_pools.set_size("a100-80gb", 3))
    assert isinstance(outcome, ActionOutcome) and not outcome.ok and outcome.retryable
    assert "leadership ended" in outcome.message
    assert not [r for r in apiserver.requests if "/nodepools/" in r.path and r.is_write]
    assert "limits" not in apiserver.get("karpenter.sh/v1", "NodePool", "a100-80gb")["spec"]


def test_a_relayout_step_the_server_holds_past_the_deadline_leaves_node_and_store_as_they_were(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    backend = make_backend(apiserver, clock, renew_deadline_s=RENEW_DEADLINE_S,
                           request_timeout_s=60.0, mig_timeout_s=120.0)
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert backend.mig.start_relayout("a100-1", TARGET, "test").ok
    assert backend.elector.try_acquire_or_renew(clock.now())
    clock.advance(RENEW_DEADLINE_S - LEFT_S)
    held = apiserver.hold("PATCH", "/nodes/a100-1")  # the cordon
    before = len(apiserver.requests)
    advanced = held_until_takeover(held, backend.mig.advance)
    assert isinstance(advanced, tuple)
    (waiting,) = advanced
    assert waiting.phase is RelayoutPhase.CORDON and "leadership ended" in waiting.wait_reason
    writes = [(r.method, r.path.rsplit("/", 2)[-2], r.status)
              for r in apiserver.requests[before:] if r.is_write]
    assert writes == [("PATCH", "configmaps", 201), ("PATCH", "nodes", 499)]  # config, cordon
    assert not apiserver.get("v1", "Node", "a100-1").get("spec", {}).get("unschedulable")
    (stored,) = backend.relayouts.active_relayouts()  # the step that failed is not saved:
    assert "leadership ended" not in stored.wait_reason  # the next leader's to move on


def test_a_dry_run_previews_without_a_deadline(apiserver: ApiServer,
                                               clock: VirtualClock) -> None:
    apiserver.seed(model_deployment("m", replicas=1))
    backend = make_backend(apiserver, clock, dry_run=True)
    assert backend.elector.try_acquire_or_renew(clock.now())
    clock.advance(3600)  # no renewal since: a dry run holds no Lease, so it has no deadline
    assert backend.replicas.set_replicas("m", 5).ok
    assert apiserver.writes() == [] and len(backend.planned_writes()) == 1
