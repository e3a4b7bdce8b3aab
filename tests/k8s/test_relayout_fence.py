"""MIG re-layout records are fenced by the leader's term, as its tick records are: once another
replica claimed the store's next fencing token, a deposed leader's re-layout step is not saved
over the next leader's record, its advance says so on one line, and a re-layout it starts is a
failed `not_leader` outcome rather than an exception out of the tick."""

from __future__ import annotations

import logging

import pytest
from apiserver import ApiServer
from relayout_scenario import TARGET, relayout_actuator, seed

from controlplane.actuation import Actuators, apply_action
from controlplane.decision_retry import RetryingDecisionStore
from controlplane.domain.actions import ActionOutcome, SetReplicas
from controlplane.domain.errors import Fenced
from controlplane.serve_k8s import _advance
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.relayout import SqlRelayoutStore


def _fenced_relayouts(store: Store, clock: VirtualClock) -> SqlRelayoutStore:
    """replica-a's re-layout store, fenced by the term of its tick records."""
    decisions = RetryingDecisionStore(store, writer="replica-a", term=lambda: 1)
    return SqlRelayoutStore(store.engine, fence=lambda: decisions.fence_token(clock.now()))


def test_a_deposed_leaders_relayout_step_is_not_saved_and_its_advance_says_so(
        apiserver: ApiServer, clock: VirtualClock, store_url: str,
        caplog: pytest.LogCaptureFixture) -> None:
    seed(apiserver)
    store = Store.open(store_url, migrate=True)
    relayouts = _fenced_relayouts(store, clock)
    mig = relayout_actuator(apiserver, clock, relayouts)
    assert mig.start_relayout("a100-1", TARGET, "placement").ok  # claims token 1
    started = relayouts.relayouts_of("a100-1")
    assert len(started) == 1
    assert store.claim_fence("replica-b", clock.now()) == 2  # another replica took over
    clock.advance(30)
    with caplog.at_level(logging.INFO):
        _advance(mig)  # raises nothing into the scheduler
    assert relayouts.relayouts_of("a100-1") == started  # the next leader's record stands
    [line] = [r for r in caplog.records if r.getMessage() == "relayouts.fenced"]
    assert line.levelno == logging.ERROR and "token 1" in line.__dict__["error"]
    store.engine.dispose()


def test_an_unfenced_relayout_store_saves_whatever_was_claimed(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    seed(apiserver)
    store = Store.open(sqlite_url, migrate=True)
    store.claim_fence("replica-b", clock.now())
    relayouts = SqlRelayoutStore(store.engine)  # a dry run or in-memory store: no term
    assert relayout_actuator(apiserver, clock, relayouts).start_relayout(
        "a100-1", TARGET, "placement").ok
    assert len(relayouts.relayouts_of("a100-1")) == 1


class FencedReplicas:
    """A replica actuator whose record the store fenced off."""

    def set_replicas(self, model: str, replicas: int) -> ActionOutcome:
        raise Fenced(1, 2, "replica-b")


class NoPools:
    def set_size(self, pool: str, nodes: int) -> ActionOutcome:
        raise AssertionError("not called")


def test_an_action_whose_record_is_fenced_off_is_a_failed_not_leader_outcome() -> None:
    action = SetReplicas("m", 1, 2, "forecast")
    outcome = apply_action(action, Actuators(NoPools(), FencedReplicas()))
    assert (outcome.ok, outcome.retryable) == (False, False)
    assert outcome.message.startswith("not_leader: leader's writes: fenced: this process's token 1")
